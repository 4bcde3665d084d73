// build.cc: `mmpack build RAW -o OUT` end to end (commands.h).
//
//   check RAW and OUT (each refusal is one line, before anything is written)
//   -> ingest (ingest.h) -> caption checks -> tokenizer (given or trained, tokenizer.h)
//   -> TBB parallel_pipeline, at most 4 samples per thread in flight:
//        serial in order : next sample (tar members read here, sequentially)
//        parallel        : read file, decode + fit (image_pipeline.h), tokenize, compress
//        serial in order : ShardWriter::Add, or a report entry for a dropped sample
//   -> report.json, index.json (last), then the finished set is renamed to OUT.
// Everything is built in a sibling folder "OUT.mmpack-partial" and renamed at the end, so a
// failed build leaves no half set and an --overwrite build keeps the old set until the new
// one is complete (the old one is renamed aside, the new one renamed in, then the old one
// deleted). OUT is normalised first ("out/" is "out"); --overwrite refuses an OUT that is
// "/", the current folder or a parent of it, holds RAW, or is a folder that is neither empty
// nor a shard set. The writer stage sees samples in input order whatever --threads is, so
// the shards and the index are the same at any thread count.
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "commands/commands.h"
#include "commands/human_bytes.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/index_json.h"
#include "commands/progress.h"
#include "shard/shard_writer.h"
#include "text/tokenizer.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct DropEntry {
  std::string source;
  std::string key;
  std::string reason;
  std::string detail;
};

struct DroppedCaption {
  std::string source;
  std::string key;
  int64_t caption_index;  // position in the input's captions of that sample
  std::string reason;
};

// One sample travelling through the pipeline.
struct Item {
  RawSample* raw = nullptr;
  bool have_bytes = false;  // read by the input stage (tar members)
  Status read_status;
  std::string bytes;
  // results
  bool ok = false;
  EncodedSample encoded;
  DropEntry drop;
  int64_t truncated = 0;
  Status fatal;  // a failure that stops the build (compression, tokenizer internals)
};

std::string Str(const Status& st) { return st.message(); }

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Status::IOError("cannot write " + path.string());
  return Status::OK();
}

std::string Dump(const ojson& j) {
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

bool IsInside(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(inner, ec);
  fs::path b = fs::weakly_canonical(outer, ec);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

// OUT as an absolute, lexically normal path without a trailing separator, so "out/", "out"
// and "./x/../out" name the same folder and its last component is never empty, "." or "..".
// The parent is resolved through symlinks (weakly_canonical); the last component is kept as
// given, so an OUT that is a symlink is replaced as a link, not through it.
fs::path NormalOutput(const std::string& given) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(given), ec).lexically_normal();
  if (ec) p = fs::path(given).lexically_normal();
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "a/b/" -> "a/b"
  if (!p.has_relative_path()) return p;                                    // the root itself
  fs::path parent = fs::weakly_canonical(p.parent_path(), ec);
  if (ec) return p;
  return parent / p.filename();
}

// True when `dir` may be replaced by --overwrite: an empty folder, or one that holds an
// mmpack shard set (index.json) or the remains of one (shard-*.h5, report.json, as a build
// killed before index.json leaves it). Anything else may be someone's data.
bool LooksLikeShardSet(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return false;
  bool empty = true;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return false;
    empty = false;
    const std::string name = it->path().filename().string();
    if (name == mm::format::kIndexFile || name == mm::format::kReportFile) return true;
    if (mm::format::ParseShardFileName(name, nullptr)) return true;
  }
  return empty;
}

// The checks that must fail at once, before anything is created. `out` is NormalOutput().
Status CheckPaths(const BuildOptions& o, const fs::path& out) {
  std::error_code ec;
  fs::path raw(o.input);
  if (o.input.empty() || !fs::exists(raw, ec)) {
    return Status::NotFound("input '" + o.input + "' does not exist");
  }
  if (fs::is_directory(raw, ec)) {
    if (fs::directory_iterator(raw, ec) == fs::directory_iterator()) {
      return Status::InvalidArgument("input folder '" + o.input + "' is empty" +
                                     (ec ? " (" + ec.message() + ")" : std::string()));
    }
  } else if (fs::file_size(raw, ec) == 0 || ec) {
    return Status::InvalidArgument("input file '" + o.input + "' is empty");
  }
  if (o.output.empty()) return Status::InvalidArgument("no output directory (-o OUT)");
  // OUT is replaced as a whole (renamed aside, then deleted): it must not be the root, the
  // current folder or one of its parents, nor hold the input.
  if (!out.has_relative_path()) {
    return Status::InvalidArgument("output '" + o.output +
                                   "' is the root folder; choose a new directory");
  }
  const fs::path cwd = fs::current_path(ec);
  if (!ec && IsInside(cwd, out)) {
    return Status::InvalidArgument("output '" + o.output +
                                   "' is the current directory or one of its parents; "
                                   "choose a new directory");
  }
  if (IsInside(raw, out)) {
    return Status::InvalidArgument("input '" + o.input + "' lies inside output '" + o.output +
                                   "'; choose another output directory");
  }
  const fs::file_status st = fs::symlink_status(out, ec);
  if (fs::exists(st)) {
    if (!o.overwrite) {
      return Status::AlreadyExists("output '" + o.output +
                                   "' already exists; pass --overwrite to replace it");
    }
    if (!fs::is_directory(out, ec) || !LooksLikeShardSet(out)) {
      return Status::AlreadyExists("output '" + o.output +
                                   "' exists and is not an mmpack shard set; refusing to "
                                   "delete it");
    }
  }
  return Status::OK();
}

