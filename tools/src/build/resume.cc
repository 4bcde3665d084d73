// resume.cc: see build_resume.h.
#include "build/resume.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/remote_file.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/c_handles.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/version.h"
#include "set/output_dir.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kHeaderFile = "build.json";

std::string CheckpointName(size_t shards) {
  char name[40];
  std::snprintf(name, sizeof name, "checkpoint-%06zu.json", shards);
  return name;
}

// N of "checkpoint-N.json" (N > 0), else 0.
size_t CheckpointNumber(const std::string& name) {
  size_t number = 0;
  int end = 0;
  if (std::sscanf(name.c_str(), "checkpoint-%zu.json%n", &number, &end) != 1 ||
      static_cast<size_t>(end) != name.size() || name != CheckpointName(number)) {
    return 0;
  }
  return number;
}

// The checkpoints in `folder`, by number (none when there is no folder).
Result<std::map<size_t, fs::path>> ListCheckpoints(const fs::path& folder) {
  std::map<size_t, fs::path> out;
  std::error_code ec;
  if (!fs::exists(folder, ec)) return out;
  for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const size_t number = CheckpointNumber(it->path().filename().string());
    if (number > 0) out[number] = it->path();
  }
  if (ec) return Status::IOError("cannot list " + folder.string() + ": " + ec.message());
  return out;
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// Feeds length-prefixed fields to an XXH3-128 state, so "ab"+"c" and "a"+"bc" differ.
class Hasher {
 public:
  Hasher() { XXH3_128bits_reset(state_.get()); }
  void Add(std::string_view s) {
    const uint64_t n = s.size();
    XXH3_128bits_update(state_.get(), &n, sizeof n);
    XXH3_128bits_update(state_.get(), s.data(), s.size());
  }
  void Add(int64_t v) { XXH3_128bits_update(state_.get(), &v, sizeof v); }
  void Add(double v) { XXH3_128bits_update(state_.get(), &v, sizeof v); }
  std::string Hex() {
    const XXH128_hash_t h = XXH3_128bits_digest(state_.get());
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return hex;
  }

 private:
  Xxh3StatePtr state_{XXH3_createState()};
};

json EntryJson(const mm::reader::ShardEntry& e) {
  return {{"file", e.file},     {"samples", e.samples}, {"captions", e.captions},
          {"tokens", e.tokens}, {"bytes", e.bytes},     {"xxh3_64", e.xxh3_64}};
}

mm::reader::ShardEntry EntryFrom(const json& j) {
  mm::reader::ShardEntry e;
  e.file = j.at("file").get<std::string>();
  e.samples = j.at("samples").get<int64_t>();
  e.captions = j.at("captions").get<int64_t>();
  e.tokens = j.at("tokens").get<int64_t>();
  e.bytes = j.at("bytes").get<int64_t>();
  e.xxh3_64 = j.at("xxh3_64").get<std::string>();
  return e;
}

// Empty when the shard file is whole: its size and XXH3-64 those of `e`; else why not.
std::string CheckShard(const fs::path& staging, const mm::reader::ShardEntry& e) {
  const fs::path path = staging / e.file;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return e.file + " is missing";
  if (static_cast<int64_t>(size) != e.bytes) {
    return e.file + " has " + std::to_string(size) + " bytes, not " + std::to_string(e.bytes);
  }
  auto hash = Xxh3HexOfFile(path.string());
  if (!hash.ok()) return hash.status().message();
  if (*hash != e.xxh3_64) return e.file + " does not match its checksum";
  return "";
}

// One checkpoint, read whole before anything is applied.
struct Checkpoint {
  SinkProgress progress_after;  // next_sample, pipeline_dropped, shards, kept, sources of this one
  std::vector<DropEntry> dropped;
  std::vector<DroppedCaption> dropped_captions;
  int64_t written = 0, written_captions = 0, truncated = 0;
  json stats;
};

