// verify.cc: `mmpack verify OUT` (commands.h). The set around its shards: index.json (the
// reader's strict decoder and the schema's keys), the tokenizer's SHA-256, each shard's name,
// size and XXH3-64, then shard/verifier.h on each shard, the totals and no leftover shard.
// A remote set (s3://, http(s)://) is verified the same way, file by file: its shards one at a
// time through the reader's cache (mm/internal/set_files.h), each pinned only while checked.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <unordered_set>

#include "commands/commands.h"
#include "set/human_bytes.h"
#include "set/set_index.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/set_files.h"
#include "mm/internal/set_path.h"
#include "mm/internal/set_rules.h"
#include "shard/bounded_verify.h"
#include "shard/h5_util.h"
#include "shard/verifier.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What the shards add up to, for the totals check and the OK line.
struct Totals {
  int64_t shards = 0, samples = 0, captions = 0, tokens = 0, bytes = 0;
};

// The set-level checks around shard/verifier.h, one stage each.
class SetVerifier {
 public:
  SetVerifier(const mm::reader::internal::SetFiles& files, const json& schema)
      : files_(files), verifier_(schema, &keys_) {}

  // The tokenizer whose ids the shards hold ships with them: its SHA-256 is the index's.
  Status CheckTokenizer(const mm::reader::internal::IndexDocument& index) const {
    if (!index.info.has_tokenizer) return Status::OK();  // --tokenizer none: text only
    const std::string file =
        index.tokenizer_file.empty() ? std::string(format::kTokenizerFile) : index.tokenizer_file;
    // A local set's tokenizer must not be a symlink out of the set (mm/internal/set_path.h).
    if (!files_.remote()) MM_RETURN_NOT_OK(CheckSetPath(files_.root(), file));
    std::string sha;
    if (files_.remote()) {
      MM_ASSIGN_OR_RETURN(std::string bytes, files_.Read(file, kMaxTokenizerBytes));
      sha = Sha256Hex(bytes);
    } else {
      MM_ASSIGN_OR_RETURN(sha, Sha256HexOfFile(files_.Display(file)));
    }
    const std::string& want = index.info.tokenizer_sha256;
    if (sha != want) {
      return Status::Corruption(file + ": sha256 is " + sha + ", index.json says '" + want + "'");
    }
    return Status::OK();
  }

  // Shard `e.index`: its name, its counts, the file's size and XXH3-64, then its contents.
  Status CheckShard(const ShardExpectation& e, const mm::reader::ShardEntry& entry,
                    const mm::reader::SetInfo& info, Totals* totals) {
    const std::string& label = e.file;
    if (e.file != format::ShardFileName(e.index)) {
      return Status::Corruption("index.json shard " + std::to_string(e.index) + " is named '" +
                                e.file + "', expected '" + format::ShardFileName(e.index) + "'");
    }
    if (e.samples <= 0 || e.captions < e.samples || e.tokens < 0 || entry.bytes <= 0) {
      return Status::Corruption(label + ": index.json counts are not valid");
    }
    // A local shard must not be a symlink out of the set; a remote shard is
    // its cached copy (a file of the cache, checked on arrival), pinned until this check ends.
    if (!files_.remote()) MM_RETURN_NOT_OK(CheckSetPath(files_.root(), e.file));
    MM_ASSIGN_OR_RETURN(mm::reader::internal::LocalShardFile local, files_.Shard(entry));
    const fs::path path = local.path;
    MM_ASSIGN_OR_RETURN(int64_t size, FileSize(path, label, entry.bytes));
    MM_RETURN_NOT_OK(CheckCountsFit(e, size));
    // Every byte is checked before libhdf5 parses one: a damaged file is
    // reported by its checksum and never parsed.
    MM_ASSIGN_OR_RETURN(std::string hash, Xxh3HexOfFile(path.string()));
    if (hash != entry.xxh3_64) {
      return Status::Corruption(label + ": xxh3_64 is " + hash + ", index.json says " +
                                entry.xxh3_64 + " (the file changed; not parsed)");
    }
    BoundedVerdict verdict;
    Status st = VerifyShardBounded(&verifier_, &keys_, path.string(), size, e, info, &verdict);
    if (!st.ok()) return st.WithContext(Where(label, verdict));
    ++totals->shards;
    totals->samples += e.samples;
    totals->captions += e.captions;
    totals->tokens += e.tokens;
    totals->bytes += size;
    return Status::OK();
  }

