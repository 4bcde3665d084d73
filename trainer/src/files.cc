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

}  // namespace

std::string ReadWholeFile(const std::string& path, int64_t max_bytes, const std::string& what) {
  std::string bytes;
  const Status st = ReadRegularFile(path, &bytes, max_bytes);
  if (!st.ok()) throw std::runtime_error(what + ": " + st.message());
  return bytes;
}

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const Status st = WriteFileDurably(path, bytes, ".tmp." + std::to_string(::getpid()));
  if (!st.ok()) throw std::runtime_error(st.message());
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
