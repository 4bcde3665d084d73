// caption_text.h: a sample's caption text, for `mmpack show` and `mmpack preview`. Version 1
// shards hold captions as variable-length HDF5 strings, read here through HDF5 (the reader
// itself never needs their text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "mm/status.h"

namespace mm::pack {

/// Where global sample `i`'s captions lie: shard index in info().shards, first caption row
/// in that shard's `captions` dataset, and how many. Errors: OutOfRange (no sample i).
struct CaptionRange {
  size_t shard = 0;
  int64_t sample = 0;  // the sample's row in that shard
  int64_t first = 0;
  int count = 0;
};
[[nodiscard]] Result<CaptionRange> LocateCaptions(const mm::reader::ShardSet& set, int64_t i);

/// Captions [first, first + count) of the shard file `path`, read through HDF5 in a bounded
/// child process (shard/bounded_query.h: libhdf5 can loop for ever on a damaged global heap),
/// after refusing a `captions` dataset stored outside the file
/// (shard/self_contained.h). Errors: IOError / Corruption naming the file.
[[nodiscard]] Result<std::vector<std::string>> ReadShardCaptions(const std::string& path,
                                                                 int64_t first, int count);

/// One sample's text in a shard: its captions and its kept manifest fields (`--keep-fields`).
struct ShardSampleText {
  std::vector<std::string> captions;  // UTF-8, stored order
  std::vector<std::string> metadata;  // one per field: an int64 in decimal, a float64 as its
                                      // shortest round-trip text ("nan": missing), a string as
                                      // stored
};

/// Captions [first, first + count) and row `sample` of each kept field in `fields` (datasets
/// metadata/<name>) of the shard file `path`, read like ReadShardCaptions but in ONE bounded
/// child, so that a damaged heap costs one CPU budget, not one per dataset. Errors: as
/// ReadShardCaptions; Corruption for a column that is not [N] int64, float64 or UTF-8 strings.
[[nodiscard]] Result<ShardSampleText> ReadShardSampleText(const std::string& path, int64_t first,
                                                          int count, int64_t sample,
                                                          const std::vector<std::string>& fields);

/// The captions of global sample `i` of `set`, as UTF-8 strings in stored order.
/// Read with ReadShardCaptions from the set's own folder (a local set).
/// Errors: OutOfRange (no sample i), IOError / Corruption (naming the shard).
[[nodiscard]] Result<std::vector<std::string>> ReadSampleCaptions(const mm::reader::ShardSet& set,
                                                                  int64_t i);

}  // namespace mm::pack
