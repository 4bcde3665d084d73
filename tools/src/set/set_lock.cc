// set_lock.cc: see set_lock.h.
#include "set/set_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// The pid the lock file names (the holder writes it), or "" when unreadable.
std::string HolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

SetLock::~SetLock() {
  if (fd_.valid() && !shared_) {
    ::unlink(path_.c_str());  // while still held: a waiter re-checks the inode (LockOutput)
  }
}

Result<SetLock> LockOutput(const fs::path& out, bool shared) {
  if (!out.has_relative_path()) {
    return Status::InvalidArgument("output '" + out.string() + "' is the root folder");
  }
  std::error_code ec;
  if (!out.parent_path().empty() && !fs::is_directory(out.parent_path(), ec)) {
    fs::create_directories(out.parent_path(), ec);
    if (ec) {
      return Status::IOError("cannot create output directory '" + out.string() +
                             "': " + ec.message());
    }
  }
  SetLock lock;
  lock.path_ = out.parent_path() / (out.filename().string() + ".mmpack-lock");
  for (int attempt = 0; attempt < 100; ++attempt) {
    UniqueFd fd(::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd.valid())
      return ErrnoStatus(errno, "cannot create the build lock " + lock.path_.string());
    if (::flock(fd.get(), (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return ErrnoStatus(errno, "cannot lock " + lock.path_.string());
      const std::string pid = HolderPid(fd.get());
      return Status::AlreadyExists("another mmpack build" +
                                   (pid.empty() ? std::string() : " (pid " + pid + ")") +
                                   " is writing '" + out.string() + "' (lock " +
                                   lock.path_.string() + "); wait for it or choose another OUT");
    }
    // The holder before us may have removed the file after we opened it: lock the one at the
    // path, not an unlinked one.
    struct stat held {
    }, named{};
    if (::fstat(fd.get(), &held) != 0 || ::stat(lock.path_.c_str(), &named) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
      continue;
    }
    lock.shared_ = shared;
    if (shared) {  // the file names the pid of the first holder; the others leave it
      lock.fd_ = std::move(fd);
      return lock;
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), pid.data(), pid.size(), 0) < 0) {
      // The pid is for messages only; the lock itself is held.
    }
    lock.fd_ = std::move(fd);
    return lock;
  }
  return Status::IOError("cannot take the build lock " + lock.path_.string() +
                         " (it keeps being replaced)");
}

}  // namespace mm::pack
