// cache.cc: see cache.h.
#include "remote/cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "mm/internal/c_handles.h"
#include "mm/internal/checksum.h"
#include "remote/cache_files.h"

namespace mm::reader::internal {

using cache_files::CacheEntry;
using cache_files::DirFd;
using cache_files::EndsWith;
using cache_files::FileKind;
using cache_files::Flock;
using cache_files::IsHex16;
using cache_files::kLockSuffix;
using cache_files::kPartMark;
using cache_files::kWaitingDir;
using cache_files::ListDir;
using cache_files::OpenDirNoFollow;
using cache_files::RemoveIfUnlocked;
using cache_files::Scan;
using cache_files::SetDir;

namespace {

// The pid in a waiter's name ("<ns>.<pid>.<n>").
int WaiterPid(const std::string& name) {
  const size_t a = name.find('.'), b = name.find('.', a + 1);
  if (a == std::string::npos || b == std::string::npos) return -1;
  return std::atoi(name.substr(a + 1, b - a - 1).c_str());
}

// Writes a download into the reserved temporary file and hashes it as it arrives.
class FileSink final : public DownloadSink {
 public:
  FileSink(int fd, int64_t expected, std::string display)
      : fd_(fd), expected_(expected), display_(std::move(display)), state_(XXH3_createState()) {}
  Status Begin() override {
    if (!state_) return Status::Internal("XXH3_createState failed");
    XXH3_64bits_reset(state_.get());
    written_ = 0;
    if (::lseek(fd_, 0, SEEK_SET) != 0) return ErrnoStatus(errno, "cache: rewind");
    return Status::OK();
  }
  Status Write(const char* data, size_t size) override {
    received_ += static_cast<int64_t>(size);
    if (written_ + static_cast<int64_t>(size) > expected_) {
      return Status::Corruption(display_ + ": the server sent more than index.json's " +
                                std::to_string(expected_) + " bytes");
    }
    XXH3_64bits_update(state_.get(), data, size);
    MM_RETURN_NOT_OK(WriteAll(fd_, data, size, "cache: writing " + display_));
    written_ += static_cast<int64_t>(size);
    return Status::OK();
  }
  int64_t written() const { return written_; }
  int64_t received() const { return received_; }
  std::string Hex() const { return Xxh3Hex64(XXH3_64bits_digest(state_.get())); }

 private:
  int fd_;
  int64_t expected_;
  std::string display_;
  Xxh3StatePtr state_;
  int64_t written_ = 0;
  int64_t received_ = 0;  // every try
};

void RaiseTo(std::atomic<int64_t>* peak, int64_t value) {
  int64_t seen = peak->load();
  while (value > seen && !peak->compare_exchange_weak(seen, value)) {
  }
}

// An exclusive flock on the download lock file `path`, created when missing. The file is
// removed by whoever holds it before letting go (Acquire) or by a reservation when no one
// holds it (its holder died): a lock taken on a file that is no longer at `path` is dropped
// and the one there now is taken instead, so two processes never hold "the" lock on two
// files at once.
Result<UniqueFd> LockDownload(const std::string& path) {
  for (;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoStatus(errno, "cache: cannot open " + path);
    if (Flock(fd.get(), LOCK_EX) != 0) return ErrnoStatus(errno, "cache: cannot lock " + path);
    struct stat held, now;
    if (::fstat(fd.get(), &held) != 0) return ErrnoStatus(errno, "cache: fstat " + path);
    if (::lstat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      return fd;
    }
  }
}

}  // namespace

CacheStats CacheCounters::Snapshot() const {
  CacheStats s;
  s.downloads = downloads.load();
  s.downloaded_bytes = downloaded_bytes.load();
  s.hits = hits.load();
  s.evictions = evictions.load();
  s.peak_bytes = peak_bytes.load();
  return s;
}

std::string CacheDir::DefaultDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/mmpack";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/mmpack";
}

