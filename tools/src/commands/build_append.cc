// build_append.cc: see build_append.h.
#include "commands/build_append.h"

#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "commands/output_dir.h"
#include "commands/set_index.h"
#include "image/colour.h"
#include "mm/format.h"
#include "mm/internal/file.h"
#include "mm/reader.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bytes of OUT/report.json read at most.
constexpr int64_t kMaxReportBytes = int64_t{256} << 20;

// The first option whose value differs, as one line.
Status Differs(const std::string& what, const std::string& set, const std::string& build) {
  return Status::InvalidArgument("--append: OUT holds " + what + " " + set + ", this build makes " +
                                 build + "; append with the options OUT was built with");
}

// Adds the integer members of `more` to those of `into` (counts by reason).
void AddCounts(const json& more, json* into) {
  if (!more.is_object()) return;
  if (!into->is_object()) *into = json::object();
  for (const auto& [k, v] : more.items()) {
    if (!v.is_number_integer()) continue;
    (*into)[k] = into->value(k, int64_t{0}) + v.get<int64_t>();
  }
}

// `into[key]` += more[key] for an integer, or the arrays concatenated.
void Add(const json& more, const char* key, json* into) {
  if (!more.contains(key)) return;
  const json& v = more[key];
  if (v.is_number_integer()) {
    (*into)[key] = into->value(key, int64_t{0}) + v.get<int64_t>();
  } else if (v.is_array()) {
    if (!into->contains(key) || !(*into)[key].is_array()) (*into)[key] = json::array();
    for (const json& e : v) (*into)[key].push_back(e);
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
  MM_ASSIGN_OR_RETURN(auto set, mm::reader::ShardSet::Open(out.string()));
  base.keys.reserve(static_cast<size_t>(set->num_samples()));
  for (int64_t i = 0; i < set->num_samples(); ++i) base.keys.emplace(set->Key(i));
  std::string text;
  const fs::path report = out / std::string(format::kReportFile);
  if (fs::exists(report, ec) &&
      ReadRegularFile(report.string(), &text, kMaxReportBytes).ok()) {
    base.report = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!base.report.is_object()) base.report = json::object();
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
  if (!o.compression_given) {  // OUT's chunk codec and level (the default changed in issue 30)
    if (const auto codec = format::ParseCodec(base.index.info.compression)) {
      a.compression = *codec;
      if (a.compression == format::Codec::kZstd) {
        a.compression_level = base.index.info.compression_level;
      }
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
  const std::string codec(ToString(o.image_codec));
  if (codec != set.image_codec) return Differs("image codec", set.image_codec, codec);
  const std::string mode(ToString(o.resize_mode));
  if (mode != set.resize_mode) return Differs("resize mode", set.resize_mode, mode);
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
  const std::string compression(ToString(o.compression));
  if (compression != set.compression) return Differs("compression", set.compression, compression);
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

bool DropsAsKeyOfBase(const AppendBase& base, const RawSample& s, std::vector<DropEntry>* dropped) {
  if (base.keys.count(s.key) == 0) return false;
  dropped->push_back({s.source, s.key, "duplicate_key", "key already in OUT"});
  return true;
}

Status AssembleAppend(const BuildOptions& o, InputFormat format, const AppendBase& base,
                      const std::vector<mm::reader::ShardEntry>& added, const BuildReport& report,
                      const fs::path& out, const fs::path& staging) {
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
  // report.json: counts and lists summed over the builds; each append's own figures (its input,
  // drops and stats) in "appends"; "stats" stays the first build's.
  json merged = base.report;
  const json more = json::parse(ReportJson(o, format, report), nullptr, false);
  if (more.is_object()) {
    for (const char* key : {"samples_seen", "samples_written", "dropped", "dropped_captions",
                            "truncated_captions"}) {
      Add(more, key, &merged);
    }
    for (const char* key : {"dropped_by_reason", "dropped_captions_by_reason"}) {
      if (more.contains(key)) AddCounts(more[key], &merged[key]);
    }
    json entry = {{"input", more.value("input", "")},
                  {"input_format", more.value("input_format", "")},
                  {"samples_seen", more.value("samples_seen", int64_t{0})},
                  {"samples_written", more.value("samples_written", int64_t{0})},
                  {"first_shard", added.empty() ? "" : added.front().file},
                  {"dropped_by_reason", more.value("dropped_by_reason", json::object())},
                  {"stats", more.value("stats", json::object())}};
    if (!merged.contains("appends") || !merged["appends"].is_array()) {
      merged["appends"] = json::array();
    }
    merged["appends"].push_back(std::move(entry));
  }
  MM_RETURN_NOT_OK(WriteText(staging / std::string(format::kReportFile),
                             merged.dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
  return WriteText(staging / std::string(format::kIndexFile),
                   mm::reader::internal::EncodeIndex(doc));
}

}  // namespace mm::pack
