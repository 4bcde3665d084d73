// mm/sample_text.h: the caption and source text of a shard set's samples.
//
// The fast path (ShardSet, Loader) never needs text: batches carry token ids. Text is for
// inspection (`mmpack.ShardSet(...)[i]` in Python, tools). Format version 1 stores captions and
// sources as HDF5 variable-length strings in HDF5's global heap, which cannot be read in place
// from the mapping, so SampleText reads them through HDF5:
//   - the first read from a shard opens it with H5Fopen (about a millisecond) and keeps it
//     open, at most `max_open_shards` shards at a time (the least recently used one is closed);
//   - each read is one H5Dread of the sample's caption_offsets pair and one of its strings,
//     tens of microseconds, inside libhdf5's global lock: reads from several threads (and h5py
//     in the same process) take turns.
// Use it per sample, not per batch in a training loop. Kept manifest fields (Metadata) are read
// the same way, from the shard's `metadata` group.
//
// This header includes no HDF5 header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mm/metadata.h"
#include "mm/reader.h"
#include "mm/status.h"

namespace mm::reader {

/// Reads captions and sources of `set`'s samples. Keeps `set` alive. Thread-safe (a mutex
/// guards the open shards; HDF5 serialises the reads).
class SampleText {
 public:
  explicit SampleText(std::shared_ptr<const ShardSet> set, int max_open_shards = 8);
  ~SampleText();
  SampleText(const SampleText&) = delete;
  SampleText& operator=(const SampleText&) = delete;

  /// The captions of global sample `i` (UTF-8, byte for byte as the input gave them), in
  /// stored order: caption c is the text of set.Tokens(i, c).
  /// Errors: OutOfRange (i outside [0, num_samples)), NotFound / IOError (the shard file),
  /// Corruption naming the shard and dataset (wrong type or shape, offsets that disagree with
  /// the ones the ShardSet mapped), Unsupported (a format version without HDF5 strings).
  Result<std::vector<std::string>> Captions(int64_t i) const;

  /// The image's path (or tar member) as the input gave it. Errors as Captions.
  Result<std::string> Source(int64_t i) const;

  /// The kept manifest fields of global sample `i` (`mmpack build --keep-fields`), one value
  /// per name of info().metadata_fields, in that order, as the shard stores them
  /// (schemas/FORMAT.md "Kept fields"): kInt from an int64 column, kFloat from a float64 one
  /// (a missing value is NaN), kString from a string one (a missing value is ""). Empty when
  /// the set keeps no field. Errors as Captions (Corruption: a column that is not [N] int64,
  /// float64 or UTF-8 strings).
  Result<std::vector<MetadataValue>> Metadata(int64_t i) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mm::reader
