// select.h: the samples a build makes, from its input: the input's samples (ingest/ingest.h)
// and the checks that drop some of them before any image is read (captions, --min-score,
// --keep-fields, the keys an --append's OUT holds). Every drop becomes a report entry.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "build/append.h"
#include "build/options.h"
#include "build/report.h"
#include "build/sample_source.h"
#include "ingest/ingest.h"
#include "ingest/sample_list.h"
#include "mm/status.h"

namespace mm::pack {

/// The input's samples (IngestToList, spilling in `spill_dir`; or `source`'s when not null:
/// a build fed by a program); its notes go to stderr (unless quiet), its issues into `report`.
/// Errors: those of IngestToList or the source; InvalidArgument (a field option the input's
/// format has no fields for).
[[nodiscard]] Result<IngestResult> IngestInput(const BuildOptions& o,
                                               const std::filesystem::path& spill_dir,
                                               SampleSource* source, BuildReport* report);

/// The samples the build makes, in one pass over `in` into a new list beside it: the caption
/// checks, --min-score, --keep-fields and, with `base` (--append), the keys OUT holds. Their
/// drops reach `report` in that order of checks (all caption drops, then all score drops...).
/// A kept field that no sample has gets a note on stderr, as it is most likely misspelt.
/// Errors: IOError (the sample lists' files).
[[nodiscard]] Result<std::unique_ptr<SampleList>> FilterSamples(
    const BuildOptions& o, const std::optional<AppendBase>& base, const SampleList& in,
    BuildReport* report);

}  // namespace mm::pack
