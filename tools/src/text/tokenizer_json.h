// tokenizer_json.h: a Hugging Face tokenizers file (tokenizer.json, the format of
// github.com/huggingface/tokenizers, Apache-2.0) behind tokenizer.h, reimplemented for the
// parts that byte-level BPE (GPT-2, RoBERTa, CLIP's HF files) and WordPiece (BERT) tokenizers
// use, with the Rust library's semantics (its Node binding, npm `tokenizers`, is the test
// reference):
//
//   added_tokens     split out of the caption first (leftmost-longest; lstrip, rstrip,
//                    single_word), those marked "normalized" after normalisation
//   normalizer       NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, BertNormalizer (clean
//                    text, CJK characters split, accents, lowercase), Replace, Strip,
//                    Prepend, Sequence
//   pre_tokenizer    ByteLevel, Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation,
//                    Split, Digits, Metaspace, Sequence
//   model            BPE (merges, unk/fuse_unk, continuing_subword_prefix,
//                    end_of_word_suffix, byte_fallback, ignore_merges), WordPiece (## and
//                    max_input_chars_per_word)
//   post_processor   RobertaProcessing, BertProcessing, TemplateProcessing (single), ByteLevel,
//                    Sequence: the specials around a caption
//
// A component outside these is Unsupported when the file is loaded, naming it. The file's own
// "truncation" and "padding" are not applied: --max-tokens cuts the pieces (tokenizer.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace mm::pack {

class TokenizerJson : public Tokenizer {
 public:
  /// Parses the file. Errors: InvalidArgument (not JSON, a required field missing or mistyped,
  /// a merge of tokens outside the vocabulary), Unsupported (a component not implemented).
  static Result<std::unique_ptr<TokenizerJson>> FromSerialized(std::string json_bytes);
  ~TokenizerJson() override;

  /// The ids of `caption` without the post-processor's specials. Errors: Internal.
  Result<std::vector<int32_t>> EncodePieces(std::string_view caption) const;

  Result<TokenizedCaption> Encode(std::string_view caption, int max_tokens) const override;
  mm::format::TokenizerKind kind() const override {
    return mm::format::TokenizerKind::kTokenizerJson;
  }
  int vocab_size() const override { return vocab_size_; }
  int unk_id() const override { return unk_id_; }
  int pad_id() const override { return pad_id_; }

  struct Impl;

 private:
  TokenizerJson();
  std::unique_ptr<Impl> impl_;
  int vocab_size_ = 0;
  int unk_id_ = 0;
  int pad_id_ = 0;
};

}  // namespace mm::pack