Result<Checkpoint> ReadCheckpoint(const fs::path& path) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(path.string(), &text));
  try {
    const json j = json::parse(text);
    Checkpoint c;
    c.progress_after.next_sample = j.at("next_sample").get<size_t>();
    c.progress_after.pipeline_dropped = j.at("pipeline_dropped").get<int64_t>();
    const std::string sources = j.at("sources").get<std::string>();
    char* end = nullptr;
    c.progress_after.sources = std::strtoull(sources.c_str(), &end, 16);
    if (sources.size() != 16 || end != sources.c_str() + sources.size()) {
      return Status::Corruption(path.string() + ": not a checkpoint (sources '" + sources + "')");
    }
    for (const json& e : j.at("shards")) c.progress_after.shards.push_back(EntryFrom(e));
    for (const json& k : j.at("kept")) {
      c.progress_after.kept.push_back(
          {k.at(0).get<std::string>(), k.at(1).get<uint64_t>(), k.at(2).get<uint64_t>()});
    }
    for (const json& d : j.at("dropped")) {
      c.dropped.push_back({d.at(0).get<std::string>(), d.at(1).get<std::string>(),
                           d.at(2).get<std::string>(), d.at(3).get<std::string>()});
    }
    for (const json& d : j.at("dropped_captions")) {
      c.dropped_captions.push_back({d.at(0).get<std::string>(), d.at(1).get<std::string>(),
                                    d.at(2).get<int64_t>(), d.at(3).get<std::string>()});
    }
    c.written = j.at("written").get<int64_t>();
    c.written_captions = j.at("written_captions").get<int64_t>();
    c.truncated = j.at("truncated").get<int64_t>();
    c.stats = j.at("stats");
    return c;
  } catch (const json::exception& e) {
    return Status::Corruption(path.string() + ": not a checkpoint (" + e.what() + ")");
  }
}

// A shard's name, finished ("shard-000007.h5") or being written ("shard-000007.h5.tmp").
bool IsShardFile(std::string_view name) {
  constexpr std::string_view kTmp = ".tmp";
  if (name.size() > kTmp.size() && name.substr(name.size() - kTmp.size()) == kTmp) {
    name.remove_suffix(kTmp.size());
  }
  return format::ParseShardFileName(name, nullptr);
}

}  // namespace

Result<std::string> BuildFingerprint(const BuildOptions& o, const std::string& tokenizer_sha256,
                                     const SampleList& samples) {
  Hasher h;
  // The writer's revision, bumped whenever what a build writes for the same input and options
  // changes (2: restart markers in stored JPEGs; 3: checkpoints hold stats as value counts; 4:
  // checkpoints and spools hold the stamps of the source files), and the version: --resume and
  // the parts of a build never join the work of two mmpacks.
  h.Add(std::string_view("mmpack build 4"));
  h.Add(mm::kVersion);
  h.Add(o.input);
  h.Add(static_cast<int64_t>(o.input_format));
  h.Add(static_cast<int64_t>(o.append));
  h.Add(static_cast<int64_t>(o.image_width));
  h.Add(static_cast<int64_t>(o.image_height));
  h.Add(static_cast<int64_t>(o.resize_mode));
  h.Add(o.background);
  h.Add(o.max_pixels);
  // A given tokenizer by its bytes (its path may move); "" and "none" as themselves.
  h.Add(o.tokenizer.empty() || o.tokenizer == kNoTokenizer ? o.tokenizer : tokenizer_sha256);
  h.Add(static_cast<int64_t>(o.vocab_size));
  h.Add(o.tokenizer.empty() ? o.tokenizer_sample : int64_t{0});  // what a trained one saw
  h.Add(static_cast<int64_t>(o.max_tokens));
  h.Add(o.max_caption_bytes);
  h.Add(static_cast<int64_t>(o.text.lowercase));
  h.Add(static_cast<int64_t>(o.text.normalize));
  for (const auto* names : {&o.fields.image, &o.fields.caption, &o.fields.extra, &o.keep_fields}) {
    h.Add(static_cast<int64_t>(names->size()));
    for (const std::string& n : *names) h.Add(n);
  }
  const FilterOptions& f = o.filters;
  h.Add(static_cast<int64_t>(f.min_size));
  h.Add(f.max_aspect);
  h.Add(static_cast<int64_t>(f.min_tokens));
  h.Add(static_cast<int64_t>(f.drop_long_captions));
  h.Add(f.min_score_field);
  h.Add(f.min_score);
  h.Add(static_cast<int64_t>(f.dedup));
  h.Add(static_cast<int64_t>(f.near_threshold));
  h.Add(o.shard_size);
  h.Add(o.samples_per_shard);
  h.Add(static_cast<int64_t>(o.compression));
  h.Add(static_cast<int64_t>(o.compression_level));
  h.Add(static_cast<int64_t>(o.image_codec));
  h.Add(static_cast<int64_t>(o.jpeg_quality));
  h.Add(static_cast<int64_t>(o.max_size));
  h.Add(static_cast<int64_t>(samples.size()));
  MM_RETURN_NOT_OK(ForEachSample(samples, [&h](uint64_t, RawSample& s) {
    h.Add(s.key);
    h.Add(s.source);
    h.Add(s.path);
    h.Add(s.tar_member);
    h.Add(s.tar_member_index);
    h.Add(static_cast<int64_t>(s.captions.size()));
    for (const std::string& c : s.captions) h.Add(c);
    h.Add(static_cast<int64_t>(s.fields.size()));
    for (const FieldValue& v : s.fields) {
      h.Add(static_cast<int64_t>(v.type));
      h.Add(v.i);
      h.Add(v.f);
      h.Add(v.s);
    }
    return Status::OK();
  }));
  return h.Hex();
}

