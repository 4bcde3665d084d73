// tokenizer.h: captions to token ids, whatever the tokenizer (the caption checks are in
// caption.h). One interface, three kinds (mm/format.h TokenizerKind), chosen by the file's
// content, never its name:
//
//   sentencepiece   a SentencePiece ModelProto (.model), given or trained here
//                   (sentencepiece_tokenizer.h)
//   clip-bpe        OpenAI CLIP's byte-level BPE merges file, gzipped
//                   (bpe_simple_vocab_16e6.txt.gz; clip_bpe.h)
//   tokenizer-json  a Hugging Face tokenizers file (tokenizer.json): byte-level BPE
//                   (GPT-2, RoBERTa) or WordPiece (BERT) (tokenizer_json.h)
//
// Whatever the kind, the set carries the file's bytes unchanged (OUT/<file_name()>), so that
// `--tokenizer OUT/<file>` tokenizes a val set with the same tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mm/format.h"
#include "mm/status.h"

namespace mm::pack {

struct TokenizedCaption {
  std::vector<int32_t> ids;  // bos? pieces eos?, at most max_tokens
  bool truncated = false;    // pieces were cut to fit max_tokens
  int pieces = 0;            // pieces of the whole caption, before any cut, specials excluded
  int unk = 0;               // ids in `ids` that the tokenizer gave for unknown text
};

/// A loaded tokenizer. Encode is const and thread-safe; one Tokenizer serves every worker
/// thread.
class Tokenizer {
 public:
  /// The tokenizer in `file_bytes`, by content: gzip -> clip-bpe, a JSON object ->
  /// tokenizer-json, else a SentencePiece model.
  /// Errors: InvalidArgument (none of these, or a part of the file this code does not
  /// implement, named), Unsupported (a tokenizer.json component not implemented, named).
  static Result<std::unique_ptr<Tokenizer>> FromSerialized(std::string file_bytes);
  /// FromSerialized of the file's bytes. Errors: NotFound, IOError, and FromSerialized's.
  static Result<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);

  /// Trains a SentencePiece unigram model (sentencepiece_tokenizer.h).
  static Result<std::string> Train(const std::vector<std::string_view>& captions, int vocab_size,
                                   std::string* note);

  virtual ~Tokenizer() = default;

  /// Encodes one (valid UTF-8) caption: [bos] pieces [eos] where the tokenizer adds them; the
  /// pieces are cut so that the whole fits `max_tokens` (eos stays last; only when max_tokens
  /// is below the number of specials is eos itself cut).
  /// Errors: Internal (the library's message).
  virtual Result<TokenizedCaption> Encode(std::string_view caption, int max_tokens) const = 0;

  virtual mm::format::TokenizerKind kind() const = 0;
  /// The tokenizer's file, byte for byte as given (what the set carries).
  const std::string& model_bytes() const { return model_bytes_; }
  /// Its name in a set (mm/format.h TokenizerFileName).
  std::string file_name() const { return std::string(mm::format::TokenizerFileName(kind())); }
  virtual int vocab_size() const = 0;
  /// The id of unknown text; a tokenizer without one (byte-level BPE: every byte has an id)
  /// names the id its library calls unk_token (CLIP's and GPT-2's <|endoftext|>) and never
  /// counts it as unknown (schemas/FORMAT.md).
  virtual int unk_id() const = 0;
  /// The id batches are padded with (FORMAT.md, index.json).
  virtual int pad_id() const = 0;
  int bos_id() const { return bos_id_; }  // -1 when the tokenizer adds none
  int eos_id() const { return eos_id_; }  // -1 when the tokenizer adds none

 protected:
  Tokenizer() = default;
  std::string model_bytes_;
  int bos_id_ = -1;
  int eos_id_ = -1;
};

/// `prefix` pieces `suffix` cut to `max_tokens` as Tokenizer::Encode says: pieces first,
/// then (max_tokens below the specials) the suffix, then the prefix. `unk` counts the ids of
/// the kept pieces equal to `unk_id` (-1: none counted).
TokenizedCaption AssembleCaption(const std::vector<int32_t>& prefix, std::vector<int32_t> pieces,
                                 const std::vector<int32_t>& suffix, int max_tokens, int unk_id);

}  // namespace mm::pack
