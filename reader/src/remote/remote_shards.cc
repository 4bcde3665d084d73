// remote_shards.cc: see remote_shards.h.
#include "remote/remote_shards.h"

#include "remote/http.h"

namespace mm::reader::internal {

RemoteShards::RemoteShards(Location location, SetInfo info, OpenOptions options,
                           std::shared_ptr<CacheDir> cache)
    : location_(std::move(location)),
      info_(std::move(info)),
      options_(std::move(options)),
      cache_(std::move(cache)),
      slots_storage_(new Slot[info_.shards.size()]),
      slots_(slots_storage_.get()) {}

Result<std::shared_ptr<RemoteShards>> RemoteShards::Create(Location location, const SetInfo& info,
                                                           const OpenOptions& options) {
  MM_ASSIGN_OR_RETURN(std::shared_ptr<CacheDir> cache, CacheDir::Get(options.remote.cache_dir));
  return std::shared_ptr<RemoteShards>(
      new RemoteShards(std::move(location), info, options, std::move(cache)));
}

// Fetches shard k into the cache (or finds it there) and opens the cached file as a shard.
Status RemoteShards::Load(size_t k, std::unique_ptr<Shard>* shard, CachedFile* file) {
  const ShardEntry& entry = info_.shards[k];
  MM_ASSIGN_OR_RETURN(const HttpRequest request, RequestFor(location_, entry.file));
  const RemoteOptions& remote = options_.remote;
  auto fetch = [&](DownloadSink* sink) {
    return ThreadHttpClient().Get(request, remote, sink, entry.bytes);
  };
  MM_ASSIGN_OR_RETURN(
      *file, cache_->Acquire(location_.text, entry, Display(k), remote, fetch, &counters_));
  ShardEntry named = entry;
  named.file = Display(k);  // messages name the remote shard, not the cache's file
  MM_ASSIGN_OR_RETURN(*shard, Shard::Open(file->path, named, info_, options_));
  return Status::OK();
}

Result<ShardPin> RemoteShards::Pin(size_t k) {
  if (k >= info_.shards.size()) {
    return Status::OutOfRange("shard " + std::to_string(k) + " of " +
                              std::to_string(info_.shards.size()));
  }
  Slot& s = slots_[k];
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait(lock, [&] { return !s.loading; });
  if (s.pins == 0) {
    s.loading = true;
    lock.unlock();
    std::unique_ptr<Shard> shard;
    CachedFile file;
    Status st = Load(k, &shard, &file);
    lock.lock();
    s.loading = false;
    s.cv.notify_all();
    if (!st.ok()) return st;
    s.open = std::move(shard);
    s.file = std::move(file);
    s.shard.store(s.open.get(), std::memory_order_release);
  }
  ++s.pins;
  std::shared_ptr<RemoteShards> self = shared_from_this();
  return ShardPin(std::shared_ptr<const void>(static_cast<const void*>(&s),
                                              [self, k](const void*) { self->Unpin(k); }));
}

void RemoteShards::Unpin(size_t k) {
  Slot& s = slots_[k];
  std::unique_ptr<Shard> closing;
  CachedFile released;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (--s.pins > 0) return;
    s.shard.store(nullptr, std::memory_order_release);
    closing = std::move(s.open);
    released = std::move(s.file);
  }
  closing.reset();      // unmaps
  released.fd.Reset();  // drops the shared flock: the file is evictable now
  cache_->Released();
}

std::string RemoteShards::CachedPath(size_t k) const {
  Slot& s = slots_[k];
  std::lock_guard<std::mutex> lock(s.mu);
  return s.pins > 0 ? s.file.path : std::string();
}

}  // namespace mm::reader::internal
