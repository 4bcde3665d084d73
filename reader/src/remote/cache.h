// cache.h: the local cache of remote shards, a directory that several processes (the ranks of a
// node, other jobs) may share, bounded in bytes with least-recently-used eviction. Private to
// mm_reader. This comment is the one full statement of the cache's protocol (reader/README.md,
// "Remote sets", and prefetcher.h refer to it): change it with the code.
//
// Layout (everything mmpack writes there; nothing else is read, renamed or deleted):
//   DIR/.lock                                   flock: reservations and evictions, one at a time
//   DIR/sets/<X>/location                       the set's location (X: its XXH3-64, 16 hex)
//   DIR/sets/<X>/<xxh3>.<shard file>            a whole shard, checked against index.json
//   DIR/sets/<X>/<xxh3>.<shard file>.lock       flock: one download of that shard at a time
//   DIR/sets/<X>/<xxh3>.<shard file>.part.<pid>.<n>   a download in progress, full size reserved
// A cached file's name holds index.json's XXH3-64 of it, so a set rewritten in place under the
// same shard names misses instead of reading stale bytes.
//
// Ownership: the cache reads, counts and removes only what it wrote. A set folder is the
// cache's when it is a real folder (opened with O_NOFOLLOW: a symlink at DIR/sets or
// DIR/sets/<X> is never followed, and is refused when the cache would write there) whose
// location file's XXH3-64 is its name; in it, only regular files named exactly as above, and a
// shard file only when it starts with HDF5's signature. Removals go through the folder's
// descriptor (unlinkat), so a path swapped for a symlink meanwhile leads nowhere else.
//
// Lock files: a download's lock file is removed by its holder before it lets go (a process
// that locked a file removed meanwhile locks the new one: LockDownload), and a reservation
// removes one that no process holds (its holder died). So they exist only while a shard is
// being fetched or waited for, never one per shard ever cached.
//
// Pins: a reader holds a shared flock on the cached file for as long as it is mapped. Eviction
// (under DIR/.lock) takes an exclusive non-blocking flock on a candidate and unlinks it only if
// it got it: a pinned file is never evicted. A reader that opened a file being evicted sees the
// link gone once its shared lock is granted (the path no longer names its inode) and downloads
// again. Least recently used: each pin sets the file's mtime; eviction takes the oldest first.
//
// Downloads: the per-shard lock file makes one process (one thread: the caller's in-process
// slot does the rest) download a shard while the others wait and then find it cached. The
// download reserves its full size at once (a temporary file of that size, created under
// DIR/.lock, so that every process's accounting sees it), is hashed as it arrives, compared
// with index.json's size and XXH3-64 (a mismatch is downloaded once more, then Corruption), is
// fdatasync'd, and renamed into place under DIR/.lock with its shared lock already held. A
// temporary file whose owner died (its exclusive lock is free) is removed by the next
// reservation.
//
// Bound: a reservation evicts unpinned files, oldest first, until the new file fits within the
// limit; when pinned files leave no room it waits (woken when this process drops a pin, polling
// for others) up to RemoteOptions::cache_wait_s, then fails naming the cache, the limit and the
// bytes held. So the cache directory never holds more than the limit, temporary files included,
// unless it held more when this process found it.
//
// Sharing the limit (the ranks of a node): every reader sizes its windows for the whole limit,
// so two readers may each pin part of what they need and wait for the rest. A reservation
// that has to wait registers itself in DIR/waiting (a file named for when it began waiting,
// flocked while it waits); the oldest waiter of all processes is served first: a reservation
// of another process neither takes room while it waits, and that process's Loaders give back
// every pin no batch is reading (AddYielder, MustYield; prefetcher.h). The oldest waiter's own
// process never yields, so it is served as soon as batches in decode elsewhere finish.
//
// Thread-safe: CacheDir::Get returns one shared object per directory per process.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "mm/internal/file.h"
#include "mm/reader.h"
#include "mm/status.h"
#include "remote/http.h"

