#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace mm::train {

namespace {

std::runtime_error ErrnoError(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

/// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

/// Opens without blocking (a FIFO with no writer would block a plain open) and refuses
/// anything but a regular file; returns the descriptor in blocking mode. `what` names the
/// file's role in messages.
Fd OpenRegular(const std::string& path, int flags, mode_t mode, struct stat* st,
               const std::string& what) {
  const std::string name = what.empty() ? path : what + " " + path;
  Fd fd(::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC, mode));
  if (fd.get() < 0) {
    // A FIFO without a reader fails a non-blocking write-open with ENXIO: say what it is.
    const int err = errno;
    if (::stat(path.c_str(), st) == 0 && !S_ISREG(st->st_mode)) {
      throw std::runtime_error(name + " is not a regular file");
    }
    errno = err;
    throw ErrnoError("cannot open", name);
  }
  if (::fstat(fd.get(), st) != 0) throw ErrnoError("cannot stat", name);
  if (!S_ISREG(st->st_mode)) throw std::runtime_error(name + " is not a regular file");
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw ErrnoError("cannot write", path);
    done += static_cast<size_t>(n);
  }
}

std::string DirName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

std::string ReadRegularFile(const std::string& path, uint64_t max_bytes, const std::string& what) {
  struct stat st;
  Fd fd = OpenRegular(path, O_RDONLY, 0, &st, what);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw std::runtime_error(what + " " + path + " is " + std::to_string(size) +
                             " bytes, more than the " + std::to_string(max_bytes) +
                             " this reader accepts");
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd.get(), bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ErrnoError("cannot read " + what, path);
    if (n == 0) throw std::runtime_error(what + " " + path + " shrank while being read");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw ErrnoError("cannot create", tmp);
    WriteAll(fd.get(), bytes, tmp);
    if (::fsync(fd.get()) != 0) throw ErrnoError("cannot fsync", tmp);
    if (::close(fd.release()) != 0) throw ErrnoError("cannot close", tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw ErrnoError("cannot rename " + tmp + " to", path);
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  Fd dir(::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

FilePtr OpenRegularForAppend(const std::string& path) {
  struct stat st;
  Fd fd = OpenRegular(path, O_WRONLY | O_APPEND | O_CREAT, 0644, &st, "");
  FilePtr f(::fdopen(fd.get(), "a"));
  if (!f) throw ErrnoError("cannot open", path);
  fd.release();
  return f;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace mm::train
