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
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "mm/internal/c_handles.h"
#include "mm/internal/checksum.h"

namespace mm::reader::internal {
namespace {

constexpr char kPartMark[] = ".part.";

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

bool IsHex16(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) &&
                  !std::isupper(static_cast<unsigned char>(c));
         });
}

// One file the cache accounts for.
struct CacheEntry {
  std::string path;
  int64_t bytes = 0;
  int64_t mtime_ns = 0;
  bool temporary = false;
};

// Every shard and temporary file under DIR/sets/*/ (regular files named as cache.h says).
std::vector<CacheEntry> Scan(const std::string& dir) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  for (const auto& set : std::filesystem::directory_iterator(dir + "/sets", ec)) {
    if (!IsHex16(set.path().filename().string())) continue;
    std::error_code ec2;
    for (const auto& f : std::filesystem::directory_iterator(set.path(), ec2)) {
      const std::string name = f.path().filename().string();
      if (name.size() < 18 || !IsHex16(name.substr(0, 16)) || name[16] != '.' ||
          EndsWith(name, ".lock")) {
        continue;
      }
      struct stat st;
      if (::lstat(f.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      CacheEntry e;
      e.path = f.path().string();
      e.bytes = static_cast<int64_t>(st.st_size);
      e.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      e.temporary = name.find(kPartMark) != std::string::npos;
      out.push_back(std::move(e));
    }
  }
  return out;
}

// Removes `path` if no process holds a lock on it (a pinned shard, a live download): true when
// removed.
bool RemoveIfUnlocked(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() || Flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false;
  struct stat held, now;
  if (::fstat(fd.get(), &held) != 0 || ::lstat(path.c_str(), &now) != 0 ||
      held.st_ino != now.st_ino || held.st_dev != now.st_dev) {
    return false;  // replaced meanwhile: not the file we locked
  }
  return ::unlink(path.c_str()) == 0;
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

// DIR/sets/<X> for the set at `location`, with its location file.
Result<std::string> SetDir(const std::string& dir, const std::string& location) {
  const std::string set_dir = dir + "/sets/" + Xxh3Hex(location.data(), location.size());
  std::error_code ec;
  std::filesystem::create_directories(set_dir, ec);
  if (ec) return Status::IOError("cache: cannot create " + set_dir + ": " + ec.message());
  const std::string file = set_dir + "/location";
  std::string stored;
  if (ReadRegularFile(file, &stored, 1 << 16).ok()) {
    if (stored == location) return set_dir;
    return Status::IOError("cache: " + set_dir + " belongs to " + stored + ", not " + location);
  }
  // Unique per call: two threads of one process may write it at once (the same name would
  // let one rename the other's file away, and the other's rename fail with ENOENT).
  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      file + kPartMark + std::to_string(::getpid()) + "." + std::to_string(counter++);
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid() ||
      ::write(fd.get(), location.data(), location.size()) !=
          static_cast<ssize_t>(location.size()) ||
      ::rename(temp.c_str(), file.c_str()) != 0) {
    return ErrnoStatus(errno, "cache: cannot write " + file);
  }
  return set_dir;
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

// The cached file at `path`, pinned (shared lock, mtime set to now), or an empty CachedFile
// (invalid fd) when it is absent, being evicted, or not of index.json's size.
Result<CachedFile> CacheDir::TryOpenCached(const std::string& path, int64_t bytes) const {
  CachedFile file;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return file;
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
  // One download of this shard at a time, over all processes sharing the directory.
  const std::string lock_path = path + ".lock";
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.valid()) return ErrnoStatus(errno, "cache: cannot open " + lock_path);
  if (Flock(lock.get(), LOCK_EX) != 0) return ErrnoStatus(errno, "cache: cannot lock " + lock_path);
  MM_ASSIGN_OR_RETURN(hit, TryOpenCached(path, entry.bytes));  // another process fetched it
  if (hit.fd.valid()) {
    ++counters->hits;
    return hit;
  }
  return Download(path, entry, display, options, fetch, counters);
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
  for (;;) {
    int64_t used = 0;
    {
      MM_ASSIGN_OR_RETURN(UniqueFd dir_lock, LockDir());
      std::vector<CacheEntry> entries = Scan(dir_);
      std::vector<CacheEntry> shards;
      for (CacheEntry& e : entries) {
        if (e.temporary && RemoveIfUnlocked(e.path)) continue;  // its downloader died
        used += e.bytes;
        if (!e.temporary) shards.push_back(std::move(e));
      }
      std::sort(shards.begin(), shards.end(),
                [](const CacheEntry& a, const CacheEntry& b) { return a.mtime_ns < b.mtime_ns; });
      for (size_t i = 0; limit > 0 && used + bytes > limit && i < shards.size(); ++i) {
        if (RemoveIfUnlocked(shards[i].path)) {
          used -= shards[i].bytes;
          ++counters->evictions;
        }
      }
      if (limit == 0 || used + bytes <= limit) {
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
    std::unique_lock<std::mutex> lock(mu_);
    released_.wait_for(lock, std::chrono::milliseconds(100));  // a pin dropped here, or poll
  }
}

}  // namespace mm::reader::internal