// Creates the (empty) staging folder "OUT.mmpack-partial" beside OUT (`out` is
// NormalOutput(), so the staging folder is never inside OUT). Errors: IOError (OUT's parent
// not writable).
Result<fs::path> MakeStaging(const fs::path& out) {
  std::error_code ec;
  fs::path parent = out.parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      return Status::IOError("cannot create output directory '" + out.string() +
                             "': " + ec.message());
    }
  }
  fs::path staging = parent / (out.filename().string() + ".mmpack-partial");
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec) || ec) {
    return Status::IOError("cannot create output directory '" + out.string() + "' (" +
                           staging.string() +
                           "): " + (ec ? ec.message() : std::string("unknown error")));
  }
  return staging;
}

// Moves the finished set to OUT. An older OUT (checked by CheckPaths) is first renamed aside
// to "OUT.mmpack-old-<pid>", the new set renamed in, and only then the old one deleted; if
// the new set cannot be renamed in, the old one is renamed back, so OUT is never lost.
Status Publish(const fs::path& staging, const fs::path& out) {
  std::error_code ec;
  fs::path old;
  if (fs::exists(fs::symlink_status(out, ec))) {
    old =
        out.parent_path() / (out.filename().string() + ".mmpack-old-" + std::to_string(::getpid()));
    fs::remove_all(old, ec);
    fs::rename(out, old, ec);
    if (ec) {
      return Status::IOError("cannot move old '" + out.string() + "' aside to " + old.string() +
                             ": " + ec.message());
    }
  }
  fs::rename(staging, out, ec);
  if (ec) {
    Status st = Status::IOError("cannot rename " + staging.string() + " to " + out.string() + ": " +
                                ec.message());
    if (!old.empty()) {
      std::error_code back;
      fs::rename(old, out, back);
      if (back) {
        return Status::IOError(st.message() + "; the old set is left at " + old.string());
      }
    }
    return st;
  }
  if (!old.empty()) {
    fs::remove_all(old, ec);
    if (ec) {
      std::fprintf(stderr, "mmpack build: warning: cannot remove the old set %s: %s\n",
                   old.string().c_str(), ec.message().c_str());
    }
  }
  return Status::OK();
}

// Removes the staging folder unless disarmed (every failure path after MakeStaging).
class StagingGuard {
 public:
  explicit StagingGuard(fs::path p) : path_(std::move(p)) {}
  ~StagingGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void Disarm() { path_.clear(); }

 private:
  fs::path path_;
};

// The most bytes read of one image file or tar member: what an uncompressed 16-bit RGBA
// image of --max-pixels takes (8 bytes a pixel) plus 64 MiB of metadata, and at least 1 GiB.
// A larger file cannot be an image mmpack would keep; reading it (a 50 GB sparse file named
// .jpg) would exhaust memory. Such a file is dropped as file_too_large.
int64_t MaxImageFileBytes(int64_t max_pixels) {
  constexpr int64_t kFloor = int64_t{1} << 30, kSlack = int64_t{64} << 20;
  if (max_pixels <= 0 || max_pixels > (INT64_MAX - kSlack) / 8) return INT64_MAX;
  return std::max(kFloor, 8 * max_pixels + kSlack);
}

const char* ReadFailureReason(const Status& st) {
  if (st.IsNotFound()) return "missing_file";
  if (st.code() == StatusCode::kOutOfRange) return "file_too_large";
  return "unreadable";
}