Result<std::shared_ptr<CacheDir>> CacheDir::Get(const std::string& requested) {
  const std::string dir = requested.empty() ? DefaultDir() : requested;
  std::error_code ec;
  std::filesystem::create_directories(dir + "/sets", ec);
  if (!ec) std::filesystem::create_directories(dir + "/" + kWaitingDir, ec);
  if (ec) return Status::IOError("cache: cannot create " + dir + ": " + ec.message());
  const std::string canonical = std::filesystem::canonical(dir, ec).string();
  if (ec) return Status::IOError("cache: " + dir + ": " + ec.message());
  static std::mutex registry_mu;
  static std::map<std::string, std::weak_ptr<CacheDir>> registry;
  std::lock_guard<std::mutex> lock(registry_mu);
  if (auto found = registry[canonical].lock()) return found;
  std::shared_ptr<CacheDir> made(new CacheDir(canonical));
  registry[canonical] = made;
  return made;
}

Result<UniqueFd> CacheDir::LockDir() const {
  const std::string path = dir_ + "/.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, "cache: cannot open " + path);
  if (Flock(fd.get(), LOCK_EX) != 0) return ErrnoStatus(errno, "cache: cannot lock " + path);
  return fd;
}

void CacheDir::Released() {
  std::lock_guard<std::mutex> lock(mu_);
  released_.notify_all();
}

int CacheDir::AddYielder(std::function<void()> yield) {
  std::lock_guard<std::mutex> lock(yield_mu_);
  yielders_[next_yielder_] = std::move(yield);
  return next_yielder_++;
}

void CacheDir::RemoveYielder(int id) {
  std::lock_guard<std::mutex> lock(yield_mu_);
  yielders_.erase(id);
}

void CacheDir::YieldAll() {
  std::lock_guard<std::mutex> lock(yield_mu_);
  for (auto& [id, yield] : yielders_) yield();
}

Result<CacheDir::Waiter> CacheDir::StartWaiting() {
  const auto since = std::chrono::system_clock::now().time_since_epoch();
  char name[96];
  std::snprintf(name, sizeof name, "%020lld.%d.%llu",
                static_cast<long long>(std::chrono::nanoseconds(since).count()),
                static_cast<int>(::getpid()), static_cast<unsigned long long>(temp_counter_++));
  Waiter w;
  w.name = name;
  // Locked before it is visible (made under another name, then renamed): a waiter whose file
  // is unlocked is dead.
  const std::string waiting = dir_ + "/" + kWaitingDir + "/";
  const std::string temp = waiting + "." + w.name;
  w.fd = UniqueFd(::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!w.fd.valid()) return ErrnoStatus(errno, "cache: cannot create " + temp);
  Flock(w.fd.get(), LOCK_EX);
  if (::rename(temp.c_str(), (waiting + w.name).c_str()) != 0) {
    Status st = ErrnoStatus(errno, "cache: cannot rename " + temp);
    ::unlink(temp.c_str());
    return st;
  }
  return w;
}

void CacheDir::StopWaiting(Waiter* waiter) {
  if (!waiter->fd.valid()) return;
  ::unlink((dir_ + "/" + kWaitingDir + "/" + waiter->name).c_str());
  waiter->fd.Reset();
}

std::string CacheDir::OldestWaiter() const {
  Result<DirFd> waiting = OpenDirNoFollow(AT_FDCWD, dir_ + "/" + kWaitingDir, kWaitingDir);
  if (!waiting.ok()) return "";
  std::vector<std::string> names = ListDir(waiting.value()->get());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (name.empty() || name[0] == '.') continue;  // being made: locked once renamed
    UniqueFd fd(::openat(waiting.value()->get(), name.c_str(),
                         O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) continue;
    if (Flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {  // its waiter died: not waiting any more
      ::unlinkat(waiting.value()->get(), name.c_str(), 0);
      continue;
    }
    return name;
  }
  return "";
}

bool CacheDir::MustYield() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (now - must_yield_checked_ns_.load(std::memory_order_acquire) < 100'000'000) {
    return must_yield_.load(std::memory_order_acquire);
  }
  std::unique_lock<std::mutex> lock(must_yield_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return must_yield_.load(std::memory_order_acquire);  // being refreshed
  const std::string oldest = OldestWaiter();
  must_yield_.store(!oldest.empty() && WaiterPid(oldest) != static_cast<int>(::getpid()),
                    std::memory_order_release);
  must_yield_checked_ns_.store(now, std::memory_order_release);
  return must_yield_.load(std::memory_order_acquire);
}

// The cached file at `path`, pinned (shared lock, mtime set to now), or an empty CachedFile
// (invalid fd) when it is absent, being evicted, or not of index.json's size.
Result<CachedFile> CacheDir::TryOpenCached(const std::string& path, int64_t bytes) const {
  CachedFile file;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ELOOP) return file;  // absent, or a symlink: never read
    return ErrnoStatus(errno, "cache: cannot open " + path);
  }
  if (Flock(fd.get(), LOCK_SH) != 0) return ErrnoStatus(errno, "cache: cannot lock " + path);
  struct stat held, now;
  if (::fstat(fd.get(), &held) != 0) return ErrnoStatus(errno, "cache: fstat " + path);
  if (::lstat(path.c_str(), &now) != 0 || held.st_ino != now.st_ino || held.st_dev != now.st_dev ||
      !S_ISREG(held.st_mode) || static_cast<int64_t>(held.st_size) != bytes) {
    return file;  // evicted while we waited for the lock, or not what index.json describes
  }
  ::futimens(fd.get(), nullptr);  // least recently used: this use is the latest
  file.path = path;
  file.fd = std::move(fd);
  return file;
}

