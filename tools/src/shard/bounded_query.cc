// bounded_query.cc: see bounded_query.h.
#include "shard/bounded_query.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>

#include "mm/internal/file.h"

#if defined(__SANITIZE_ADDRESS__)
#define MM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MM_ASAN 1
#endif
#endif

namespace mm::pack {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitWriteFailed = 3;

// The child's side: limits, the query (exceptions become errors), the answer, _exit.
[[noreturn]] void AnswerInChild(int fd, const QueryBounds& bounds,
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
  const char* p = wire.data();
  size_t left = wire.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(kExitWriteFailed);
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::_exit(kExitOk);
}

// Reads `fd` until EOF or `wall_seconds`; false on timeout or a read error (errno in *err).
bool ReadAll(int fd, double wall_seconds, std::string* out, int* err) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(wall_seconds * 1000));
  char buf[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) {
      *err = errno;
      return false;
    }
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = errno;
      return false;
    }
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
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
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != kExitOk) {
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
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, what + ": pipe");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoStatus(err, what + ": fork");
  }
  if (pid == 0) {
    ::close(fds[0]);
    AnswerInChild(fds[1], bounds, query);
  }
  ::close(fds[1]);
  std::string wire;
  int err = 0;
  const bool finished = ReadAll(fds[0], bounds.wall_seconds, &wire, &err);
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (err != 0) return ErrnoStatus(err, what + ": reading the answer");
  MM_RETURN_NOT_OK(ChildEnd(what, bounds, wstatus, !finished));
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