void ProcessItem(Item* item, const BuildOptions& o, const ImageOptions& image_options,
                 const Tokenizer& tokenizer) {
  RawSample& raw = *item->raw;
  auto drop = [&](const char* reason, std::string detail) {
    item->ok = false;
    item->drop = {raw.source, raw.key, reason, std::move(detail)};
  };
  if (!item->have_bytes) {
    item->read_status = ReadRegularFile(raw.path, &item->bytes, MaxImageFileBytes(o.max_pixels));
  }
  if (!item->read_status.ok()) {
    drop(ReadFailureReason(item->read_status), Str(item->read_status));
    return;
  }
  ProcessedImage image;
  ImageFailure failure;
  if (!ProcessImage(item->bytes, image_options, &image, &failure)) {
    drop(failure.reason.c_str(), failure.detail);
    return;
  }
  std::string().swap(item->bytes);
  EncodedSample& e = item->encoded;
  e.tokens.reserve(raw.captions.size());
  for (const std::string& caption : raw.captions) {
    auto t = tokenizer.Encode(caption, o.max_tokens);
    if (!t.ok()) {
      item->fatal = t.status().WithContext("sample " + raw.key);
      return;
    }
    if (t->truncated) ++item->truncated;
    e.tokens.push_back(std::move(t->ids));
  }
  auto chunk =
      CompressImage(image.pixels.data(), image.pixels.size(), o.compression, o.compression_level);
  if (!chunk.ok()) {
    item->fatal = chunk.status().WithContext("compressing sample " + raw.key);
    return;
  }
  e.image_chunk = chunk.MoveValue();
  e.key = std::move(raw.key);
  e.source = std::move(raw.source);
  e.original_width = image.original_width;
  e.original_height = image.original_height;
  std::copy(image.valid_box, image.valid_box + 4, e.valid_box);
  e.captions = std::move(raw.captions);
  item->ok = true;
}

}  // namespace

