// info.cc: `mmpack info OUT` (commands.h): the set's figures from index.json (the reader's
// strict decoder) and report.json.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "commands/commands.h"
#include "set/human_bytes.h"
#include "set/set_index.h"
#include "mm/format.h"
#include "mm/internal/file.h"
#include "mm/internal/set_files.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using mm::reader::internal::ResizeModeText;
using nlohmann::json;

// Bytes of report.json read at most.
constexpr int64_t kMaxReportBytes = int64_t{64} << 20;

// A JSON file of the set that is not index.json (report.json), read as the safe open reads
// (or fetched, for a remote set). Errors: those of SetFiles::Read; Corruption (not an object).
Result<json> ReadJsonFile(const mm::reader::internal::SetFiles& files, const std::string& name) {
  MM_ASSIGN_OR_RETURN(std::string text, files.Read(name, kMaxReportBytes));
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return Status::Corruption(files.Display(name) + " is not a JSON object");
  }
  return value;
}

std::string Known(const std::string& s) { return s.empty() ? std::string("?") : s; }
int64_t Or0(int64_t v) { return v < 0 ? int64_t{0} : v; }
double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// samples, captions, tokens, bytes: index.json's totals.
void PrintCounts(const mm::reader::internal::IndexDocument& index, std::ostream& out) {
  const int64_t samples = Or0(index.totals.samples), captions = Or0(index.totals.captions);
  const int64_t tokens = Or0(index.totals.tokens), bytes = Or0(index.totals.bytes);
  const int64_t shards = Or0(index.totals.shards);
  out << "samples:      " << samples << " in " << shards << " shard" << (shards == 1 ? "" : "s")
      << "\n";
  out << "captions:     " << captions << " (" << Ratio(captions, samples) << " per sample)\n";
  out << "tokens:       " << tokens << " (" << Ratio(tokens, captions) << " per caption)\n";
  out << "bytes:        " << HumanBytes(static_cast<double>(bytes)) << " ("
      << HumanBytes(Ratio(bytes, samples)) << " per sample)\n";
}

// "min..max (median p50)" of one report.json stats figure, "?" when absent.
std::string Spread(const json& stats, const char* figure) {
  const json f = stats.value(figure, json::object());
  if (!f.is_object() || !f.contains("min") || !f.contains("max") || !f.contains("p50")) return "?";
  return f["min"].dump() + ".." + f["max"].dump() + " (median " + f["p50"].dump() + ")";
}

// images and compression, with the ratio of raw pixels to file bytes; for stored JPEGs the
// codec, quality and the stored sizes and bytes (report.json's stats).
void PrintImages(const mm::reader::internal::IndexDocument& index, const Result<json>& report,
                 std::ostream& out) {
  const mm::reader::SetInfo& info = index.info;
  const int64_t height = info.image_height, width = info.image_width;
  const bool keep_ratio = info.max_size > 0;
  if (keep_ratio) {
    out << "images:       own aspect ratio, " << ResizeModeText(index) << " "
        << (info.resize_mode == format::ResizeMode::kKeepRatio ? "shorter" : "longer")
        << " side <= " << info.max_size << " px (loader default output " << width << "x" << height
        << "), background " << Known(index.background) << "\n";
  } else {
    out << "images:       " << width << "x" << height << "x" << info.channels << " uint8, resize "
        << Known(ResizeModeText(index)) << ", background " << Known(index.background) << "\n";
  }
  if (info.image_codec == format::ImageCodec::kJpeg) {
    const json stats = report.ok() ? report->value("stats", json::object()) : json::object();
    const int64_t samples = Or0(index.totals.samples);
    out << "codec:        jpeg quality " << info.jpeg_quality << ", " << format::kJpegSubsampling
        << ", decoded and cropped by the loader (format 2)\n";
    out << "stored size:  width " << Spread(stats, "stored_width") << ", height "
        << Spread(stats, "stored_height") << " px\n";
    out << "stored bytes: " << Spread(stats, "stored_bytes") << " a JPEG; "
        << HumanBytes(Ratio(static_cast<double>(Or0(index.totals.bytes)), samples))
        << " a sample with its tables\n";
    return;
  }
  out << "codec:        raw pixels (format 1)\n";
  out << "compression:  " << format::ToString(info.compression);
  if (info.compression == format::Codec::kZstd) {
    out << " level " << info.compression_level << " (HDF5 filter "
        << (index.hdf5_filter_id >= 0 ? index.hdf5_filter_id : format::kZstdFilterId) << ")";
  }
  const int64_t bytes = Or0(index.totals.bytes);
  const double raw =
      static_cast<double>(Or0(index.totals.samples)) * static_cast<double>(height * width * 3);
  if (bytes > 0 && raw > 0) out << ", raw pixels / file bytes " << Ratio(raw, bytes);
  out << "\n";
}