  // A shard file beyond the index is a leftover of another build.
  Status CheckNoLeftover(int64_t shards) const {
    const std::string extra = format::ShardFileName(shards);
    MM_ASSIGN_OR_RETURN(bool exists, files_.Exists(extra));
    if (exists) return Status::Corruption(extra + " exists but index.json does not list it");
    return Status::OK();
  }

 private:
  // The shard file's size, which must be the index's.
  static Result<int64_t> FileSize(const fs::path& path, const std::string& label, int64_t want) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      if (fs::exists(path, ec)) {
        return Status::Corruption(label + ": shard file is not a regular file");
      }
      return Status::NotFound(label + ": shard file is missing");
    }
    const int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec) return Status::IOError(label + ": " + ec.message());
    if (size != want) {
      return Status::Corruption(label + ": " + std::to_string(size) + " bytes, index.json says " +
                                std::to_string(want) + (size < want ? " (truncated)" : ""));
    }
    return size;
  }

  // The tables index.json claims fit in the file (no allocation larger than the file).
  static Status CheckCountsFit(const ShardExpectation& e, int64_t size) {
    const double table_bytes = 8.0 * static_cast<double>(e.samples + 1) +
                               8.0 * static_cast<double>(e.captions + 1) +
                               4.0 * static_cast<double>(e.tokens);
    if (table_bytes > static_cast<double>(size)) {
      return Status::Corruption(e.file + ": index.json counts need more bytes than the file's " +
                                std::to_string(size));
    }
    return Status::OK();
  }

  // "shard-000001.h5 sample 3 (key 'coco-3')": where a shard's problem lies.
  static std::string Where(const std::string& label, const BoundedVerdict& verdict) {
    std::string where = label;
    const int64_t sample = verdict.sample;
    if (sample >= 0) {
      where += " sample " + std::to_string(sample);
      if (static_cast<size_t>(sample) < verdict.keys_of_shard.size()) {
        where += " (key '" + verdict.keys_of_shard[static_cast<size_t>(sample)] + "')";
      }
    }
    return where;
  }

  // Bytes of a remote tokenizer model read at most.
  static constexpr int64_t kMaxTokenizerBytes = int64_t{256} << 20;

  const mm::reader::internal::SetFiles& files_;
  std::unordered_set<std::string> keys_;  // every key of the shards checked so far
  ShardVerifier verifier_;
};

// What index.json expects of every shard (ShardExpectation) before its own counts.
ShardExpectation BaseExpectation(const mm::reader::internal::IndexDocument& index) {
  const mm::reader::SetInfo& info = index.info;
  ShardExpectation base;
  base.height = info.image_height;
  base.width = info.image_width;
  base.compression = info.compression;
  base.format_version = info.format_version;
  base.codec = info.image_codec;
  base.jpeg_quality = info.jpeg_quality;
  base.resize_mode = info.resize_mode;
  base.resize_mode_text = mm::reader::internal::ResizeModeText(index);
  base.max_size = info.max_size;
  base.vocab_size = info.vocab_size;
  base.tokenizer_sha256 = info.tokenizer_sha256;
  base.metadata_fields = info.metadata_fields;
  return base;
}

// index.json's totals, every one present and equal to the shards' sums.
Status CheckTotals(const mm::reader::internal::IndexDocument::Totals& stored, const Totals& sum) {
  if (stored.shards != sum.shards || stored.samples != sum.samples ||
      stored.captions != sum.captions || stored.tokens != sum.tokens || stored.bytes != sum.bytes) {
    return Status::Corruption(
        "index.json totals do not match its shards (" + std::to_string(sum.shards) + " shards, " +
        std::to_string(sum.samples) + " samples, " + std::to_string(sum.captions) + " captions, " +
        std::to_string(sum.tokens) + " tokens, " + std::to_string(sum.bytes) + " bytes)");
  }
  return Status::OK();
}

