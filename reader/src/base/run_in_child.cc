// run_in_child.cc: see mm/internal/run_in_child.h.
#include "mm/internal/run_in_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "mm/internal/file.h"

namespace mm {
namespace {

// The child's side: the body, its answer on `fd`, _exit.
[[noreturn]] void AnswerInChild(int fd, const std::function<std::string()>& body) {
  const std::string answer = body();
  const char* p = answer.data();
  size_t left = answer.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(kChildWriteFailed);
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::_exit(0);
}

// Reads `fd` into run->answer until EOF or `timeout_ms`; sets timed_out or read_error.
void ReadUntilEof(int fd, int64_t timeout_ms, ChildRun* run) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      run->timed_out = true;
      return;
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      run->read_error = errno;
      return;
    }
    if (ready == 0) continue;  // the loop re-checks the deadline
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      run->read_error = errno;
      return;
    }
    if (n == 0) return;  // EOF: the child wrote everything and exited (or died)
    run->answer.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

Result<ChildRun> RunInChild(const std::string& what, int64_t timeout_ms, std::mutex* fork_lock,
                            const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, what + ": pipe");
  pid_t pid;
  if (fork_lock != nullptr) {
    std::lock_guard<std::mutex> lock(*fork_lock);
    pid = ::fork();
  } else {
    pid = ::fork();
  }
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoStatus(err, what + ": fork");
  }
  if (pid == 0) {
    ::close(fds[0]);
    AnswerInChild(fds[1], body);
  }
  ::close(fds[1]);
  ChildRun run;
  ReadUntilEof(fds[0], timeout_ms, &run);
  ::close(fds[0]);
  if (run.timed_out || run.read_error != 0) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &run.wait_status, 0) < 0 && errno == EINTR) {
  }
  return run;
}

}  // namespace mm