Result<CachedFile> CacheDir::Acquire(const std::string& set_location, const ShardEntry& entry,
                                     const std::string& display, const RemoteOptions& options,
                                     const ShardFetch& fetch, CacheCounters* counters) {
  if (!IsHex16(entry.xxh3_64)) {
    return Status::Corruption(display + ": index.json's xxh3_64 \"" + entry.xxh3_64 +
                              "\" is not 16 lowercase hex digits");
  }
  MM_ASSIGN_OR_RETURN(std::string set_dir, SetDir(dir_, set_location));
  const std::string path = set_dir + "/" + entry.xxh3_64 + "." + entry.file;
  MM_ASSIGN_OR_RETURN(CachedFile hit, TryOpenCached(path, entry.bytes));
  if (hit.fd.valid()) {
    ++counters->hits;
    return hit;
  }
  // One download of this shard at a time, over all processes sharing the directory. The lock
  // file lives while someone downloads or waits: its holder removes it before letting go.
  const std::string lock_path = path + kLockSuffix;
  MM_ASSIGN_OR_RETURN(UniqueFd lock, LockDownload(lock_path));
  Result<CachedFile> got = TryOpenCached(path, entry.bytes);  // another process fetched it?
  if (got.ok() && got->fd.valid()) {
    ++counters->hits;
  } else if (got.ok()) {
    got = Download(path, entry, display, options, fetch, counters);
  }
  ::unlink(lock_path.c_str());  // ours while we hold it: waiters then lock a new file
  return got;
}

Result<CachedFile> CacheDir::Download(const std::string& path, const ShardEntry& entry,
                                      const std::string& display, const RemoteOptions& options,
                                      const ShardFetch& fetch, CacheCounters* counters) {
  Status last;
  for (int attempt = 1; attempt <= 2; ++attempt) {  // a damaged transfer is fetched once more
    MM_ASSIGN_OR_RETURN(CachedFile temp, Reserve(path, entry.bytes, display, options, counters));
    FileSink sink(temp.fd.get(), entry.bytes, display);
    last = fetch(&sink);
    counters->downloaded_bytes += sink.received();
    if (last.ok() && sink.written() != entry.bytes) {
      last = Status::Corruption(display + ": received " + std::to_string(sink.written()) +
                                " bytes, index.json says " + std::to_string(entry.bytes));
    } else if (last.ok() && sink.Hex() != entry.xxh3_64) {
      last = Status::Corruption(display + ": downloaded bytes have XXH3-64 " + sink.Hex() +
                                ", index.json says " + entry.xxh3_64);
    }
    if (!last.ok()) {
      ::unlink(temp.path.c_str());
      if (last.IsCorruption()) continue;
      return last;
    }
    if (::fdatasync(temp.fd.get()) != 0) {
      Status st = ErrnoStatus(errno, "cache: fdatasync " + temp.path);
      ::unlink(temp.path.c_str());
      return st;
    }
    {
      MM_ASSIGN_OR_RETURN(UniqueFd dir_lock, LockDir());  // no eviction or reaping meanwhile
      if (::rename(temp.path.c_str(), path.c_str()) != 0) {
        Status st = ErrnoStatus(errno, "cache: rename to " + path);
        ::unlink(temp.path.c_str());
        return st;
      }
      Flock(temp.fd.get(), LOCK_SH);  // the download's exclusive lock becomes the pin
    }
    ++counters->downloads;
    temp.path = path;
    return temp;
  }
  return Status(last.code(), last.message() + " (downloaded twice)");
}

