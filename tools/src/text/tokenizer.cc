// tokenizer.cc: see tokenizer.h. The kind of a tokenizer file is told from its content here.
#include "text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "mm/internal/file.h"
#include "text/clip_bpe.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/tokenizer_json.h"

namespace mm::pack {
namespace {

// A JSON document starts with '{' after optional white space (and a UTF-8 byte-order mark);
// a SentencePiece ModelProto starts with field 1's tag 0x0a.
bool LooksLikeJsonObject(std::string_view bytes) {
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
  const size_t at = bytes.find_first_not_of(" \t\r\n");
  return at != std::string_view::npos && bytes[at] == '{';
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromSerialized(std::string file_bytes) {
  if (file_bytes.size() >= 2 && static_cast<unsigned char>(file_bytes[0]) == 0x1f &&
      static_cast<unsigned char>(file_bytes[1]) == 0x8b) {
    MM_ASSIGN_OR_RETURN(auto t, ClipBpeTokenizer::FromSerialized(std::move(file_bytes)));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (std::string_view(file_bytes).substr(0, 8) == "#version") {
    return Status::InvalidArgument(
        "a CLIP BPE merges file must be gzipped as CLIP ships it (gzip -n the .txt: "
        "bpe_simple_vocab_16e6.txt.gz)");
  }
  if (LooksLikeJsonObject(file_bytes)) {
    MM_ASSIGN_OR_RETURN(auto t, TokenizerJson::FromSerialized(std::move(file_bytes)));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  auto t = SentencePieceTokenizer::FromSerialized(std::move(file_bytes));
  if (!t.ok()) {
    return Status::InvalidArgument(
        "not a tokenizer: neither a SentencePiece model, a gzipped CLIP BPE merges file nor a "
        "tokenizer.json (" +
        t.status().message() + ")");
  }
  return std::unique_ptr<Tokenizer>(std::move(*t));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::string bytes;
  MM_RETURN_NOT_OK(ReadRegularFile(path, &bytes));
  auto t = FromSerialized(std::move(bytes));
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

Result<std::string> Tokenizer::Train(const std::vector<std::string_view>& captions, int vocab_size,
                                     std::string* note) {
  return SentencePieceTokenizer::Train(captions, vocab_size, note);
}

TokenizedCaption AssembleCaption(const std::vector<int32_t>& prefix, std::vector<int32_t> pieces,
                                 const std::vector<int32_t>& suffix, int max_tokens, int unk_id) {
  TokenizedCaption out;
  if (max_tokens < 1) max_tokens = 1;
  const int specials = static_cast<int>(prefix.size() + suffix.size());
  const int room = std::max(0, max_tokens - specials);
  out.pieces = static_cast<int>(pieces.size());
  if (static_cast<int>(pieces.size()) > room) {
    pieces.resize(room);
    out.truncated = true;
  }
  if (unk_id >= 0) out.unk = static_cast<int>(std::count(pieces.begin(), pieces.end(), unk_id));
  out.ids.reserve(pieces.size() + specials);
  out.ids.insert(out.ids.end(), prefix.begin(), prefix.end());
  out.ids.insert(out.ids.end(), pieces.begin(), pieces.end());
  out.ids.insert(out.ids.end(), suffix.begin(), suffix.end());
  // Only when max_tokens < number of specials: the prefix wins over the suffix.
  if (static_cast<int>(out.ids.size()) > max_tokens) out.ids.resize(max_tokens);
  return out;
}

}  // namespace mm::pack
