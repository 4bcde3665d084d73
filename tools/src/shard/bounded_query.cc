// bounded_query.cc: see bounded_query.h.
#include "shard/bounded_query.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <utility>

#include "mm/internal/file.h"
#include "mm/internal/run_in_child.h"

#if defined(__SANITIZE_ADDRESS__)
#define MM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MM_ASAN 1
#endif
#endif

namespace mm::pack {
namespace {

// The child's side: limits, then the query (exceptions become errors); returns the answer.
std::string AnswerInChild(const QueryBounds& bounds,
                          const std::function<Result<std::string>()>& query) {
  rlimit core{0, 0};
  ::setrlimit(RLIMIT_CORE, &core);  // a crash here is an answer, not a core file
  const rlim_t cpu = static_cast<rlim_t>(std::max(1.0, std::ceil(bounds.cpu_seconds)));
  rlimit cpu_limit{cpu, cpu + 1};  // SIGXCPU at the soft limit, SIGKILL a second later
  ::setrlimit(RLIMIT_CPU, &cpu_limit);
#ifndef MM_ASAN
  if (bounds.address_space_bytes > 0) {
    const rlim_t as = static_cast<rlim_t>(bounds.address_space_bytes);
    rlimit as_limit{as, as};
    ::setrlimit(RLIMIT_AS, &as_limit);
  }
#endif
  Status st;
  std::string payload;
  try {
    Result<std::string> r = query();
    if (r.ok()) {
      payload = std::move(r).value();
    } else {
      st = r.status();
    }
  } catch (const std::bad_alloc&) {
    st = Status::Corruption("ran out of memory (more than " +
                            std::to_string(bounds.address_space_bytes >> 20) + " MiB) reading it");
  } catch (const std::exception& e) {
    st = Status::Corruption(std::string("failed reading it: ") + e.what());
  }
  std::string wire;
  PutInt(static_cast<int64_t>(st.code()), &wire);
  PutString(st.message(), &wire);
  PutString(payload, &wire);
  return wire;
}

// How the child ended, as a Status (OK: it exited normally after answering).
Status ChildEnd(const std::string& what, const QueryBounds& bounds, int wstatus, bool timed_out) {
  if (timed_out) {
    return Status::Corruption(what + ": reading it did not finish within " +
                              std::to_string(static_cast<int64_t>(bounds.wall_seconds)) +
                              " s (stopped); the file is damaged or the machine overloaded");
  }
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    if (sig == SIGXCPU || sig == SIGKILL) {
      return Status::Corruption(
          what + ": reading it took more than " +
          std::to_string(static_cast<int64_t>(std::ceil(bounds.cpu_seconds))) +
          " s of CPU (stopped; libhdf5 loops on some damaged metadata)");
    }
    return Status::Corruption(what + ": libhdf5 crashed (signal " + std::to_string(sig) + ", " +
                              strsignal(sig) + ") reading it");
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
    return Status::Corruption(what + ": the reading process failed (exit status " +
                              std::to_string(WEXITSTATUS(wstatus)) + ")");
  }
  return Status::OK();
}

}  // namespace

QueryBounds BoundsForFile(int64_t file_bytes) {
  QueryBounds b;
  b.cpu_seconds = 10.0 + static_cast<double>(std::max<int64_t>(file_bytes, 0) >> 20);
  b.wall_seconds = 4 * b.cpu_seconds + 30;
  return b;
}

Result<std::string> RunBounded(const std::string& what, const QueryBounds& bounds,
                               const std::function<Result<std::string>()>& query) {
  const auto timeout_ms = static_cast<int64_t>(bounds.wall_seconds * 1000);
  MM_ASSIGN_OR_RETURN(ChildRun run, RunInChild(what, timeout_ms, /*fork_lock=*/nullptr,
                                               [&] { return AnswerInChild(bounds, query); }));
  if (run.read_error != 0) return ErrnoStatus(run.read_error, what + ": reading the answer");
  MM_RETURN_NOT_OK(ChildEnd(what, bounds, run.wait_status, run.timed_out));
  const std::string& wire = run.answer;
  size_t pos = 0;
  int64_t code = 0;
  std::string message, payload;
  if (!GetInt(wire, &pos, &code) || !GetString(wire, &pos, &message) ||
      !GetString(wire, &pos, &payload) || pos != wire.size() || code < 0 ||
      code > static_cast<int64_t>(StatusCode::kOutOfRange)) {
    return Status::Corruption(what + ": malformed answer from the reading process");
  }
  if (code != 0) return Status(static_cast<StatusCode>(code), message);
  return payload;
}

void PutInt(int64_t value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void PutString(const std::string& value, std::string* out) {
  PutInt(static_cast<int64_t>(value.size()), out);
  out->append(value);
}

bool GetInt(const std::string& in, size_t* pos, int64_t* value) {
  if (in.size() - *pos < sizeof(*value)) return false;
  std::memcpy(value, in.data() + *pos, sizeof(*value));
  *pos += sizeof(*value);
  return true;
}

bool GetString(const std::string& in, size_t* pos, std::string* value) {
  int64_t n = 0;
  if (!GetInt(in, pos, &n) || n < 0 || static_cast<uint64_t>(n) > in.size() - *pos) return false;
  value->assign(in, *pos, static_cast<size_t>(n));
  *pos += static_cast<size_t>(n);
  return true;
}

}  // namespace mm::pack