namespace mm::reader::internal {

/// A cached shard file held with a shared flock (the pin); closing the descriptor unpins it.
struct CachedFile {
  std::string path;
  UniqueFd fd;
};

/// Counters of one set's use of the cache (atomics: shared by its threads).
struct CacheCounters {
  std::atomic<int64_t> downloads{0}, downloaded_bytes{0}, hits{0}, evictions{0}, peak_bytes{0};
  CacheStats Snapshot() const;
};

/// Fetches a shard's bytes into a sink (a retry starts over through DownloadSink::Begin).
using ShardFetch = std::function<Status(DownloadSink* sink)>;

class CacheDir {
 public:
  /// The process's object for directory `dir` (created, with its parents, when missing).
  /// Errors: IOError (cannot create or lock the directory).
  static Result<std::shared_ptr<CacheDir>> Get(const std::string& dir);
  /// RemoteOptions::cache_dir, or $XDG_CACHE_HOME/mmpack, or $HOME/.cache/mmpack.
  static std::string DefaultDir();

  /// The cached copy of shard `entry` of the set at `set_location`, pinned; downloaded with
  /// `fetch` when absent (see the file comment). `display` names the shard in messages.
  /// Errors: Corruption (size or XXH3-64 unlike index.json's, twice), IOError (the cache
  /// directory; no room within `limit` after options.cache_wait_s), fetch's own errors.
  Result<CachedFile> Acquire(const std::string& set_location, const ShardEntry& entry,
                             const std::string& display, const RemoteOptions& options,
                             const ShardFetch& fetch, CacheCounters* counters);

  /// A pin was dropped in this process: reservations waiting for room look again.
  void Released();

  /// Registers `yield`, which gives back pins no batch of this process is reading (a Loader's
  /// prefetcher). It is called by a reservation of this process that waits behind an older one
  /// of another process, never after RemoveYielder(id) returned.
  int AddYielder(std::function<void()> yield);
  void RemoveYielder(int id);
  /// True while the oldest reservation waiting for room in this directory belongs to another
  /// process: then this process's readers take no new pins and give back idle ones. Looks at
  /// DIR/waiting at most every 100 ms.
  bool MustYield();

  const std::string& dir() const { return dir_; }

 private:
  explicit CacheDir(std::string dir) : dir_(std::move(dir)) {}
  Result<CachedFile> TryOpenCached(const std::string& path, int64_t bytes) const;
  Result<CachedFile> Download(const std::string& path, const ShardEntry& entry,
                              const std::string& display, const RemoteOptions& options,
                              const ShardFetch& fetch, CacheCounters* counters);
  Result<CachedFile> Reserve(const std::string& final_path, int64_t bytes,
                             const std::string& display, const RemoteOptions& options,
                             CacheCounters* counters);
  Result<UniqueFd> LockDir() const;
  // A reservation waiting for room: DIR/waiting/<name>, flocked while it lives.
  struct Waiter {
    std::string name;  // "<ns since the epoch, 20 digits>.<pid>.<n>": older sorts first
    UniqueFd fd;
  };
  Result<Waiter> StartWaiting();
  void StopWaiting(Waiter* waiter);
  // The oldest live waiter's name ("" when none), removing the files of dead ones.
  std::string OldestWaiter() const;
  void YieldAll();

  std::string dir_;
  std::mutex mu_;
  std::condition_variable released_;
  std::atomic<uint64_t> temp_counter_{0};
  std::mutex yield_mu_;  // yielders_; held while they run (RemoveYielder waits for them)
  std::map<int, std::function<void()>> yielders_;
  int next_yielder_ = 0;
  std::mutex must_yield_mu_;  // one refresh at a time
  std::atomic<int64_t> must_yield_checked_ns_{0};
  std::atomic<bool> must_yield_{false};
};

}  // namespace mm::reader::internal
