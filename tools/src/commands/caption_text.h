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

/// The captions of global sample `i` of `set`, as UTF-8 strings in stored order.
/// Errors: OutOfRange (no sample i), IOError / Corruption (HDF5's, naming the shard).
[[nodiscard]] Result<std::vector<std::string>> ReadSampleCaptions(const mm::reader::ShardSet& set,
                                                                  int64_t i);

}  // namespace mm::pack