uint64_t SourceStamp(const RawSample& s) {
  if (IsRemoteUrl(s.path)) {
    // A tar: its size and ETag (a HEAD per tar). An image at a URL: not asked (a HEAD per image
    // would double the build's requests), so a resume does not see one replaced.
    return s.tar_member_index >= 0 ? RemoteFileStamp(s.path) : 1;
  }
  struct stat st {};
  if (s.path.empty() || ::stat(s.path.c_str(), &st) != 0) return 0;
  const int64_t fields[2] = {
      static_cast<int64_t>(st.st_size),
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  const uint64_t stamp = XXH3_64bits(fields, sizeof fields);
  return stamp == 0 ? 1 : stamp;  // 0 is "cannot be stat'ed"
}

uint64_t ChainSource(uint64_t chain, size_t index, uint64_t stamp) {
  const uint64_t pair[2] = {static_cast<uint64_t>(index), stamp};
  return XXH3_64bits_withSeed(pair, sizeof pair, chain);
}

Result<uint64_t> SourcesOf(const SampleList& samples, size_t begin, size_t end) {
  MM_ASSIGN_OR_RETURN(SampleList::Cursor cursor, samples.From(begin));
  uint64_t chain = 0;
  RawSample s;
  for (size_t i = begin; i < end; ++i) {
    MM_ASSIGN_OR_RETURN(bool more, cursor.Next(&s));
    if (!more) return Status::Internal("the sample list ended early");
    chain = ChainSource(chain, i, SourceStamp(s));
  }
  return chain;
}

Status StartResumeLog(const fs::path& staging, const ResumeHeader& header) {
  const fs::path folder = staging / kResumeFolder;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return Status::IOError("cannot create " + folder.string() + ": " + ec.message());
  return WriteFileDurably((folder / kHeaderFile).string(),
                          Dump({{"fingerprint", header.fingerprint},
                                {"tokenizer_sha256", header.tokenizer_sha256},
                                {"tokenizer_trained", header.tokenizer_trained}}));
}

Result<ResumeHeader> ReadResumeHeader(const fs::path& staging) {
  const fs::path path = staging / kResumeFolder / kHeaderFile;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Status::NotFound("no " + path.string());
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(path.string(), &text));
  try {
    const json j = json::parse(text);
    ResumeHeader h;
    h.fingerprint = j.at("fingerprint").get<std::string>();
    h.tokenizer_sha256 = j.at("tokenizer_sha256").get<std::string>();
    h.tokenizer_trained = j.at("tokenizer_trained").get<bool>();
    return h;
  } catch (const json::exception& e) {
    return Status::Corruption(path.string() + ": not a build header (" + e.what() + ")");
  }
}

int64_t CountCheckpoints(const fs::path& staging) {
  auto list = ListCheckpoints(staging / kResumeFolder);
  return list.ok() ? static_cast<int64_t>(list->size()) : 0;
}