void PrintTokenizer(const mm::reader::internal::IndexDocument& index, std::ostream& out) {
  const mm::reader::SetInfo& info = index.info;
  const std::string& sha = info.tokenizer_sha256;
  if (!info.has_tokenizer) {
    out << "tokenizer:    none (--tokenizer none: captions stored as text only, no token ids)\n";
  } else {
    out << "tokenizer:    " << Known(index.tokenizer_file) << " ("
        << mm::format::ToString(index.tokenizer_kind) << ", sha256 "
        << sha.substr(0, std::min<size_t>(sha.size(), 16)) << (sha.size() > 16 ? "..." : "")
        << (index.tokenizer_trained ? ", trained on the captions" : ", pretrained") << "), vocab "
        << info.vocab_size << ", pad " << info.pad_id << ", unk " << info.unk_id << ", bos "
        << info.bos_id << ", eos " << info.eos_id << ", max tokens " << info.max_tokens << "\n";
  }
  out << "text:         " << (info.text_lowercase ? "lowercased" : "case kept") << ", normalize "
      << info.text_normalize << " (before tokenizing; captions stored as given)\n";
  if (!info.metadata_fields.empty()) {
    out << "kept fields: ";
    for (size_t f = 0; f < info.metadata_fields.size(); ++f) {
      out << (f ? ", " : " ") << info.metadata_fields[f];
    }
    out << " (metadata/<name> in each shard)\n";
  }
  if (info.unk_rate >= 0) {
    out << "unk rate:     " << std::setprecision(2) << 100 * info.unk_rate << "% of token ids"
        << (info.unk_rate > 0.01 ? " (high: does the tokenizer expect lowercased text?)" : "")
        << "\n";
  }
}

// Samples dropped by reason: the index's counts, or report.json's when the index has none.
std::map<std::string, int64_t> DropsByReason(const mm::reader::internal::IndexDocument& index,
                                             const Result<json>& report) {
  std::map<std::string, int64_t> by_reason = index.dropped_by_reason;
  if (by_reason.empty() && report.ok()) {
    const json reported = report->value("dropped_by_reason", json::object());
    if (reported.is_object()) {
      for (const auto& [reason, count] : reported.items()) {
        if (count.is_number_integer()) by_reason[reason] = count.get<int64_t>();
      }
    }
  }
  return by_reason;
}

// dropped (DropsByReason) and truncated captions (report.json).
void PrintDrops(const mm::reader::internal::IndexDocument& index, const Result<json>& report,
                std::ostream& out) {
  const std::map<std::string, int64_t> by_reason = DropsByReason(index, report);
  int64_t dropped_total = Or0(index.dropped_total);
  if (dropped_total == 0) {
    for (const auto& [reason, count] : by_reason) dropped_total += count;
  }
  out << "dropped:      " << dropped_total;
  if (!by_reason.empty()) {
    out << " (";
    bool first = true;
    for (const auto& [reason, count] : by_reason) {
      out << (first ? "" : ", ") << reason << " " << count;
      first = false;
    }
    out << ")";
  }
  out << "\n";
  if (report.ok() && report->contains("truncated_captions")) {
    const json& truncated = (*report)["truncated_captions"];
    out << "truncated:    " << (truncated.is_number_integer() ? truncated.get<int64_t>() : 0)
        << " captions cut to max tokens (report.json)\n";
  }
}

