// clip_bpe.h: OpenAI CLIP's tokenizer (clip/simple_tokenizer.py, github openai/CLIP, MIT;
// also open_clip's SimpleTokenizer) behind tokenizer.h, from its gzipped merges file
// (bpe_simple_vocab_16e6.txt.gz: a "#version" line, then one merge "a b" a line).
//
//   vocabulary  the 256 byte symbols (byte_level.h), the same with "</w>", the first
//               49,152 - 256 - 2 merges, <|startoftext|>, <|endoftext|>: 49,408 ids
//   text        cleaned as clean_text.h says (ftfy-like fixes, HTML unescaping, white space,
//               lowercasing)
//   words       <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|
//               [^\s\p{L}\p{N}]+, case-insensitive (regex.h); those two literal specials in a
//               caption become their ids, as in the reference
//   model       each word's bytes as symbols, "</w>" on the last, merged by rank (bpe.h)
//   ids         <|startoftext|> pieces <|endoftext|>; cut to max_tokens with <|endoftext|>
//               kept last, as clip.tokenize(truncate=True) does at context length 77
//
// pad_id is 0, what clip.tokenize pads with; unk_id is <|endoftext|>, as Hugging Face's
// CLIPTokenizer names it (byte-level BPE has no unknown text, so none is ever counted).
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe.h"
#include "text/regex.h"
#include "text/tokenizer.h"

namespace mm::pack {

class ClipBpeTokenizer : public Tokenizer {
 public:
  /// Loads the gzipped merges file. Errors: InvalidArgument (not gzip, over 64 MiB unpacked,
  /// not UTF-8, a merge line without two symbols, a symbol outside the vocabulary).
  static Result<std::unique_ptr<ClipBpeTokenizer>> FromSerialized(std::string gz_bytes);

  /// The ids of `caption`'s pieces, without the specials: SimpleTokenizer.encode(caption).
  /// Errors: Internal (ICU, PCRE2).
  Result<std::vector<int32_t>> EncodePieces(std::string_view caption) const;

  Result<TokenizedCaption> Encode(std::string_view caption, int max_tokens) const override;
  mm::format::TokenizerKind kind() const override { return mm::format::TokenizerKind::kClipBpe; }
  int vocab_size() const override { return vocab_size_; }
  int unk_id() const override { return eot_; }
  int pad_id() const override { return 0; }

 private:
  ClipBpeTokenizer() = default;
  Status Parse(std::string_view text);

  // Merges of a word, cached as simple_tokenizer.py caches bpe(): captions repeat words.
  // Sharded by the word's hash, each shard under its own mutex; bounded (words over 64 bytes
  // are not kept, a shard stops growing at 65,536 words).
  struct CacheShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> words;
  };
  static constexpr int kCacheShards = 16;
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;

  mutable std::array<CacheShard, kCacheShards> cache_;
  int vocab_size_ = 0;
  int32_t sot_ = -1, eot_ = -1;
  std::array<int32_t, 256> byte_id_{};      // a byte as a symbol inside a word
  std::array<int32_t, 256> byte_end_id_{};  // the same with "</w>" (the last of a word)
  BpeMerges merges_;
  Regex words_;
};

}  // namespace mm::pack
