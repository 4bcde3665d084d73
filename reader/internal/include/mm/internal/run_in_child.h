// mm/internal/run_in_child.h: the one way to run a parse of untrusted bytes in a short-lived
// forked child with a deadline, and to bring its answer back through a pipe. The reader's
// isolated HDF5 query (reader/src/shard/isolated_query.cc) and tools' bounded queries
// (tools/src/shard/bounded_query.cc) are thin callers: each encodes its own answer, sets its
// own limits in the child, and words its own errors from the ChildRun.
//
// The child runs the body, writes what it returned and leaves with _exit (no atexit handlers:
// libhdf5's would flush the parent's files twice). A child that crashes, is killed by a limit
// or does not reach EOF before the deadline is the caller's answer, not the caller's crash.
//
// Thread safety: fork() copies only the calling thread; a lock another thread held stays held
// in the child, which then never answers and is killed at the deadline. `fork_lock` (held across
// the fork) keeps the callers' own threads out of the library the child uses.
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/base/run_in_child.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "mm/status.h"

namespace mm {

/// How one child ended, as the parent saw it.
struct ChildRun {
  std::string answer;      // the bytes the child wrote before its end (or the deadline)
  bool timed_out = false;  // no EOF within the deadline: the child was killed (SIGKILL)
  int read_error = 0;      // errno of a failed poll or read (the child was killed)
  int wait_status = 0;     // waitpid(2)'s status of the reaped child
};

/// The exit status of a child whose answer could not be written to the pipe.
constexpr int kChildWriteFailed = 3;

/// Forks a child that runs `body`, writes the bytes it returned to a pipe and _exits (0, or
/// kChildWriteFailed); `body` must not return otherwise (it may _exit itself). The parent reads
/// the pipe until EOF or `timeout_ms` milliseconds, kills the child when no EOF came or reading
/// failed, and reaps it. `fork_lock`: held across fork() (nullptr: none). `what` names the
/// query in messages. Errors: IOError ("WHAT: pipe: <strerror>", "WHAT: fork: <strerror>").
[[nodiscard]] Result<ChildRun> RunInChild(const std::string& what, int64_t timeout_ms,
                                          std::mutex* fork_lock,
                                          const std::function<std::string()>& body);

}  // namespace mm
