// tokenizer.h: captions to token ids with SentencePiece (Kudo & Richardson 2018,
// https://github.com/google/sentencepiece). The caption checks are in caption.h.
//
// The model is either a given .model file or one trained here on the input's captions
// (unigram, pad=0 unk=1 bos=2 eos=3, one training thread so the model bytes are the same on
// every run). Either way the serialized model is what OUT/tokenizer.model holds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mm/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mm::pack {

struct TokenizedCaption {
  std::vector<int32_t> ids;  // bos? pieces eos?, at most max_tokens
  bool truncated = false;    // pieces were cut to fit max_tokens
  int pieces = 0;            // pieces of the whole caption, before any cut, specials excluded
  int unk = 0;               // ids in `ids` that are the model's unk id
};

/// A loaded SentencePiece model. Encode is const and thread-safe (SentencePieceProcessor's
/// Encode is); one Tokenizer serves every worker thread.
class Tokenizer {
 public:
  /// Loads a serialized ModelProto (the bytes of a .model file).
  /// Errors: InvalidArgument (not a SentencePiece model, with sentencepiece's message).
  static Result<std::unique_ptr<Tokenizer>> FromSerialized(std::string model_bytes);
  /// Errors: NotFound, IOError, InvalidArgument.
  static Result<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);

  /// Trains a unigram model on `captions` (in order) with `vocab_size` pieces and returns the
  /// serialized model. When the captions cannot fill `vocab_size`, trains again with
  /// hard_vocab_limit=false (a smaller vocabulary) and says so in `*note`.
  /// Errors: InvalidArgument (no captions), Internal (sentencepiece's message).
  static Result<std::string> Train(const std::vector<std::string_view>& captions, int vocab_size,
                                   std::string* note);

  ~Tokenizer();

  /// Encodes one (valid UTF-8) caption: [bos] pieces [eos] where the model defines bos/eos
  /// as control pieces; the pieces are cut so that the whole fits `max_tokens` (eos stays
  /// last; only when max_tokens is below the number of specials is eos itself cut).
  /// Errors: Internal (sentencepiece's message).
  Result<TokenizedCaption> Encode(std::string_view caption, int max_tokens) const;

  const std::string& model_bytes() const { return model_bytes_; }
  int vocab_size() const;
  int unk_id() const;
  /// The model's pad id, or its unk id when it has none (FORMAT.md, index.json).
  int pad_id() const;
  int bos_id() const { return bos_id_; }  // -1 when the model defines none
  int eos_id() const { return eos_id_; }  // -1 when the model defines none

 private:
  Tokenizer();
  std::string model_bytes_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  int bos_id_ = -1;
  int eos_id_ = -1;
};

}  // namespace mm::pack