Status RunBuild(const BuildOptions& o) {
  Progress timer(0, true);
  // Option values main.cc does not check.
  ImageOptions image_options;
  image_options.mode = o.resize_mode;
  MM_ASSIGN_OR_RETURN(image_options.background, ParseColour(o.background));
  if (o.image_width <= 0 || o.image_height <= 0 || o.image_width > 16384 ||
      o.image_height > 16384) {
    return Status::InvalidArgument("--image-size must be 1..16384 pixels a side");
  }
  if (o.max_tokens < 1) return Status::InvalidArgument("--max-tokens must be >= 1");
  image_options.width = o.image_width;
  image_options.height = o.image_height;
  image_options.max_pixels = o.max_pixels;

  const fs::path out = NormalOutput(o.output);
  MM_RETURN_NOT_OK(CheckPaths(o, out));
  MM_RETURN_NOT_OK(InitVips());
  // The staging folder beside OUT proves OUT writable before any long work; a failure
  // anywhere below removes it, so OUT is never left half-built.
  MM_ASSIGN_OR_RETURN(fs::path staging, MakeStaging(out));
  StagingGuard guard(staging);
  MM_ASSIGN_OR_RETURN(IngestResult ingest, Ingest(o.input, o.input_format));
  if (!o.quiet) {
    for (const std::string& note : ingest.notes) {
      std::fprintf(stderr, "mmpack build: note: %s\n", note.c_str());
    }
  }

  std::vector<DropEntry> dropped;
  for (IngestIssue& issue : ingest.issues) {
    dropped.push_back({std::move(issue.source), std::move(issue.key), std::move(issue.reason),
                       std::move(issue.detail)});
  }
  // Caption checks: a sample keeps its good captions; with none left it is dropped.
  std::vector<DroppedCaption> dropped_captions;
  std::vector<RawSample>& samples = ingest.samples;
  {
    size_t kept = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      RawSample& s = samples[i];
      std::vector<std::string> good;
      const char* first_reason = nullptr;
      for (size_t c = 0; c < s.captions.size(); ++c) {
        const char* reason = CheckCaption(s.captions[c]);
        if (reason == nullptr) {
          good.push_back(std::move(s.captions[c]));
        } else {
          if (first_reason == nullptr) first_reason = reason;
          dropped_captions.push_back({s.source, s.key, static_cast<int64_t>(c), reason});
        }
      }
      if (good.empty()) {
        dropped.push_back({s.source, s.key, first_reason ? first_reason : "empty_caption",
                           std::to_string(s.captions.size()) + " caption(s), none usable"});
        continue;
      }
      s.captions = std::move(good);
      if (kept != i) samples[kept] = std::move(s);
      ++kept;
    }
    samples.resize(kept);
  }
  auto count_reasons = [&] {
    std::map<std::string, int64_t> by_reason;
    for (const DropEntry& d : dropped) ++by_reason[d.reason];
    return by_reason;
  };
  auto reasons_text = [&] {
    std::string text;
    for (const auto& [reason, n] : count_reasons()) {
      text += (text.empty() ? "" : ", ") + reason + " " + std::to_string(n);
    }
    return text;
  };
  if (samples.empty()) {
    return Status::InvalidArgument(
        "no usable sample in '" + o.input + "' (format " + std::string(ToString(ingest.format)) +
        ")" + (dropped.empty() ? std::string() : "; dropped " + reasons_text()));
  }

  // Tokenizer: given, or trained on the good captions.
  std::string model_bytes;
  bool trained = false;
  if (!o.tokenizer.empty()) {
    MM_RETURN_NOT_OK(ReadRegularFile(o.tokenizer, &model_bytes).WithContext("--tokenizer"));
  } else {
    std::vector<std::string_view> captions;
    for (const RawSample& s : samples) {
      for (const std::string& c : s.captions) captions.push_back(c);
    }
    if (!o.quiet) {
      std::fprintf(stderr,
                   "mmpack build: training a SentencePiece unigram tokenizer "
                   "(vocab %d) on %zu captions\n",
                   o.vocab_size, captions.size());
    }
    std::string note;
    MM_ASSIGN_OR_RETURN(model_bytes, Tokenizer::Train(captions, o.vocab_size, &note));
    if (!note.empty() && !o.quiet) std::fprintf(stderr, "mmpack build: %s\n", note.c_str());
    trained = true;
  }
  const std::string sha256 = Sha256Hex(model_bytes);
  MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kTokenizerFile), model_bytes));
  MM_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                      Tokenizer::FromSerialized(std::move(model_bytes)));

  WriterOptions wo;
  wo.output_dir = staging.string();
  wo.image_width = o.image_width;
  wo.image_height = o.image_height;
  wo.resize_mode = o.resize_mode;
  wo.compression = o.compression;
  wo.compression_level = o.compression_level;
  wo.shard_size = o.shard_size;
  wo.samples_per_shard = o.samples_per_shard;
  wo.tokenizer_sha256 = sha256;
  MM_ASSIGN_OR_RETURN(std::unique_ptr<ShardWriter> writer, ShardWriter::Create(wo));

  // The pipeline.
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
  const size_t in_flight = static_cast<size_t>(4 * threads);
  const bool from_tar = ingest.format == InputFormat::kWds;
  Progress progress(static_cast<int64_t>(samples.size()), o.quiet);
  size_t next = 0;
  ImageReader tar_reader;
  // `fatal` is written only by the output stage; the input stage runs on another TBB thread,
  // so it reads only `stop`, which is set (release) after `fatal` is written.
  Status fatal;
  std::atomic<bool> stop{false};
  int64_t written = 0, written_captions = 0, pipeline_dropped = 0, truncated = 0;
  std::vector<DropEntry> image_drops;
  tbb::parallel_pipeline(
      in_flight,
      tbb::make_filter<void, Item*>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) -> Item* {
            if (next >= samples.size() || stop.load(std::memory_order_acquire)) {
              fc.stop();
              return nullptr;
            }
            auto* item = new Item;
            item->raw = &samples[next++];
            if (from_tar) {
              item->read_status =
                  tar_reader.Read(*item->raw, &item->bytes, MaxImageFileBytes(o.max_pixels));
              item->have_bytes = true;
            }
            return item;
          }) &
          tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel,
                                         [&](Item* item) -> Item* {
                                           ProcessItem(item, o, image_options, *tokenizer);
                                           return item;
                                         }) &
          tbb::make_filter<Item*, void>(tbb::filter_mode::serial_in_order, [&](Item* item) {
            std::unique_ptr<Item> owner(item);
            if (!fatal.ok()) return;
            if (!item->fatal.ok()) {
              fatal = item->fatal;
              stop.store(true, std::memory_order_release);
              return;
            }
            if (item->ok) {
              written_captions += static_cast<int64_t>(item->encoded.captions.size());
              truncated += item->truncated;
              Status st = writer->Add(std::move(item->encoded));
              if (!st.ok()) {
                fatal = st;
                stop.store(true, std::memory_order_release);
                return;
              }
              ++written;
            } else {
              image_drops.push_back(std::move(item->drop));
              ++pipeline_dropped;
            }
            progress.Update(written + pipeline_dropped, pipeline_dropped);
            // Free the sample's text as soon as it is written.
            RawSample().captions.swap(item->raw->captions);
          }));
  progress.Finish();
  MM_RETURN_NOT_OK(fatal);
  MM_ASSIGN_OR_RETURN(std::vector<mm::reader::ShardEntry> shards, writer->Finish());
  for (DropEntry& d : image_drops) dropped.push_back(std::move(d));

  // report.json
  const auto by_reason = count_reasons();
  ojson report;
  report["input"] = o.input;
  report["input_format"] = std::string(ToString(ingest.format));
  report["samples_seen"] = written + static_cast<int64_t>(dropped.size());
  report["samples_written"] = written;
  ojson dropped_json = ojson::array();
  for (const DropEntry& d : dropped) {
    dropped_json.push_back(
        {{"source", d.source}, {"key", d.key}, {"reason", d.reason}, {"detail", d.detail}});
  }
  report["dropped"] = std::move(dropped_json);
  report["dropped_by_reason"] = ojson::object();
  for (const auto& [reason, n] : by_reason) report["dropped_by_reason"][reason] = n;
  ojson captions_json = ojson::array();
  std::map<std::string, int64_t> caption_reasons;
  for (const DroppedCaption& d : dropped_captions) {
    captions_json.push_back({{"source", d.source},
                             {"key", d.key},
                             {"caption_index", d.caption_index},
                             {"reason", d.reason}});
    ++caption_reasons[d.reason];
  }
  report["dropped_captions"] = std::move(captions_json);
  report["dropped_captions_by_reason"] = ojson::object();
  for (const auto& [reason, n] : caption_reasons) {
    report["dropped_captions_by_reason"][reason] = n;
  }
  report["truncated_captions"] = truncated;
  MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kReportFile), Dump(report)));

  if (written == 0) {
    return Status::InvalidArgument("no sample of '" + o.input + "' could be used; dropped " +
                                   reasons_text());
  }

  // index.json, last.
  mm::reader::internal::IndexDocument index;
  mm::reader::SetInfo& set = index.info;
  set.image_height = o.image_height;
  set.image_width = o.image_width;
  set.resize_mode = ToString(o.resize_mode);
  set.compression = ToString(o.compression);
  set.compression_level = o.compression_level;
  set.vocab_size = tokenizer->vocab_size();
  set.pad_id = tokenizer->pad_id();
  set.unk_id = tokenizer->unk_id();
  set.bos_id = tokenizer->bos_id();
  set.eos_id = tokenizer->eos_id();
  set.max_tokens = o.max_tokens;
  set.tokenizer_sha256 = sha256;
  set.shards = shards;
  index.background = ColourHex(image_options.background);
  index.tokenizer_trained = trained;
  index.build_options = {{"input_format", std::string(ToString(ingest.format))},
                         {"max_pixels", o.max_pixels},
                         {"shard_size", o.shard_size},
                         {"samples_per_shard", o.samples_per_shard},
                         {"vocab_size", o.vocab_size}};
  index.dropped_by_reason = by_reason;
  MM_RETURN_NOT_OK(WriteText(staging / std::string(mm::format::kIndexFile),
                             mm::reader::internal::EncodeIndex(index)));

  MM_RETURN_NOT_OK(Publish(staging, out));
  guard.Disarm();

  // Counts by reason, then the one-line summary.
  int64_t total_bytes = 0;
  for (const auto& s : shards) total_bytes += s.bytes;
  const double seconds = timer.ElapsedSeconds();
  if (!o.quiet) {
    for (const auto& [reason, n] : by_reason) {
      std::fprintf(stderr, "mmpack build: dropped %s: %lld\n", reason.c_str(),
                   static_cast<long long>(n));
    }
    if (!dropped_captions.empty()) {
      std::fprintf(stderr,
                   "mmpack build: %zu caption(s) dropped from kept samples or with "
                   "their sample (see report.json)\n",
                   dropped_captions.size());
    }
  }
  std::fprintf(stderr,
               "mmpack build: wrote %lld samples (%lld captions, %lld truncated) in %zu "
               "shard(s), %s (%s a sample), dropped %zu%s%s%s, %.1f s (%.1f samples/s) -> %s\n",
               static_cast<long long>(written), static_cast<long long>(written_captions),
               static_cast<long long>(truncated), shards.size(),
               HumanBytes(static_cast<double>(total_bytes)).c_str(),
               HumanBytes(static_cast<double>(total_bytes) / written).c_str(), dropped.size(),
               dropped.empty() ? "" : " (", dropped.empty() ? "" : reasons_text().c_str(),
               dropped.empty() ? "" : ")", seconds, seconds > 0 ? written / seconds : 0.0,
               o.output.c_str());
  return Status::OK();
}

}  // namespace mm::pack
