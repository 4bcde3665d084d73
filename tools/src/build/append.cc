// append.cc: see build_append.h.
#include "build/append.h"

#include <fcntl.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <system_error>
#include <thread>

#include "set/output_dir.h"
#include "set/report_stream.h"
#include "set/set_index.h"
#include "curate/dedup.h"
#include "image/colour.h"
#include "mm/format.h"
#include "mm/internal/file.h"
#include "mm/reader.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

bool IsReportList(const std::string& key) {
  for (const char* list : kReportLists) {
    if (key == list) return true;
  }
  return false;
}

// The first option whose value differs, as one line.
Status Differs(const std::string& what, const std::string& set, const std::string& build) {
  return Status::InvalidArgument("--append: OUT holds " + what + " " + set + ", this build makes " +
                                 build + "; append with the options OUT was built with");
}

// Adds the integer members of `more` to those of `into` (counts by reason).
void AddCounts(const ojson& more, ojson* into) {
  if (!more.is_object()) return;
  if (!into->is_object()) *into = ojson::object();
  for (const auto& [k, v] : more.items()) {
    if (!v.is_number_integer()) continue;
    (*into)[k] = into->value(k, int64_t{0}) + v.get<int64_t>();
  }
}

// `into[key]` += more[key], integers.
void AddInteger(const ojson& more, const char* key, ojson* into) {
  if (!more.contains(key) || !more[key].is_number_integer()) return;
  (*into)[key] = into->value(key, int64_t{0}) + more[key].get<int64_t>();
}

std::string Dump(const ojson& v, int indent) {
  std::string text = v.dump(2, ' ', false, ojson::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    out += c;
    if (c == '\n') out.append(static_cast<size_t>(indent), ' ');
  }
  return out;
}

// Writes the merged report to `path` as `merged` (the small members, in order) with each list
// of kReportLists written in its place, streamed: OUT's entries (from `old_report`, when there
// is one) then the append's (`more`). The layout of nlohmann's dump(2).
Status WriteMergedReport(const fs::path& path, const ojson& merged, const fs::path& old_report,
                         const ojson& more) {
  const std::string what = "cannot write " + path.string();
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, what);
  std::string buf = "{";
  const auto flush = [&](size_t at_least) -> Status {
    if (buf.size() < at_least) return Status::OK();
    MM_RETURN_NOT_OK(WriteAll(fd.get(), buf.data(), buf.size(), what));
    buf.clear();
    return Status::OK();
  };
  bool first = true;
  for (const auto& [key, value] : merged.items()) {
    buf += first ? "\n  " : ",\n  ";
    first = false;
    buf += ojson(key).dump(-1, ' ', false, ojson::error_handler_t::replace) + ": ";
    if (!IsReportList(key)) {
      buf += Dump(value, 2);
      continue;
    }
    buf += "[";
    size_t n = 0;
    const auto put = [&](const ojson& entry) -> Status {
      buf += n++ == 0 ? "\n    " : ",\n    ";
      buf += Dump(entry, 4);
      return flush(size_t{1} << 20);
    };
    if (!old_report.empty()) {
      MM_RETURN_NOT_OK(ForEachReportEntry(old_report, key, [&](ojson&& e) { return put(e); }));
    }
    if (more.contains(key) && more[key].is_array()) {
      for (const ojson& e : more[key]) MM_RETURN_NOT_OK(put(e));
    }
    buf += n == 0 ? "]" : "\n  ]";
  }
  buf += first ? "}\n" : "\n}\n";
  MM_RETURN_NOT_OK(flush(0));
  if (::close(fd.Release()) != 0) return ErrnoStatus(errno, what);
  return Status::OK();
}