Result<SinkProgress> LoadCheckpoints(const fs::path& staging, const SampleList& samples,
                                     BuildReport* report, std::vector<std::string>* notes) {
  const size_t total_samples = samples.size();
  SinkProgress progress;
  const fs::path folder = staging / kResumeFolder;
  std::error_code ec;
  MM_ASSIGN_OR_RETURN(auto checkpoints, ListCheckpoints(folder));
  for (const auto& [number, path] : checkpoints) {
    auto c = ReadCheckpoint(path);
    std::string why;
    if (!c.ok()) {
      why = c.status().message();
    } else if (c->progress_after.shards.empty() ||
               progress.shards.size() + c->progress_after.shards.size() != number ||
               c->progress_after.next_sample < progress.next_sample ||
               c->progress_after.next_sample > total_samples) {
      why = path.filename().string() + " does not follow the checkpoint before it";
    } else {
      for (size_t s = 0; s < c->progress_after.shards.size() && why.empty(); ++s) {
        const auto& e = c->progress_after.shards[s];
        if (e.file != format::ShardFileName(static_cast<int64_t>(progress.shards.size() + s))) {
          why = path.filename().string() + " names " + e.file + " out of order";
        } else {
          why = CheckShard(staging, e);
        }
      }
      if (why.empty()) {  // the shards were made from the input files as they are now
        MM_ASSIGN_OR_RETURN(
            uint64_t now, SourcesOf(samples, progress.next_sample, c->progress_after.next_sample));
        if (now != c->progress_after.sources) {
          why = "an input file of the samples of " + path.filename().string() +
                " changed since it was written (size or modification time)";
        }
      }
    }
    if (!why.empty()) {
      notes->push_back("not kept: " + why + "; the build goes on from shard " +
                       std::to_string(progress.shards.size()));
      break;
    }
    if (!report->stats.AppendTail(c->stats)) {
      notes->push_back("not kept: " + path.filename().string() +
                       " holds no valid stats; the build goes on from shard " +
                       std::to_string(progress.shards.size()));
      break;
    }
    for (DropEntry& d : c->dropped) report->dropped.push_back(std::move(d));
    for (DroppedCaption& d : c->dropped_captions) report->dropped_captions.push_back(std::move(d));
    report->written = c->written;
    report->written_captions = c->written_captions;
    report->truncated = c->truncated;
    progress.next_sample = c->progress_after.next_sample;
    progress.pipeline_dropped = c->progress_after.pipeline_dropped;
    for (auto& e : c->progress_after.shards) progress.shards.push_back(std::move(e));
    for (auto& k : c->progress_after.kept) progress.kept.push_back(std::move(k));
  }
  // What follows the last good checkpoint is redone: later checkpoints, and shards not kept.
  std::set<std::string> kept;
  for (const auto& e : progress.shards) kept.insert(e.file);
  for (const fs::path& dir : {folder, staging}) {  // any listing error stops before a shard goes
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      bool stale = false;
      if (dir != folder) {
        stale = IsShardFile(name) && kept.count(name) == 0;
      } else {
        const size_t number = CheckpointNumber(name);
        stale = (number > 0 && number > progress.shards.size()) ||
                (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0);
      }
      if (!stale) continue;
      std::error_code rm;
      fs::remove(it->path(), rm);
      if (rm) return Status::IOError("cannot remove " + it->path().string() + ": " + rm.message());
    }
    if (ec) return Status::IOError("cannot list " + dir.string() + ": " + ec.message());
  }
  return progress;
}

CheckpointWriter::CheckpointWriter(fs::path staging, const BuildReport& report,
                                   const SinkProgress& progress)
    : folder_(staging / kResumeFolder),
      dropped_(report.dropped.size()),
      dropped_captions_(report.dropped_captions.size()),
      shards_(progress.shards.size()),
      kept_(progress.kept.size()),
      stats_(report.stats.Position()) {}

