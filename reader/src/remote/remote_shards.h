// remote_shards.h: the shards of one remote set and their residency: a shard is resident (its
// cached file pinned with a shared flock, mapped and opened by Shard::Open exactly as a local
// shard) while at least one ShardPin on it lives. Private to mm_reader.
//
// Pin(k): when resident, a reference more; else one thread of the process fetches it through
// the cache (CacheDir::Acquire: a hit, or one download per node) and opens it while the others
// wait for it; an error is returned to every waiter, and the next Pin tries again. The last pin
// dropped closes the shard (unmaps it, releases its flock: now evictable) and wakes reservations
// waiting for room. Resident(k) is one atomic load: the read path's only cost.
//
// Thread-safe. Pins keep this object alive (they hold a shared_ptr to it), so a pin may outlive
// the ShardSet that made it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "remote/cache.h"
#include "remote/location.h"
#include "shard/shard.h"

namespace mm::reader::internal {

class RemoteShards : public std::enable_shared_from_this<RemoteShards> {
 public:
  /// `info`: the set's own index.json (its shards, image size, rules).
  static Result<std::shared_ptr<RemoteShards>> Create(Location location, const SetInfo& info,
                                                      const OpenOptions& options);

  /// The shard's Shard while pinned, else nullptr.
  const Shard* Resident(size_t k) const { return slots_[k].shard.load(std::memory_order_acquire); }
  /// Pins shard k (see the file comment). Errors: those of the cache and of Shard::Open.
  Result<ShardPin> Pin(size_t k);
  /// "s3://bucket/prefix/shard-000001.h5".
  std::string Display(size_t k) const { return location_.Display(info_.shards[k].file); }
  /// The cached file of shard k while it is pinned (for tools that read it with HDF5).
  std::string CachedPath(size_t k) const;
  CacheStats stats() const { return counters_.Snapshot(); }
  const Location& location() const { return location_; }
  const RemoteOptions& options() const { return options_.remote; }
  /// The cache directory its shards go through.
  const std::shared_ptr<CacheDir>& cache() const { return cache_; }

 private:
  struct Slot {
    std::mutex mu;
    std::condition_variable cv;
    int pins = 0;
    bool loading = false;
    std::unique_ptr<Shard> open;  // while pins > 0
    CachedFile file;              // its pin in the cache (shared flock)
    std::atomic<const Shard*> shard{nullptr};
  };
  RemoteShards(Location location, SetInfo info, OpenOptions options,
               std::shared_ptr<CacheDir> cache);
  Status Load(size_t k, std::unique_ptr<Shard>* shard, CachedFile* file);
  void Unpin(size_t k);

  const Location location_;
  const SetInfo info_;
  const OpenOptions options_;
  std::shared_ptr<CacheDir> cache_;
  std::unique_ptr<Slot[]> slots_storage_;
  Slot* slots_ = nullptr;
  mutable CacheCounters counters_;
};

}  // namespace mm::reader::internal