// index.json's "dedup" of the appended set: what holds of all its samples, the weaker of
// OUT's claim and this append's mode (off < exact < near; near at the smaller threshold), as
// the append compared its samples with OUT's and each other's under its own mode only.
void MergeDedupClaim(const BuildOptions& o, nlohmann::ordered_json* options) {
  const auto rank = [](const std::string& mode) {
    return mode == ToString(DedupMode::kNear) ? 2 : mode == ToString(DedupMode::kExact) ? 1 : 0;
  };
  const std::string out_mode = options->contains("dedup") && (*options)["dedup"].is_string()
                                   ? (*options)["dedup"].get<std::string>()
                                   : std::string(ToString(DedupMode::kOff));
  const std::string now(ToString(o.filters.dedup));
  if (rank(now) < rank(out_mode)) {
    (*options)["dedup"] = now;
    options->erase("near_threshold");
  } else if (rank(now) == 2 && rank(out_mode) == 2) {
    const int t = options->contains("near_threshold") && (*options)["near_threshold"].is_number()
                      ? (*options)["near_threshold"].get<int>()
                      : 0;
    (*options)["near_threshold"] = std::min(t, o.filters.near_threshold);
  } else if (rank(out_mode) == 0 && options->contains("dedup")) {
    (*options)["dedup"] = std::string(ToString(DedupMode::kOff));  // unknown: claims nothing
  }
}

}  // namespace

Result<AppendBase> OpenAppendBase(const fs::path& out) {
  std::error_code ec;
  if (!fs::is_regular_file(out / std::string(format::kIndexFile), ec)) {
    return Status::NotFound("--append: output '" + out.string() +
                            "' is not a shard set (no index.json); build it without --append");
  }
  AppendBase base;
  MM_ASSIGN_OR_RETURN(auto files, OpenSetFiles(out.string(), {}));
  MM_ASSIGN_OR_RETURN(base.index, ReadSetIndex(*files));
  MM_ASSIGN_OR_RETURN(base.set, mm::reader::ShardSet::Open(out.string()));
  const auto& set = base.set;
  base.keys.reserve(static_cast<size_t>(set->num_samples()));
  for (int64_t i = 0; i < set->num_samples(); ++i) base.keys.emplace(set->Key(i));
  // OUT's report is merged, never dropped: one that cannot be read refuses the append.
  // Streamed: its lists of drops are never held.
  const fs::path report = out / std::string(format::kReportFile);
  if (fs::exists(fs::symlink_status(report, ec))) {
    auto summary = ReadReportSummary(report);
    if (!summary.ok()) {
      return Status(summary.status().code(),
                    "--append: " + summary.status().message() +
                        "; its drops cannot be merged with this append's (OUT is unchanged: "
                        "restore the file, or move it away to append without it)");
    }
    base.report = summary.MoveValue();
    base.report_path = report;
  }
  return base;
}

Result<BuildOptions> AppendOptions(const BuildOptions& o, const fs::path& out,
                                   const AppendBase& base) {
  BuildOptions a = o;
  const bool has = base.index.info.has_tokenizer;
  if (!has && !o.tokenizer.empty() && o.tokenizer != kNoTokenizer) {
    return Status::InvalidArgument(
        "--append: OUT stores captions without token ids (--tokenizer none); this build names "
        "the tokenizer '" + o.tokenizer + "'");
  }
  if (has && o.tokenizer == kNoTokenizer) {
    return Status::InvalidArgument(
        "--append: OUT's captions have token ids; --tokenizer none would store none");
  }
  if (!o.compression_given) {  // OUT's chunk codec and level, not today's default
    a.compression = base.index.info.compression;
    if (a.compression == format::Codec::kZstd) {
      a.compression_level = base.index.info.compression_level;
    }
  }
  if (!has) {
    a.tokenizer = kNoTokenizer;
  } else if (o.tokenizer.empty()) {  // OUT's own model, never one trained on the new captions
    const std::string& file = base.index.tokenizer_file;
    a.tokenizer = (out / (file.empty() ? std::string(format::kTokenizerFile) : file)).string();
  }
  return a;
}

