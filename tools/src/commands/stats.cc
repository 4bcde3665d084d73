// stats.cc: `mmpack stats OUT [--json]` (commands.h): what the build measured of the written
// samples (report.json "stats", curate/stats.h) and what it dropped, by reason. The report is
// read streaming: memory does not grow with its lists of drops.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "commands/commands.h"
#include "set/report_stream.h"
#include "set/set_index.h"
#include "mm/format.h"
#include "mm/internal/file.h"

namespace mm::pack {
namespace {

using ojson = nlohmann::ordered_json;

// One figure: its summary line and its histogram as bars.
void PrintFigure(const std::string& name, const ojson& f, std::ostream& out) {
  if (!f.is_object() || f.value("count", 0) == 0) {
    out << name << ": none\n";
    return;
  }
  out << name << ": min " << f["min"] << ", mean " << f["mean"] << ", p50 " << f["p50"] << ", p95 "
      << f["p95"] << ", max " << f["max"] << "\n";
  const double count = f["count"].get<double>();
  for (const ojson& bin : f["histogram"]) {
    const int64_t n = bin["count"].get<int64_t>();
    std::string range = bin["from"].dump() + (bin["to"].is_null() ? "+" : ".." + bin["to"].dump());
    out << "  " << std::setw(12) << range << " " << std::setw(8) << n << " "
        << std::string(static_cast<size_t>(40.0 * n / count + 0.5), '#') << "\n";
  }
}

}  // namespace

Status RunStats(const StatsOptions& o, std::ostream& out) {
  MM_ASSIGN_OR_RETURN(auto files, OpenSetFiles(o.dir, mm::reader::RemoteOptions{}));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadSetIndex(*files));
  const std::string report_path = o.dir + "/" + std::string(mm::format::kReportFile);
  // Streamed: the lists of drops, most of a large report, are never held (report_stream.h).
  MM_ASSIGN_OR_RETURN(ojson report, ReadReportSummary(report_path));
  if (!report.contains("stats") || !report["stats"].is_object()) {
    return Status::NotFound(report_path +
                            " has no \"stats\" (built by an mmpack before 0.x's stats); rebuild "
                            "the set to measure it");
  }
  ojson doc;
  doc["set"] = o.dir;
  doc["stats"] = report["stats"];
  doc["text"] = {{"lowercase", index.info.text_lowercase},
                 {"normalize", index.info.text_normalize}};
  doc["samples_seen"] = report.value("samples_seen", ojson());
  doc["dropped_by_reason"] = report.value("dropped_by_reason", ojson::object());
  doc["dropped_captions_by_reason"] = report.value("dropped_captions_by_reason", ojson::object());
  doc["truncated_captions"] = report.value("truncated_captions", ojson());
  if (o.json) {
    out << doc.dump(2) << "\n";
    return Status::OK();
  }
  const ojson& s = doc["stats"];
  out << "samples: " << s["samples"] << ", captions: " << s["captions"]
      << ", tokens: " << s["tokens"] << "\n";
  if (!index.info.has_tokenizer) {
    out << "unk rate: n/a (--tokenizer none: no token ids)\n";
  } else {
    out << std::fixed << std::setprecision(2) << "unk rate: " << 100 * s["unk_rate"].get<double>()
        << "% (" << s["unk_tokens"] << " <unk> ids; text "
        << (index.info.text_lowercase ? "lowercased" : "case kept") << ", normalize "
        << index.info.text_normalize << ")\n";
  }
  PrintFigure("caption tokens", s["caption_tokens"], out);
  PrintFigure("caption characters", s["caption_chars"], out);
  PrintFigure("captions per image", s["captions_per_image"], out);
  PrintFigure("source shorter side (px)", s["source_shorter_side"], out);
  PrintFigure("source aspect (long/short)", s["source_aspect"], out);
  out << "dropped samples:";
  if (doc["dropped_by_reason"].empty()) out << " none";
  for (const auto& [reason, n] : doc["dropped_by_reason"].items()) out << " " << reason << " " << n;
  out << "\ndropped captions:";
  if (doc["dropped_captions_by_reason"].empty()) out << " none";
  for (const auto& [reason, n] : doc["dropped_captions_by_reason"].items()) {
    out << " " << reason << " " << n;
  }
  out << "\n";
  return Status::OK();
}

}  // namespace mm::pack
