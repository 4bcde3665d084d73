// sample_source.h: where a build's samples come from when they are not RAW's files on disk: a
// program that hands them over one by one (mmpack.Writer through the feed, feed_source.h). The
// build after the samples (drops, tokenizer, pipeline, shards, report, index) is the same.
#pragma once

#include <filesystem>

#include "ingest/ingest.h"
#include "mm/status.h"

namespace mm::pack {

/// The input of a build whose samples are given rather than read from RAW. Build::Run calls
/// Ingest once, after OUT is locked and its staging folder made, where it would read RAW. The
/// caller owns the source; it must outlive the build (its samples may name files it holds).
/// Not thread-safe.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  /// Every sample, in order, as IngestToList gives them (format, list spilled in `spill_dir`,
  /// issues), `fields` read as the manifests read them. Errors: the source's, one line.
  [[nodiscard]] virtual Result<IngestResult> Ingest(const FieldNames& fields,
                                                    const std::filesystem::path& spill_dir) = 0;
};

}  // namespace mm::pack