Status CheckAppendable(const BuildOptions& o, const ImageOptions& image,
                       const std::string& tokenizer_sha256, const AppendBase& base) {
  const mm::reader::SetInfo& set = base.index.info;
  if (o.image_codec != set.image_codec) {
    return Differs("image codec", std::string(ToString(set.image_codec)),
                   std::string(ToString(o.image_codec)));
  }
  if (o.resize_mode != set.resize_mode) {
    return Differs("resize mode", mm::reader::internal::ResizeModeText(base.index),
                   std::string(ToString(o.resize_mode)));
  }
  const auto size = [](int w, int h) { return std::to_string(w) + "x" + std::to_string(h); };
  if (o.image_width != set.image_width || o.image_height != set.image_height) {
    return Differs("images of", size(set.image_width, set.image_height),
                   size(o.image_width, o.image_height));
  }
  if (o.max_size != set.max_size) {
    return Differs("max size", std::to_string(set.max_size), std::to_string(o.max_size));
  }
  if (o.image_codec == format::ImageCodec::kJpeg && o.jpeg_quality != set.jpeg_quality) {
    return Differs("JPEG quality", std::to_string(set.jpeg_quality),
                   std::to_string(o.jpeg_quality));
  }
  if (o.compression != set.compression) {
    return Differs("compression", std::string(ToString(set.compression)),
                   std::string(ToString(o.compression)));
  }
  if (o.compression == format::Codec::kZstd && o.compression_level != set.compression_level) {
    return Differs("zstd level", std::to_string(set.compression_level),
                   std::to_string(o.compression_level));
  }
  const std::string background = ColourHex(image.background);
  if (background != base.index.background) {
    return Differs("background", base.index.background, background);
  }
  if (tokenizer_sha256 != set.tokenizer_sha256) {
    return Differs("token ids of the tokenizer with SHA-256", set.tokenizer_sha256.substr(0, 16),
                   tokenizer_sha256.substr(0, 16));
  }
  if (set.has_tokenizer && o.max_tokens != set.max_tokens) {
    return Differs("captions of at most max tokens", std::to_string(set.max_tokens),
                   std::to_string(o.max_tokens));
  }
  const std::string normalize(ToString(o.text.normalize));
  if (o.text.lowercase != set.text_lowercase || normalize != set.text_normalize) {
    const auto text = [](bool lower, const std::string& n) {
      return std::string(lower ? "lowercased" : "case-kept") + ", normalize " + n;
    };
    return Differs("token ids of text", text(set.text_lowercase, set.text_normalize),
                   text(o.text.lowercase, normalize));
  }
  if (o.keep_fields != set.metadata_fields) {
    const auto names = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& n : v) s += (s.empty() ? "" : ",") + n;
      return "[" + s + "]";
    };
    return Differs("kept fields", names(set.metadata_fields), names(o.keep_fields));
  }
  return Status::OK();
}

Status HashBaseImages(int threads, AppendBase* base) {
  const mm::reader::ShardSet& set = *base->set;
  const int64_t n = set.num_samples();
  base->images.assign(static_cast<size_t>(n), KeptSample());
  std::atomic<bool> failed{false};
  Status first_error;
  std::mutex error_mutex;
  const int workers = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, workers);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 64), [&](const auto& range) {
    std::vector<uint8_t> pixels;
    for (int64_t i = range.begin(); i != range.end() && !failed.load(); ++i) {
      int w = 0, h = 0;
      set.ImageSize(i, &w, &h);
      pixels.resize(static_cast<size_t>(w) * h * 3);
      if (Status st = set.ReadImage(i, pixels.data()); !st.ok()) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!failed.exchange(true)) first_error = st.WithContext("--append --dedup: reading OUT");
        return;
      }
      KeptSample& k = base->images[static_cast<size_t>(i)];
      k.key = std::string(set.Key(i));
      k.pixel_hash = PixelHash(pixels.data(), pixels.size());
      k.perceptual_hash = PerceptualHash(pixels.data(), w, h);
    }
  });
  return first_error;
}

