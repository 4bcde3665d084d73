// cache_files.cc: see cache_files.h.
#include "remote/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

#include "mm/internal/checksum.h"

namespace mm::reader::internal::cache_files {
namespace {

constexpr char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};

// The names the cache gives its files in a set folder (cache.h). `*kind` tells which.
bool IsDigits(const std::string& s) {
  return !s.empty() && s.size() <= 20 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool ParseCacheName(const std::string& name, FileKind* kind) {
  if (name.size() < 18 || !IsHex16(name.substr(0, 16)) || name[16] != '.') return false;
  std::string shard = name.substr(17);
  if (EndsWith(shard, kLockSuffix)) {
    *kind = FileKind::kLock;
    shard.resize(shard.size() - std::strlen(kLockSuffix));
  } else if (const size_t part = shard.rfind(kPartMark); part != std::string::npos) {
    // <shard>.part.<pid>.<n>
    const std::string tail = shard.substr(part + std::strlen(kPartMark));
    const size_t dot = tail.find('.');
    if (dot == std::string::npos || !IsDigits(tail.substr(0, dot)) ||
        !IsDigits(tail.substr(dot + 1))) {
      return false;
    }
    *kind = FileKind::kTemporary;
    shard.resize(part);
  } else {
    *kind = FileKind::kShard;
  }
  return !shard.empty() && shard != "." && shard != ".." && shard.find('/') == std::string::npos;
}

// True when `dir` (sets/<name>) is a set folder the cache made: its location file's XXH3-64
// is its name (SetDir writes it before anything else goes there).
bool IsOwnSetFolder(int dir, const std::string& name) {
  UniqueFd fd(::openat(dir, kLocationFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > (1 << 16)) {
    return false;
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  if (::pread(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return false;
  }
  return Xxh3Hex(text.data(), text.size()) == name;
}

}  // namespace

// flock that resumes after a signal. Returns 0 or -1 with errno.
int Flock(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The names in a directory (not "." and ".."), read through its descriptor.
std::vector<std::string> ListDir(int dir) {
  std::vector<std::string> names;
  const int fd = ::dup(dir);
  if (fd < 0) return names;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return names;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool IsHex16(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) &&
                  !std::isupper(static_cast<unsigned char>(c));
         });
}

Result<DirFd> OpenDirNoFollow(int at, const std::string& name, const std::string& display) {
  UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return Status::IOError("cache: " + display +
                             " is not a folder (a symlink?): the cache never follows one; "
                             "remove it");
    }
    return ErrnoStatus(errno, "cache: cannot open " + display);
  }
  return std::make_shared<const UniqueFd>(std::move(fd));
}

// Every shard, temporary and lock file the cache wrote under DIR/sets (see cache.h): in the
// set folders it made (real folders, never a symlink, with their location file), regular
// files named as it names them. Nothing else is listed, so nothing else is ever removed.
std::vector<CacheEntry> Scan(const std::string& dir) {
  std::vector<CacheEntry> out;
  Result<DirFd> sets = OpenDirNoFollow(AT_FDCWD, dir + "/sets", dir + "/sets");
  if (!sets.ok()) return out;
  for (const std::string& set_name : ListDir(sets.value()->get())) {
    if (!IsHex16(set_name)) continue;
    Result<DirFd> set = OpenDirNoFollow(sets.value()->get(), set_name, set_name);
    if (!set.ok() || !IsOwnSetFolder(set.value()->get(), set_name)) continue;
    for (const std::string& name : ListDir(set.value()->get())) {
      CacheEntry e;
      struct stat st;
      if (!ParseCacheName(name, &e.kind) ||
          ::fstatat(set.value()->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(st.st_mode)) {
        continue;
      }
      e.dir = set.value();
      e.name = name;
      e.path = dir + "/sets/" + set_name + "/" + name;
      e.bytes = e.kind == FileKind::kLock ? 0 : static_cast<int64_t>(st.st_size);
      e.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      out.push_back(std::move(e));
    }
  }
  return out;
}

// Removes `e` if no process holds a lock on it (a pinned shard, a live download, a download
// lock held or waited for) and it is still the file that was listed: true when removed. A
// shard file must also start with HDF5's signature: a file of another kind was not written by
// the cache, whatever its name.
bool RemoveIfUnlocked(const CacheEntry& e) {
  const int dir = e.dir->get();
  UniqueFd fd(::openat(dir, e.name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() || Flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false;
  struct stat held, now;
  if (::fstat(fd.get(), &held) != 0 || !S_ISREG(held.st_mode) ||
      ::fstatat(dir, e.name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 || held.st_ino != now.st_ino ||
      held.st_dev != now.st_dev) {
    return false;  // replaced meanwhile: not the file we locked
  }
  if (e.kind == FileKind::kShard) {
    char head[sizeof kHdf5Signature];
    if (::pread(fd.get(), head, sizeof head, 0) != static_cast<ssize_t>(sizeof head) ||
        std::memcmp(head, kHdf5Signature, sizeof head) != 0) {
      return false;
    }
  }
  return ::unlinkat(dir, e.name.c_str(), 0) == 0;
}

// DIR/sets/<X> for the set at `location`, with its location file: a real folder of the
// cache (a symlink there is refused, never followed).
Result<std::string> SetDir(const std::string& dir, const std::string& location) {
  const std::string name = Xxh3Hex(location.data(), location.size());
  const std::string set_dir = dir + "/sets/" + name;
  MM_ASSIGN_OR_RETURN(DirFd sets, OpenDirNoFollow(AT_FDCWD, dir + "/sets", dir + "/sets"));
  if (::mkdirat(sets->get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, "cache: cannot create " + set_dir);
  }
  MM_ASSIGN_OR_RETURN(DirFd set, OpenDirNoFollow(sets->get(), name, set_dir));
  const std::string file = set_dir + "/" + kLocationFile;
  UniqueFd existing(
      ::openat(set->get(), kLocationFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (existing.valid()) {
    std::string stored(1 << 16, '\0');
    const ssize_t n = ::pread(existing.get(), stored.data(), stored.size(), 0);
    stored.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (stored == location) return set_dir;
    return Status::IOError("cache: " + set_dir + " belongs to " + stored + ", not " + location);
  }
  // Unique per call: two threads of one process may write it at once (the same name would
  // let one rename the other's file away, and the other's rename fail with ENOENT).
  static std::atomic<uint64_t> counter{0};
  const std::string temp = std::string(kLocationFile) + kPartMark + std::to_string(::getpid()) +
                           "." + std::to_string(counter++);
  UniqueFd fd(::openat(set->get(), temp.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid() ||
      ::write(fd.get(), location.data(), location.size()) !=
          static_cast<ssize_t>(location.size()) ||
      ::renameat(set->get(), temp.c_str(), set->get(), kLocationFile) != 0) {
    Status st = ErrnoStatus(errno, "cache: cannot write " + file);
    ::unlinkat(set->get(), temp.c_str(), 0);
    return st;
  }
  return set_dir;
}

}  // namespace mm::reader::internal::cache_files
