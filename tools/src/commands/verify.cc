// verify.cc: `mmpack verify OUT` (commands.h). The set around its shards: index.json (the
// reader's strict decoder and the schema's keys), the tokenizer's SHA-256, each shard's name,
// size and XXH3-64, then shard/verifier.h on each shard, the totals and no leftover shard.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <unordered_set>

#include "commands/commands.h"
#include "commands/human_bytes.h"
#include "commands/set_index.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "shard/h5_util.h"
#include "shard/verifier.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status VerifySet(const std::string& dir, std::ostream& out) {
  h5::SilenceErrors();
  MM_RETURN_NOT_OK(h5::RegisterZstdFilter());
  json schema = json::parse(format::SchemaJson(), nullptr, false);
  if (schema.is_discarded()) return Status::Internal("embedded schema is not valid JSON");
  fs::path root(dir);
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadSetIndexChecked(dir, schema));
  const mm::reader::SetInfo& info = index.info;

  ShardExpectation base;
  base.height = info.image_height;
  base.width = info.image_width;
  base.compression = format::ParseCodec(info.compression).value();  // the decoder checked it
  base.vocab_size = info.vocab_size;
  base.tokenizer_sha256 = info.tokenizer_sha256;
  // The tokenizer whose ids the shards hold ships with them.
  const std::string tokenizer_file =
      index.tokenizer_file.empty() ? std::string(format::kTokenizerFile) : index.tokenizer_file;
  MM_ASSIGN_OR_RETURN(std::string tokenizer_sha, Sha256HexOfFile((root / tokenizer_file).string()));
  if (tokenizer_sha != base.tokenizer_sha256) {
    return Status::Corruption(tokenizer_file + ": sha256 is " + tokenizer_sha +
                              ", index.json says '" + base.tokenizer_sha256 + "'");
  }

  std::unordered_set<std::string> keys;
  ShardVerifier verifier(schema, &keys);
  int64_t samples = 0, captions = 0, tokens = 0, bytes = 0;
  for (size_t i = 0; i < info.shards.size(); ++i) {
    const mm::reader::ShardEntry& s = info.shards[i];
    ShardExpectation e = base;
    e.index = static_cast<int64_t>(i);
    e.file = s.file;
    e.samples = s.samples;
    e.captions = s.captions;
    e.tokens = s.tokens;
    const int64_t want_bytes = s.bytes;
    const std::string& want_hash = s.xxh3_64;
    std::string label = e.file;
    if (e.file != format::ShardFileName(e.index)) {
      return Status::Corruption("index.json shard " + std::to_string(i) + " is named '" + e.file +
                                "', expected '" + format::ShardFileName(e.index) + "'");
    }
    if (e.samples <= 0 || e.captions < e.samples || e.tokens < 0 || want_bytes <= 0) {
      return Status::Corruption(label + ": index.json counts are not valid");
    }
    fs::path path = root / e.file;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      if (fs::exists(path, ec)) {
        return Status::Corruption(label + ": shard file is not a regular file");
      }
      return Status::NotFound(label + ": shard file is missing");
    }
    int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec) return Status::IOError(label + ": " + ec.message());
    if (size != want_bytes) {
      return Status::Corruption(label + ": " + std::to_string(size) + " bytes, index.json says " +
                                std::to_string(want_bytes) +
                                (size < want_bytes ? " (truncated)" : ""));
    }
    MM_ASSIGN_OR_RETURN(std::string hash, Xxh3HexOfFile(path.string()));
    Status checksum =
        hash == want_hash
            ? Status::OK()
            : Status::Corruption(label + ": xxh3_64 is " + hash + ", index.json says " + want_hash);
    int64_t bad_sample = -1;
    Status st = verifier.Verify(path.string(), e, &bad_sample);
    if (!st.ok()) {
      std::string where = label;
      if (bad_sample >= 0) {
        where += " sample " + std::to_string(bad_sample);
        if (static_cast<size_t>(bad_sample) < verifier.keys_of_shard().size()) {
          where += " (key '" + verifier.keys_of_shard()[static_cast<size_t>(bad_sample)] + "')";
        }
      }
      if (!checksum.ok()) where += " (checksum mismatch too)";
      return st.WithContext(where);
    }
    MM_RETURN_NOT_OK(checksum);  // structure and chunks fine, but the bytes changed
    samples += e.samples;
    captions += e.captions;
    tokens += e.tokens;
    bytes += size;
  }
  const auto& totals = index.totals;
  if (totals.shards != static_cast<int64_t>(info.shards.size()) || totals.samples != samples ||
      totals.captions != captions || totals.tokens != tokens || totals.bytes != bytes) {
    return Status::Corruption(
        "index.json totals do not match its shards (" + std::to_string(info.shards.size()) +
        " shards, " + std::to_string(samples) + " samples, " + std::to_string(captions) +
        " captions, " + std::to_string(tokens) + " tokens, " + std::to_string(bytes) + " bytes)");
  }
  // A shard file beyond the index is a leftover of another build.
  fs::path extra = root / format::ShardFileName(static_cast<int64_t>(info.shards.size()));
  std::error_code ec;
  if (fs::exists(extra, ec)) {
    return Status::Corruption(extra.filename().string() +
                              " exists but index.json does not list it");
  }
  out << "verify: OK: " << info.shards.size() << " shards, " << samples << " samples, " << captions
      << " captions, " << tokens << " tokens, " << HumanBytes(static_cast<double>(bytes))
      << "; checksums, schema, offsets, keys and every image chunk checked\n";
  return Status::OK();
}

}  // namespace

Status RunVerify(const std::string& dir, std::ostream& out) {
  try {
    return VerifySet(dir, out);
  } catch (const json::exception& e) {
    // index.json with a value of the wrong JSON type.
    return Status::Corruption(std::string("index.json: ") + e.what());
  }
}

}  // namespace mm::pack
