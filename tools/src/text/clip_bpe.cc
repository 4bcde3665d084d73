// clip_bpe.cc: see clip_bpe.h. zlib's return codes are translated here only.
#include "text/clip_bpe.h"

#include <zlib.h>

#include <functional>
#include <utility>

#include "mm/internal/utf8.h"
#include "text/byte_level.h"
#include "text/clean_text.h"
#include "text/unicode_text.h"

namespace mm::pack {
namespace {

constexpr size_t kMaxUnpacked = size_t{64} << 20;  // the real file unpacks to 1.3 MB
constexpr int kMergeLines = 49152 - 256 - 2;       // simple_tokenizer.py: merges[1:49152-256-2+1]
constexpr std::string_view kSot = "<|startoftext|>";
constexpr std::string_view kEot = "<|endoftext|>";

Result<std::string> Gunzip(std::string_view gz) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Status::Internal("zlib: inflateInit2 failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  char buffer[1 << 16];
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buffer, sizeof(buffer) - z.avail_out);
    if (out.size() > kMaxUnpacked) {
      inflateEnd(&z);
      return Status::InvalidArgument("CLIP BPE merges: unpacks to over 64 MiB");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) break;  // cut short
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return Status::InvalidArgument(std::string("CLIP BPE merges: not a whole gzip stream (") +
                                   (z.msg != nullptr ? z.msg : "truncated") + ")");
  }
  return out;
}

// Python's str.split() of an ASCII-or-UTF-8 line: runs of white space separate.
std::vector<std::string_view> SplitWhiteSpace(std::string_view line) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  auto space = [](char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
  };
  while (i < line.size()) {
    while (i < line.size() && space(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !space(line[j])) ++j;
    if (j > i) parts.push_back(line.substr(i, j - i));
    i = j;
  }
  return parts;
}

}  // namespace

Result<std::unique_ptr<ClipBpeTokenizer>> ClipBpeTokenizer::FromSerialized(std::string gz_bytes) {
  std::unique_ptr<ClipBpeTokenizer> t(new ClipBpeTokenizer());
  MM_ASSIGN_OR_RETURN(std::string text, Gunzip(gz_bytes));
  if (!mm::IsValidUtf8(text)) return Status::InvalidArgument("CLIP BPE merges: not UTF-8");
  MM_RETURN_NOT_OK(t->Parse(text));
  std::string pattern =
      "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|"
      "[\\p{L}]+|[\\p{N}]|[^";
  pattern += kWhiteSpaceClass;
  pattern += "\\p{L}\\p{N}]+";
  MM_ASSIGN_OR_RETURN(t->words_, Regex::Compile(pattern, Regex::kCaseless));
  t->model_bytes_ = std::move(gz_bytes);
  t->bos_id_ = t->sot_;
  t->eos_id_ = t->eot_;
  return t;
}

Status ClipBpeTokenizer::Parse(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t at = 0;;) {
    const size_t nl = text.find('\n', at);
    lines.push_back(text.substr(at, nl == std::string_view::npos ? text.size() - at : nl - at));
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  std::vector<std::pair<std::string_view, std::string_view>> merges;
  for (size_t i = 1; i < lines.size() && i <= static_cast<size_t>(kMergeLines); ++i) {
    const auto parts = SplitWhiteSpace(lines[i]);
    if (parts.size() != 2) {
      return Status::InvalidArgument("CLIP BPE merges: line " + std::to_string(i + 1) +
                                     " is not two symbols");
    }
    merges.emplace_back(parts[0], parts[1]);
  }
  const ByteLevelMap& bytes = GetByteLevelMap();
  std::vector<std::string> vocab(256);
  for (int b = 0; b < 256; ++b) vocab[bytes.order[b]] = bytes.utf8[b];
  for (int i = 0; i < 256; ++i) vocab.push_back(vocab[i] + "</w>");
  for (const auto& [a, b] : merges) vocab.push_back(std::string(a) + std::string(b));
  vocab.emplace_back(kSot);
  vocab.emplace_back(kEot);
  std::unordered_map<std::string, int32_t> encoder;  // a repeated string: its last id
  encoder.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) encoder[vocab[i]] = static_cast<int32_t>(i);
  vocab_size_ = static_cast<int>(vocab.size());
  for (int b = 0; b < 256; ++b) {
    byte_id_[b] = encoder.at(bytes.utf8[b]);
    byte_end_id_[b] = encoder.at(bytes.utf8[b] + "</w>");
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto left = encoder.find(std::string(merges[r].first));
    const auto right = encoder.find(std::string(merges[r].second));
    if (left == encoder.end() || right == encoder.end()) {
      return Status::InvalidArgument("CLIP BPE merges: line " + std::to_string(r + 2) +
                                     " merges a symbol that no earlier line makes");
    }
    const std::string joined = std::string(merges[r].first) + std::string(merges[r].second);
    merges_.Add(left->second, right->second, encoder.at(joined), static_cast<int32_t>(r));
  }
  sot_ = encoder.at(std::string(kSot));
  eot_ = encoder.at(std::string(kEot));
  return Status::OK();
}

Result<std::vector<int32_t>> ClipBpeTokenizer::EncodePieces(std::string_view caption) const {
  MM_ASSIGN_OR_RETURN(std::u32string clean, ClipCleanText(caption));
  const std::string text = EncodeUtf8(clean);
  std::vector<std::pair<size_t, size_t>> words;
  MM_RETURN_NOT_OK(words_.FindAll(text, &words));
  std::vector<int32_t> ids;
  for (const auto& [begin, end] : words) {
    const std::string_view w(text.data() + begin, end - begin);
    if (w == kSot || w == kEot) {  // the reference's bpe cache holds these two as themselves
      ids.push_back(w == kSot ? sot_ : eot_);
      continue;
    }
    MergeWord(w, &ids);
  }
  return ids;
}

void ClipBpeTokenizer::MergeWord(std::string_view w, std::vector<int32_t>* ids) const {
  constexpr size_t kMaxCachedWord = 64;
  constexpr size_t kMaxShardWords = 65536;
  CacheShard* shard = nullptr;
  if (w.size() <= kMaxCachedWord) {
    shard = &cache_[std::hash<std::string_view>()(w) % kCacheShards];
    std::lock_guard<std::mutex> lock(shard->mu);
    auto it = shard->words.find(std::string(w));
    if (it != shard->words.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word;
  word.reserve(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const auto b = static_cast<unsigned char>(w[i]);
    word.push_back(i + 1 == w.size() ? byte_end_id_[b] : byte_id_[b]);
  }
  merges_.Apply(&word);
  ids->insert(ids->end(), word.begin(), word.end());
  if (shard != nullptr) {
    std::lock_guard<std::mutex> lock(shard->mu);
    if (shard->words.size() < kMaxShardWords) shard->words.emplace(std::string(w), std::move(word));
  }
}

Result<TokenizedCaption> ClipBpeTokenizer::Encode(std::string_view caption, int max_tokens) const {
  MM_ASSIGN_OR_RETURN(std::vector<int32_t> pieces, EncodePieces(caption));
  return AssembleCaption({sot_}, std::move(pieces), {eot_}, max_tokens, /*unk_id=*/-1);
}

}  // namespace mm::pack