// Bytes checked so far of a set's shards, with the download of the one being checked (for the
// progress line; read from its thread).
class VerifyProgress {
 public:
  explicit VerifyProgress(bool remote) : remote_(remote) {}
  void StartShard(int64_t bytes) {
    shard_bytes_ = bytes;
    received_at_start_ = mm::reader::internal::RemoteBytesReceived();
  }
  void EndShard() { checked_ += shard_bytes_.exchange(0); }
  int64_t Done() const {
    const int64_t downloading =
        remote_ ? mm::reader::internal::RemoteBytesReceived() - received_at_start_ : 0;
    return checked_ + std::min<int64_t>(std::max<int64_t>(0, downloading), shard_bytes_);
  }

 private:
  const bool remote_;
  std::atomic<int64_t> checked_{0}, shard_bytes_{0}, received_at_start_{0};
};

Status VerifySet(const std::string& dir, const mm::reader::RemoteOptions& remote,
                 const ReportOptions& report, std::ostream& out) {
  h5::SilenceErrors();
  MM_RETURN_NOT_OK(h5::RegisterZstdFilter());
  json schema = json::parse(format::SchemaJson(), nullptr, false);
  if (schema.is_discarded()) return Status::Internal("embedded schema is not valid JSON");
  MM_ASSIGN_OR_RETURN(auto files, OpenSetFiles(dir, remote));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index,
                      ReadSetIndexChecked(*files, schema));
  const mm::reader::SetInfo& info = index.info;
  MM_RETURN_NOT_OK(mm::reader::CheckSetRules(index));  // the reader's rules (set_rules.h)
  SetVerifier set(*files, schema);
  MM_RETURN_NOT_OK(set.CheckTokenizer(index));
  const ShardExpectation base = BaseExpectation(index);
  Totals totals;
  int64_t set_bytes = 0;
  for (const auto& s : info.shards) set_bytes += s.bytes;
  VerifyProgress done(files->remote());
  ProgressOptions progress = report.progress;
  progress.enabled = progress.enabled && files->remote();
  TransferProgress bar(
      "verify", [&done] { return done.Done(); }, set_bytes, progress);
  for (size_t i = 0; i < info.shards.size(); ++i) {
    const mm::reader::ShardEntry& s = info.shards[i];
    ShardExpectation e = base;
    e.index = static_cast<int64_t>(i);
    e.file = s.file;
    e.samples = s.samples;
    e.captions = s.captions;
    e.tokens = s.tokens;
    done.StartShard(s.bytes);
    MM_RETURN_NOT_OK(set.CheckShard(e, s, info, &totals));
    done.EndShard();
  }
  bar.Finish();
  MM_RETURN_NOT_OK(CheckTotals(index.totals, totals));
  MM_RETURN_NOT_OK(set.CheckNoLeftover(totals.shards));
  const std::string checked =
      std::string("checksums, schema, offsets, keys and every ") +
      (info.image_codec == format::ImageCodec::kJpeg ? "JPEG decoded" : "image chunk checked");
  if (report.json) {
    nlohmann::ordered_json j;
    j["ok"] = true;
    j["set"] = files->root();
    j["shards"] = totals.shards;
    j["samples"] = totals.samples;
    j["captions"] = totals.captions;
    j["tokens"] = totals.tokens;
    j["bytes"] = totals.bytes;
    j["checked"] = checked;
    out << j.dump(2) << "\n";
    return Status::OK();
  }
  out << "verify: OK: " << totals.shards << " shards, " << totals.samples << " samples, "
      << totals.captions << " captions, " << totals.tokens << " tokens, "
      << HumanBytes(static_cast<double>(totals.bytes)) << "; " << checked << "\n";
  return Status::OK();
}

}  // namespace

Status RunVerify(const std::string& dir, std::ostream& out, const mm::reader::RemoteOptions& remote,
                 const ReportOptions& report) {
  Status st;
  try {
    st = VerifySet(dir, remote, report, out);
  } catch (const json::exception& e) {
    // index.json with a value of the wrong JSON type.
    st = Status::Corruption(std::string("index.json: ") + e.what());
  }
  if (!st.ok() && report.json) {
    nlohmann::ordered_json j;
    j["ok"] = false;
    j["set"] = dir;
    j["error"] = st.ToString();
    out << j.dump(2) << "\n";
  }
  return st;
}

}  // namespace mm::pack
