// sentencepiece_tokenizer.cc: see sentencepiece_tokenizer.h. sentencepiece's util::Status is
// translated here only.
#include "text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "mm/internal/file.h"

namespace mm::pack {
namespace {

Status FromSp(const sentencepiece::util::Status& st, const std::string& context) {
  if (st.ok()) return Status::OK();
  return Status::Internal(context + ": sentencepiece: " + st.ToString());
}

// Feeds captions to the trainer without a temporary file. The trainer skips a sentence over
// max_sentence_length (4192 bytes by default) and fails when none is left, so a caption
// longer than kMaxPiece is given in pieces of at most kMaxPiece bytes, cut at a UTF-8
// boundary, at the last white space of the piece's second half where there is one: dense
// captions still train the model (the captions themselves are stored whole).
class CaptionIterator : public sentencepiece::SentenceIterator {
 public:
  static constexpr size_t kMaxPiece = 4096;

  explicit CaptionIterator(const std::vector<std::string_view>& captions) : captions_(captions) {
    Advance();
  }
  bool done() const override { return finished_; }
  void Next() override { Advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void Advance() {
    while (i_ < captions_.size() && offset_ >= captions_[i_].size()) {
      ++i_;
      offset_ = 0;
    }
    if (i_ >= captions_.size()) {
      finished_ = true;
      value_.clear();
      return;
    }
    const std::string_view rest = captions_[i_].substr(offset_);
    size_t take = rest.size();
    if (take > kMaxPiece) {
      take = kMaxPiece;
      // rest[take] starts the next piece: not a continuation byte.
      while (take > 0 && (static_cast<unsigned char>(rest[take]) & 0xC0) == 0x80) --take;
      const size_t space = rest.find_last_of(" \t\n\r", take - 1);
      if (space != std::string_view::npos && space >= take / 2) take = space + 1;
      if (take == 0) take = kMaxPiece;  // not UTF-8 (never: captions are checked before)
    }
    value_.assign(rest.substr(0, take));
    offset_ += take;
  }

  const std::vector<std::string_view>& captions_;
  size_t i_ = 0;
  size_t offset_ = 0;
  bool finished_ = false;
  std::string value_;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer() = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromSerialized(
    std::string model_bytes) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = t->processor_->LoadFromSerializedProto(model_bytes);
  if (!st.ok()) {
    return Status::InvalidArgument("not a SentencePiece model: " + st.ToString());
  }
  t->model_bytes_ = std::move(model_bytes);
  const int pieces = t->processor_->GetPieceSize();
  auto control = [&](int id) {
    return id >= 0 && id < pieces && t->processor_->IsControl(id) ? id : -1;
  };
  t->bos_id_ = control(t->processor_->bos_id());
  t->eos_id_ = control(t->processor_->eos_id());
  return t;
}

Result<std::string> SentencePieceTokenizer::Train(const std::vector<std::string_view>& captions,
                                                  int vocab_size, std::string* note) {
  if (captions.empty()) return Status::InvalidArgument("no captions to train a tokenizer on");
  std::unordered_map<std::string, std::string> args = {
      {"model_type", "unigram"},
      {"vocab_size", std::to_string(vocab_size)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      // Determinism: one thread, every sentence, no shuffling.
      {"num_threads", "1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"minloglevel", "2"},
  };
  std::string model;
  CaptionIterator it(captions);
  auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  // "Vocabulary size is smaller than required_chars. 20 vs 118.": every character the
  // captions use (character_coverage 0.9995) plus the 4 special pieces needs a piece; no
  // retry can help, so say which size would.
  const std::string text = st.ok() ? std::string() : st.ToString();
  const size_t at = text.find("smaller than required_chars.");
  if (at != std::string::npos) {
    long asked = 0, needed = 0;
    if (std::sscanf(text.c_str() + at, "smaller than required_chars. %ld vs %ld", &asked,
                    &needed) == 2) {
      return Status::InvalidArgument(
          "--vocab-size " + std::to_string(vocab_size) +
          " is too small for these captions: their characters and the 4 special pieces need " +
          std::to_string(needed) + " pieces; pass --vocab-size " + std::to_string(needed) +
          " or more (or --tokenizer FILE.model)");
    }
    return Status::InvalidArgument("--vocab-size " + std::to_string(vocab_size) +
                                   " is too small for the characters of these captions; pass "
                                   "a larger --vocab-size (or --tokenizer FILE.model)");
  }
  if (!st.ok() && st.ToString().find("Vocabulary size") != std::string::npos) {
    // Too few distinct pieces for the requested size: let the trainer stop where it can.
    args["hard_vocab_limit"] = "false";
    CaptionIterator again(captions);
    model.clear();
    st = sentencepiece::SentencePieceTrainer::Train(args, &again, &model);
    if (st.ok() && note != nullptr) {
      *note = "the captions hold too few distinct pieces for --vocab-size " +
              std::to_string(vocab_size) + "; trained a smaller vocabulary";
    }
  }
  MM_RETURN_NOT_OK(FromSp(st, "training the tokenizer"));
  return model;
}

Result<TokenizedCaption> SentencePieceTokenizer::Encode(std::string_view caption,
                                                        int max_tokens) const {
  std::vector<int> pieces;
  auto st = processor_->Encode(caption, &pieces);
  if (!st.ok()) return FromSp(st, "encoding a caption");
  std::vector<int32_t> prefix, suffix;
  if (bos_id_ >= 0) prefix.push_back(bos_id_);
  if (eos_id_ >= 0) suffix.push_back(eos_id_);
  // bos and eos are control pieces, never the unk id: only pieces count as unknown.
  return AssembleCaption(prefix, std::vector<int32_t>(pieces.begin(), pieces.end()), suffix,
                         max_tokens, processor_->unk_id());
}

int SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }
int SentencePieceTokenizer::unk_id() const { return processor_->unk_id(); }
int SentencePieceTokenizer::pad_id() const {
  int pad = processor_->pad_id();
  return pad >= 0 && pad < vocab_size() ? pad : unk_id();
}

}  // namespace mm::pack
