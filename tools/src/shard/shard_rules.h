// shard_rules.h: the reader's rules (mm/internal/set_rules.h: CheckTableType,
// CheckTokenTables) applied by `mmpack verify` to one shard read through HDF5, so that what
// verify accepts the reader and mmtrain accept: native little-endian table
// dtypes, offsets, no caption over max_tokens, every token id in [0, vocab_size).
// HDF5 from one thread at a time; run inside the bounded child (bounded_verify.h).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

#include "mm/reader.h"
#include "mm/status.h"

namespace mm::pack {

/// Checks shard `file` (named `name` in messages; `samples`, `captions`, `tokens`: index.json's
/// N, C, T for it) against the set rules of `info`. Errors: Corruption naming the shard, sample
/// and caption ("shard-000000.h5 sample 3 caption 0: token id 30007 at position 2 outside the
/// vocabulary [0, 30000)", "shard-000000.h5: dataset 'tokens' is not int32 little-endian").
[[nodiscard]] Status CheckShardRules(hid_t file, const std::string& name, int64_t samples,
                                     int64_t captions, int64_t tokens,
                                     const mm::reader::SetInfo& info);

}  // namespace mm::pack