// Room for `bytes` more (see cache.h): a temporary file of that size beside `final_path`,
// created with an exclusive lock.
Result<CachedFile> CacheDir::Reserve(const std::string& final_path, int64_t bytes,
                                     const std::string& display, const RemoteOptions& options,
                                     CacheCounters* counters) {
  const int64_t limit = options.cache_limit;
  if (limit > 0 && bytes > limit) {
    return Status::IOError("cache " + dir_ + ": " + display + " is " + std::to_string(bytes) +
                           " bytes, over the cache limit of " + std::to_string(limit) + " bytes");
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(options.cache_wait_s);
  Waiter waiter;  // registered once this reservation has to wait (see cache.h)
  struct StopOnExit {
    CacheDir* cache;
    Waiter* waiter;
    ~StopOnExit() { cache->StopWaiting(waiter); }
  } stop_on_exit{this, &waiter};
  for (;;) {
    int64_t used = 0;
    // Served in the order waits began, over all processes: another process's older waiter
    // goes first (this one neither takes room meanwhile nor keeps idle pins).
    const std::string oldest = limit > 0 ? OldestWaiter() : std::string();
    const bool behind = !oldest.empty() && oldest != waiter.name &&
                        WaiterPid(oldest) != static_cast<int>(::getpid());
    {
      MM_ASSIGN_OR_RETURN(UniqueFd dir_lock, LockDir());
      std::vector<CacheEntry> entries = Scan(dir_);
      std::vector<CacheEntry> shards;
      for (CacheEntry& e : entries) {
        if (e.kind == FileKind::kLock) {
          RemoveIfUnlocked(e);  // a download lock no one holds or waits for: its owner died
          continue;
        }
        if (e.kind == FileKind::kTemporary && RemoveIfUnlocked(e)) continue;  // its owner died
        used += e.bytes;
        if (e.kind == FileKind::kShard) shards.push_back(std::move(e));
      }
      std::sort(shards.begin(), shards.end(),
                [](const CacheEntry& a, const CacheEntry& b) { return a.mtime_ns < b.mtime_ns; });
      for (size_t i = 0; limit > 0 && used + bytes > limit && i < shards.size(); ++i) {
        if (RemoveIfUnlocked(shards[i])) {
          used -= shards[i].bytes;
          ++counters->evictions;
        }
      }
      if (limit == 0 || (used + bytes <= limit && !behind)) {
        CachedFile temp;
        temp.path = final_path + kPartMark + std::to_string(::getpid()) + "." +
                    std::to_string(temp_counter_++);
        temp.fd = UniqueFd(::open(temp.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        if (!temp.fd.valid()) return ErrnoStatus(errno, "cache: cannot create " + temp.path);
        Flock(temp.fd.get(), LOCK_EX | LOCK_NB);  // new and unseen by others: always granted
        int rc = ::posix_fallocate(temp.fd.get(), 0, bytes);
        if (rc == EOPNOTSUPP || rc == ENOSYS || rc == EINVAL)
          rc = ::ftruncate(temp.fd.get(), bytes) ? errno : 0;
        if (rc != 0) {
          ::unlink(temp.path.c_str());
          return ErrnoStatus(rc, "cache: cannot reserve " + std::to_string(bytes) + " bytes for " +
                                     display + " in " + dir_);
        }
        RaiseTo(&counters->peak_bytes, used + bytes);
        return temp;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::IOError("cache " + dir_ + ": no room for " + display + " (" +
                             std::to_string(bytes) + " bytes) within the limit of " +
                             std::to_string(limit) + " bytes: " + std::to_string(used) +
                             " bytes are pinned by readers (waited " +
                             std::to_string(options.cache_wait_s) + " s)");
    }
    if (!waiter.fd.valid()) {
      MM_ASSIGN_OR_RETURN(waiter, StartWaiting());
    }
    if (behind) YieldAll();  // this process's idle pins: room for the older waiter
    std::unique_lock<std::mutex> lock(mu_);
    released_.wait_for(lock, std::chrono::milliseconds(100));  // a pin dropped here, or poll
  }
}

}  // namespace mm::reader::internal
