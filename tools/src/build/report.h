// report.h: what `mmpack build` reports: OUT/report.json (schemas/FORMAT.md,
// "report.json") and its lines on stderr (commands/build.cc).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "build/options.h"
#include "curate/stats.h"
#include "mm/reader.h"

namespace mm::pack {

/// A sample that is not in the set, and why (report.json "dropped").
struct DropEntry {
  std::string source;
  std::string key;
  std::string reason;  // FORMAT.md lists the reasons
  std::string detail;
};

/// A caption that is not in the set, of a kept or a dropped sample (report.json
/// "dropped_captions").
struct DroppedCaption {
  std::string source;
  std::string key;
  int64_t caption_index;  // position in the input's captions of that sample
  std::string reason;
};

/// The outcome of one build, filled stage by stage. `dropped` is in report order: the input's
/// issues, samples without a usable caption, then the images the pipeline dropped.
struct BuildReport {
  std::vector<DropEntry> dropped;
  std::vector<DroppedCaption> dropped_captions;
  int64_t written = 0;           // samples in the shards
  int64_t written_captions = 0;  // their captions
  int64_t truncated = 0;         // captions cut to --max-tokens
  SetStats stats;                // of the written samples (report.json "stats")

  /// Samples dropped, by reason (sorted by reason).
  std::map<std::string, int64_t> ByReason() const;
  /// "corrupt_image 2, empty_caption 1": ByReason as one line.
  std::string ReasonsText() const;
};

/// The text of report.json: input, input_format, samples seen and written, every drop and its
/// counts by reason, dropped captions and theirs, truncated captions. Indented by 2,
/// newline-terminated; invalid UTF-8 in strings becomes U+FFFD.
std::string ReportJson(const BuildOptions& o, InputFormat format, const BuildReport& report);

/// The end of a build on stderr: counts by reason and dropped captions (unless --quiet), then
/// the one-line summary (written, captions, shards, bytes, dropped, seconds, samples/s).
void PrintSummary(const BuildOptions& o, const BuildReport& report,
                  const std::vector<mm::reader::ShardEntry>& shards, double seconds);

}  // namespace mm::pack
