// mm/internal/byte_size.h: byte sizes as users type them on a command line ("1GiB", "256MB",
// "500M", "4096"), the one parser behind `mmpack build --shard-size`, `--cache-limit` of
// `mmpack` and `mmtrain`.
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/base/byte_size.cc). Thread-safe: a pure function.
#pragma once

#include <cstdint>
#include <string_view>

#include "mm/status.h"

namespace mm {

/// Parses a positive byte size: a decimal number (a fraction allowed) and an optional unit,
/// case-insensitive. Binary units are powers of 1024 (K, KiB, M, MiB, G, GiB, T, TiB, as
/// coreutils' `--block-size=K`), decimal ones powers of 1000 (KB, MB, GB, TB, as IEC 80000-13);
/// B or none: bytes. The result is rounded down to whole bytes.
/// Errors: InvalidArgument when `text` is not of that form, is not positive, or exceeds
/// INT64_MAX bytes.
Result<int64_t> ParseByteSize(std::string_view text);

}  // namespace mm
