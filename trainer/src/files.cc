#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "mm/internal/file.h"

namespace mm::train {

namespace {

std::runtime_error ErrnoError(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
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

std::string ReadWholeFile(const std::string& path, int64_t max_bytes, const std::string& what) {
  std::string bytes;
  const Status st = ReadRegularFile(path, &bytes, max_bytes);
  if (!st.ok()) throw std::runtime_error(what + ": " + st.message());
  return bytes;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    {
      UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!fd.valid()) throw ErrnoError("cannot create", tmp);
      WriteAll(fd.get(), bytes, tmp);
      // After a successful fsync the bytes are on disk; close (in UniqueFd) loses nothing.
      if (::fsync(fd.get()) != 0) throw ErrnoError("cannot fsync", tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw ErrnoError("cannot rename " + tmp + " to", path);
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  UniqueFd dir(::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) ::fsync(dir.get());
}

FilePtr OpenRegularForAppend(const std::string& path) {
  // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of waiting for one.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644));
  struct stat st;
  const bool opened = fd.valid();
  const int err = errno;
  if ((opened ? ::fstat(fd.get(), &st) : ::stat(path.c_str(), &st)) == 0 && !S_ISREG(st.st_mode)) {
    throw std::runtime_error(path + " is not a regular file (FIFO, device or socket)");
  }
  errno = err;
  if (!opened) throw ErrnoError("cannot open", path);
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  const int dup = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);  // the FILE's own descriptor
  FilePtr f(dup >= 0 ? ::fdopen(dup, "a") : nullptr);
  if (!f) {
    if (dup >= 0) ::close(dup);
    throw ErrnoError("cannot open", path);
  }
  return f;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace mm::train