// --json: the figures above as one object (README "JSON output").
nlohmann::ordered_json InfoJson(const std::string& set, bool remote,
                                const mm::reader::internal::IndexDocument& index,
                                const Result<json>& report) {
  using ojson = nlohmann::ordered_json;
  const mm::reader::SetInfo& info = index.info;
  const int64_t samples = Or0(index.totals.samples), bytes = Or0(index.totals.bytes);
  ojson j;
  j["set"] = set;
  j["remote"] = remote;
  j["format_version"] = info.format_version;
  j["created_by"] = index.created_by;
  j["samples"] = samples;
  j["shards"] = Or0(index.totals.shards);
  j["captions"] = Or0(index.totals.captions);
  j["tokens"] = Or0(index.totals.tokens);
  j["bytes"] = bytes;
  j["bytes_per_sample"] = Ratio(static_cast<double>(bytes), static_cast<double>(samples));
  const bool zstd = info.compression == format::Codec::kZstd;
  const bool jpeg = info.image_codec == format::ImageCodec::kJpeg;
  j["image"] = {{"width", info.image_width},
                {"height", info.image_height},
                {"channels", info.channels},
                {"resize_mode", ResizeModeText(index)},
                {"max_size", info.max_size},
                {"background", index.background},
                {"codec", std::string(format::ToString(info.image_codec))},
                {"jpeg_quality", jpeg ? ojson(info.jpeg_quality) : ojson()},
                {"compression", std::string(format::ToString(info.compression))},
                {"compression_level", zstd ? ojson(info.compression_level) : ojson()}};
  if (info.has_tokenizer) {
    j["tokenizer"] = {{"file", index.tokenizer_file.empty() ? std::string(format::kTokenizerFile)
                                                            : index.tokenizer_file},
                      {"kind", mm::format::ToString(index.tokenizer_kind)},
                      {"sha256", info.tokenizer_sha256},
                      {"trained", index.tokenizer_trained},
                      {"vocab_size", info.vocab_size},
                      {"pad_id", info.pad_id},
                      {"unk_id", info.unk_id},
                      {"bos_id", info.bos_id},
                      {"eos_id", info.eos_id},
                      {"max_tokens", info.max_tokens}};
  } else {
    j["tokenizer"] = nullptr;
  }
  j["text"] = {{"lowercase", info.text_lowercase}, {"normalize", info.text_normalize}};
  j["metadata_fields"] = info.metadata_fields;
  j["unk_rate"] = info.unk_rate >= 0 ? ojson(info.unk_rate) : ojson();
  const std::map<std::string, int64_t> by_reason = DropsByReason(index, report);
  int64_t dropped_total = Or0(index.dropped_total);
  if (dropped_total == 0) {
    for (const auto& [reason, count] : by_reason) dropped_total += count;
  }
  j["dropped_total"] = dropped_total;
  j["dropped_by_reason"] = by_reason;
  const bool truncated = report.ok() && report->contains("truncated_captions") &&
                         (*report)["truncated_captions"].is_number_integer();
  j["truncated_captions"] =
      truncated ? ojson((*report)["truncated_captions"].get<int64_t>()) : ojson();
  return j;
}

}  // namespace

Status RunInfo(const std::string& dir, std::ostream& out, const mm::reader::RemoteOptions& remote,
               const ReportOptions& report_options) {
  MM_ASSIGN_OR_RETURN(auto files, OpenSetFiles(dir, remote));
  const int64_t received_before = mm::reader::internal::RemoteBytesReceived();
  ProgressOptions progress = report_options.progress;
  progress.enabled = progress.enabled && files->remote();
  TransferProgress bar(
      "info",
      [received_before] { return mm::reader::internal::RemoteBytesReceived() - received_before; },
      0, progress);
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadSetIndex(*files));
  const Result<json> report = ReadJsonFile(*files, std::string(format::kReportFile));
  bar.Finish();
  const std::string set =
      files->remote() ? dir : fs::absolute(fs::path(dir)).lexically_normal().string();
  if (report_options.json) {
    out << InfoJson(set, files->remote(), index, report).dump(2) << "\n";
    return Status::OK();
  }
  out << std::fixed << std::setprecision(2);
  out << "set:          " << set << "\n";
  out << "format:       " << format::kFormatName << " v" << index.info.format_version << " ("
      << Known(index.created_by) << ")\n";
  PrintCounts(index, out);
  PrintImages(index, report, out);
  PrintTokenizer(index, out);
  PrintDrops(index, report, out);
  return Status::OK();
}

}  // namespace mm::pack
