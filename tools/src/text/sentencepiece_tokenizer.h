// sentencepiece_tokenizer.h: SentencePiece (Kudo & Richardson 2018,
// https://github.com/google/sentencepiece) behind tokenizer.h.
//
// The model is either a given .model file or one trained here on the input's captions
// (unigram, pad=0 unk=1 bos=2 eos=3, one training thread so the model bytes are the same on
// every run). Either way the serialized model is what OUT/tokenizer.model holds.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mm::pack {

/// A loaded SentencePiece model. Encode is const and thread-safe (SentencePieceProcessor's
/// Encode is).
class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Loads a serialized ModelProto (the bytes of a .model file).
  /// Errors: InvalidArgument (not a SentencePiece model, with sentencepiece's message).
  static Result<std::unique_ptr<SentencePieceTokenizer>> FromSerialized(std::string model_bytes);

  /// Trains a unigram model on `captions` (in order) with `vocab_size` pieces and returns the
  /// serialized model. When the captions cannot fill `vocab_size`, trains again with
  /// hard_vocab_limit=false (a smaller vocabulary) and says so in `*note`.
  /// Errors: InvalidArgument (no captions), Internal (sentencepiece's message).
  static Result<std::string> Train(const std::vector<std::string_view>& captions, int vocab_size,
                                   std::string* note);

  ~SentencePieceTokenizer() override;

  Result<TokenizedCaption> Encode(std::string_view caption, int max_tokens) const override;
  mm::format::TokenizerKind kind() const override {
    return mm::format::TokenizerKind::kSentencePiece;
  }
  int vocab_size() const override;
  int unk_id() const override;
  /// The model's pad id, or its unk id when it has none.
  int pad_id() const override;

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace mm::pack