Status CheckpointWriter::Save(const BuildReport& report, const SinkProgress& progress) {
  json shards = json::array(), kept = json::array(), dropped = json::array(),
       captions = json::array();
  for (size_t s = shards_; s < progress.shards.size(); ++s) {
    shards.push_back(EntryJson(progress.shards[s]));
  }
  for (size_t k = kept_; k < progress.kept.size(); ++k) {
    const KeptSample& ks = progress.kept[k];
    kept.push_back({ks.key, ks.pixel_hash, ks.perceptual_hash});
  }
  for (size_t d = dropped_; d < report.dropped.size(); ++d) {
    const DropEntry& e = report.dropped[d];
    dropped.push_back({e.source, e.key, e.reason, e.detail});
  }
  for (size_t d = dropped_captions_; d < report.dropped_captions.size(); ++d) {
    const DroppedCaption& e = report.dropped_captions[d];
    captions.push_back({e.source, e.key, e.caption_index, e.reason});
  }
  char sources[17];
  std::snprintf(sources, sizeof sources, "%016llx",
                static_cast<unsigned long long>(progress.sources));
  json checkpoint = {{"next_sample", progress.next_sample},
                     {"pipeline_dropped", progress.pipeline_dropped},
                     {"sources", sources},
                     {"shards", std::move(shards)},
                     {"written", report.written},
                     {"written_captions", report.written_captions},
                     {"truncated", report.truncated},
                     {"dropped", std::move(dropped)},
                     {"dropped_captions", std::move(captions)},
                     {"kept", std::move(kept)},
                     {"stats", report.stats.Tail(stats_)}};
  MM_RETURN_NOT_OK(WriteFileDurably((folder_ / CheckpointName(progress.shards.size())).string(),
                                    Dump(checkpoint)));
  dropped_ = report.dropped.size();
  dropped_captions_ = report.dropped_captions.size();
  shards_ = progress.shards.size();
  kept_ = progress.kept.size();
  stats_ = report.stats.Position();
  return Status::OK();
}

Status ClearCheckpoints(const fs::path& staging) {
  std::vector<fs::path> stale;
  MM_ASSIGN_OR_RETURN(auto checkpoints, ListCheckpoints(staging / kResumeFolder));
  for (const auto& [number, path] : checkpoints) stale.push_back(path);
  std::error_code ec;
  for (auto it = fs::directory_iterator(staging, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (IsShardFile(it->path().filename().string())) stale.push_back(it->path());
  }
  if (ec) return Status::IOError("cannot list " + staging.string() + ": " + ec.message());
  for (const fs::path& p : stale) {
    fs::remove(p, ec);
    if (ec) return Status::IOError("cannot remove " + p.string() + ": " + ec.message());
  }
  return Status::OK();
}

std::string KeepFinishedWork(const fs::path& staging, bool tokenizer_trained) {
  std::error_code ec;
  // What the checkpoints keep; LoadCheckpoints' own check of every shard is for the resume.
  std::set<std::string> kept;
  size_t good = 0;
  if (auto checkpoints = ListCheckpoints(staging / kResumeFolder); checkpoints.ok()) {
    for (const auto& [number, path] : *checkpoints) {
      auto c = ReadCheckpoint(path);
      if (!c.ok() || number != good + c->progress_after.shards.size()) break;
      for (const auto& e : c->progress_after.shards) kept.insert(e.file);
      good = number;
    }
  }
  if (good == 0 && !tokenizer_trained) {
    fs::remove_all(staging, ec);
    return "";
  }
  // Unfinished work: shard files no checkpoint names, .tmp files, and what the end of a build
  // writes (index.json, report.json: the resume writes them again).
  for (const fs::path& dir : {staging / kResumeFolder, staging}) {
    std::vector<fs::path> stale;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const bool tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
      if (tmp || (IsShardFile(name) && kept.count(name) == 0) ||
          (dir == staging && (name == format::kIndexFile || name == format::kReportFile))) {
        stale.push_back(it->path());
      }
    }
    for (const fs::path& p : stale) fs::remove(p, ec);
  }
  return "; " + std::to_string(good) + " finished shard(s)" +
         (tokenizer_trained ? " and the trained tokenizer" : "") + " kept in " + staging.string() +
         ": run the same command with --resume to go on from there";
}

Status RemoveResumeLog(const fs::path& staging) {
  for (const fs::path& folder : {staging / kResumeFolder, staging / ".parts"}) {
    std::error_code ec;
    fs::remove_all(folder, ec);
    if (ec) return Status::IOError("cannot remove " + folder.string() + ": " + ec.message());
  }
  return Status::OK();
}

}  // namespace mm::pack
