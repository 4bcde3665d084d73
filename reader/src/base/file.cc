// file.cc: see mm/internal/file.h.
#include "mm/internal/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mm {

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound(std::move(message));
  return Status::IOError(std::move(message));
}

void FdTraits::Close(int fd) { ::close(fd); }

Status WriteAll(int fd, const void* data, size_t size, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, what);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

namespace {

// `bytes` into `tmp_path`, fsynced; the rename is the caller's.
Status WriteSynced(const std::string& tmp_path, const std::string& bytes) {
  const std::string what = "cannot write " + tmp_path;
  UniqueFd fd(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, what);
  MM_RETURN_NOT_OK(WriteAll(fd.get(), bytes.data(), bytes.size(), what));
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync " + tmp_path);
  if (::close(fd.Release()) != 0) return ErrnoStatus(errno, what);
  return Status::OK();
}

std::string DirName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

Status WriteFileDurably(const std::string& path, const std::string& bytes,
                        const std::string& tmp_suffix) {
  const std::string tmp_path = path + tmp_suffix;
  Status st = WriteSynced(tmp_path, bytes);
  if (st.ok() && ::rename(tmp_path.c_str(), path.c_str()) != 0) {
    st = ErrnoStatus(errno, "rename " + tmp_path + " -> " + path);
  }
  if (!st.ok()) {
    ::unlink(tmp_path.c_str());
    return st;
  }
  UniqueFd dir(::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) ::fsync(dir.get());  // the rename made durable, where the folder allows
  return Status::OK();
}

Result<UniqueFd> OpenUnnamedFile(const std::string& dir, const std::string& name_prefix,
                                 const std::string& what) {
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd.valid()) return fd;
  std::string name = dir + "/" + name_prefix + "XXXXXX";
  fd = UniqueFd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, what);
  ::unlink(name.c_str());
  return fd;
}

Result<RegularFile> OpenRegularFile(const std::string& path) {
  RegularFile file;
  file.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!file.fd.valid()) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return Status::NotFound("no such file: " + path);
    return ErrnoStatus(err, "cannot open " + path);
  }
  struct stat st;
  if (::fstat(file.fd.get(), &st) != 0) return ErrnoStatus(errno, "cannot stat " + path);
  if (S_ISDIR(st.st_mode)) return ErrnoStatus(EISDIR, "cannot read " + path);
  if (!S_ISREG(st.st_mode)) {
    return Status::IOError("cannot read " + path + ": not a regular file (FIFO, device or socket)");
  }
  file.size = static_cast<int64_t>(st.st_size);
  return file;
}

Status ReadRegularFile(const std::string& path, std::string* bytes, int64_t max_bytes) {
  bytes->clear();
  MM_ASSIGN_OR_RETURN(RegularFile file, OpenRegularFile(path));
  auto too_large = [&](int64_t size) {
    return Status::OutOfRange(path + " is " + std::to_string(size) + " bytes, over the " +
                              std::to_string(max_bytes) + " bytes read of one file");
  };
  if (max_bytes >= 0 && file.size > max_bytes) return too_large(file.size);
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(file.fd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus(errno, "cannot read " + path);
    if (got == 0) break;
    bytes->append(buf, static_cast<size_t>(got));
    if (max_bytes >= 0 && static_cast<int64_t>(bytes->size()) > max_bytes) {
      const int64_t seen = static_cast<int64_t>(bytes->size());
      std::string().swap(*bytes);
      return too_large(seen);  // it grew while being read
    }
  }
  return Status::OK();
}

}  // namespace mm