bool DropsAsKeyOfBase(const AppendBase& base, const RawSample& s, std::vector<DropEntry>* dropped) {
  if (base.keys.count(s.key) == 0) return false;
  dropped->push_back({s.source, s.key, "duplicate_key", "key already in OUT"});
  return true;
}

Status AssembleAppend(const BuildPlan& plan, const AppendBase& base, const AppendMade& made) {
  const BuildOptions& o = plan.options;
  const InputFormat format = made.format;
  const std::vector<mm::reader::ShardEntry>& added = made.added;
  const BuildReport& report = made.report;
  const fs::path& out = plan.out;
  const fs::path& staging = plan.staging;
  // OUT's shards, linked: the same inodes, nothing copied and nothing of OUT changed.
  mm::reader::internal::IndexDocument doc = base.index;
  for (const mm::reader::ShardEntry& s : doc.info.shards) {
    const fs::path from = out / s.file, to = staging / s.file;
    if (::link(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(errno, "--append: cannot hard-link " + from.string() + " to " +
                                    to.string() + " (OUT and its parent folder must be on one "
                                    "file system)");
    }
  }
  // index.json: OUT's, with the new shards after its own, drops and the <unk> rate summed.
  const int64_t old_tokens = base.index.totals.tokens;
  for (const mm::reader::ShardEntry& s : added) doc.info.shards.push_back(s);
  for (const auto& [reason, n] : report.ByReason()) doc.dropped_by_reason[reason] += n;
  if (doc.info.unk_rate >= 0 && doc.info.has_tokenizer) {
    const double unk = doc.info.unk_rate * static_cast<double>(old_tokens) +
                       static_cast<double>(report.stats.unk_tokens());
    const double tokens = static_cast<double>(old_tokens + report.stats.tokens());
    doc.info.unk_rate = tokens > 0 ? unk / tokens : 0.0;
  }
  doc.build_options["appends"] = doc.build_options.value("appends", int64_t{0}) + 1;
  MergeDedupClaim(o, &doc.build_options);
  // report.json: counts and lists summed over the builds; each append's own figures (its input,
  // drops and stats) in "appends"; "stats" stays the first build's. OUT's lists are streamed
  // from its file into the new one (WriteMergedReport).
  ojson merged = base.report;
  const ojson more = ojson::parse(ReportJson(o, format, report), nullptr, false);
  if (more.is_object()) {
    for (const char* key : {"samples_seen", "samples_written", "truncated_captions"}) {
      AddInteger(more, key, &merged);
    }
    for (const char* key : kReportLists) {
      if (!merged.contains(key)) merged[key] = nullptr;  // a place for the append's entries
    }
    for (const char* key : {"dropped_by_reason", "dropped_captions_by_reason"}) {
      if (more.contains(key)) AddCounts(more[key], &merged[key]);
    }
    ojson entry = {{"input", more.value("input", "")},
                   {"input_format", more.value("input_format", "")},
                   {"samples_seen", more.value("samples_seen", int64_t{0})},
                   {"samples_written", more.value("samples_written", int64_t{0})},
                   {"first_shard", added.empty() ? "" : added.front().file},
                   {"dropped_by_reason", more.value("dropped_by_reason", ojson::object())},
                   {"stats", more.value("stats", ojson::object())}};
    if (!merged.contains("appends") || !merged["appends"].is_array()) {
      merged["appends"] = ojson::array();
    }
    merged["appends"].push_back(std::move(entry));
  }
  MM_RETURN_NOT_OK(WriteMergedReport(staging / std::string(format::kReportFile), merged,
                                     base.report_path, more));
  return WriteText(staging / std::string(format::kIndexFile),
                   mm::reader::internal::EncodeIndex(doc));
}

}  // namespace mm::pack
