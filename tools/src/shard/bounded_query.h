// bounded_query.h: a parse of untrusted bytes (a shard's HDF5 metadata, its variable-length
// strings) run where it can neither hang nor crash the caller: in a short-lived forked child
// with a CPU-time limit (RLIMIT_CPU), an address-space limit (RLIMIT_AS) and a wall-clock
// deadline. libhdf5 1.10 spins for ever on some damaged global heaps and crashes on others;
// `mmpack verify` and `mmpack show` run every such parse through RunBounded, so a damaged shard
// is a Corruption that names it, never a hung or dead process.
//
// The child (mm/internal/run_in_child.h) answers a Status and a byte string the caller encodes;
// the caller must re-check what it decodes, as it would any input. The child leaves with
// _exit (no atexit handlers: libhdf5's would flush the parent's files twice).
//
// Thread safety: fork() copies only the calling thread; a lock another thread held (HDF5's
// library lock) stays held in the child, which then never answers and is killed at the
// deadline. Call it where no other thread of the process is inside HDF5 (mmpack's verify and
// show are single-threaded there).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mm/status.h"

namespace mm::pack {

/// The limits of one bounded query.
struct QueryBounds {
  double cpu_seconds = 60;                         // RLIMIT_CPU of the child (whole seconds, >= 1)
  double wall_seconds = 300;                       // the parent kills the child after this
  int64_t address_space_bytes = int64_t{8} << 30;  // RLIMIT_AS of the child; 0: no limit
};

/// The bounds for parsing a file of `file_bytes` bytes: 10 CPU-seconds plus 1 per MiB (healthy
/// small shards take milliseconds; a 1 GiB shard verified chunk by chunk about 20 s on this
/// machine), wall time four times that plus 30 s (the machine may be shared), 8 GiB of address
/// space. No address-space limit in a build with AddressSanitizer (its shadow memory reserves
/// terabytes).
QueryBounds BoundsForFile(int64_t file_bytes);

/// Runs `query` in a forked child under `bounds` and returns what it returned. `what` names the
/// file for messages. A std::bad_alloc (or other exception) in the child is an error of the
/// child, not a crash. Errors: what `query` returned; Corruption ("WHAT: reading it took more
/// than 61 s of CPU (stopped)", "WHAT: libhdf5 crashed (signal 11) reading it", "... ran out of
/// memory ...", "... did not answer within 300 s (stopped)"); IOError (pipe or fork refused).
[[nodiscard]] Result<std::string> RunBounded(const std::string& what, const QueryBounds& bounds,
                                             const std::function<Result<std::string>()>& query);

/// The little wire format of answers: length-prefixed strings and 64-bit integers appended to
/// `out`, read back with bounds checks (false: the answer is malformed).
void PutInt(int64_t value, std::string* out);
void PutString(const std::string& value, std::string* out);
[[nodiscard]] bool GetInt(const std::string& in, size_t* pos, int64_t* value);
[[nodiscard]] bool GetString(const std::string& in, size_t* pos, std::string* value);

}  // namespace mm::pack
