// report_stream.h: reading a set's report.json (schemas/FORMAT.md "report.json") without
// holding it. A report lists every dropped sample and caption: a build that drops 1.6 M samples
// writes 256 MiB of it, and a parsed DOM costs 5-8 times the text. Its other
// members (counts, "stats", "appends") are small. So the report is read in streaming passes
// through nlohmann's SAX parser: one for the small members, one per list whose entries are
// handed out one at a time. Memory: the small members and one entry.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "mm/status.h"

namespace mm::pack {

/// The report's lists of per-sample entries, which the streaming reads leave out.
inline constexpr const char* kReportLists[] = {"dropped", "dropped_captions"};

/// Every top-level member of the report at `path` except the lists of kReportLists, each of
/// which, when present, is a null placeholder at its place (so the members keep their order).
/// One pass, memory of the members read. Errors: Corruption ("PATH is not a report: not JSON
/// at byte N (...)", or not an object), IOError.
[[nodiscard]] Result<nlohmann::ordered_json> ReadReportSummary(const std::filesystem::path& path);

/// Calls `fn` with each entry of the top-level list `list` (one of kReportLists) of the report
/// at `path`, in order; none when the member is absent or not an array. One pass, memory of one
/// entry. Errors: those of ReadReportSummary, and the first of `fn` (which stops the pass).
[[nodiscard]] Status ForEachReportEntry(const std::filesystem::path& path, const std::string& list,
                                        const std::function<Status(nlohmann::ordered_json&&)>& fn);

}  // namespace mm::pack
