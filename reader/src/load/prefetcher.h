// prefetcher.h: a Loader's residency manager for a remote set: download threads that pin the
// shards of the order's windows ahead of the batches, in the order the sampler reads them, and
// hand the pins to the decode threads. Private to mm_reader.
//
// The run's windows (EpochOrder::Windows over the positions this run reads, from its start,
// including the wrap-around of a padded last batch) are followed by the next epoch's (epoch + 1
// from position 0, speculatively: a trainer's next StartEpoch), so the next epoch's first shards
// arrive while this one ends. Windows are released in order: window w once every batch of this
// rank that reads from it has been decoded (the lowest unfinished batch starts past it).
//
// Downloads go in window order from the lowest unfinished batch's window, a shard that a
// waiting batch needs first. A shard of window w is only started when the windows from the
// lowest needed one through w fit in the cache limit together: then the downloads this
// process has started never wait for room held by its own later windows, and the lowest
// unfinished batch, whose windows come first, always completes. ResolveOrder (order.h) refuses a
// limit that cannot hold the windows of one batch.
//
// A shard that fails to download fails (with its error) every batch of the run that reads it;
// the next run tries it again.
//
// Sharing a cache with other processes (the ranks of a node): the oldest waiter of all processes
// is served first (the rule and why: remote/cache.h, "Sharing the limit"). While
// CacheDir::MustYield says so, this prefetcher gives back every pin no batch is reading (they
// stay cached until evicted) and takes none until that waiter is served; a reservation of this
// process that waits behind such an older one makes it do so at once. The download threads
// look every 200 ms, also when idle (a rank blocked in an all-reduce still gives its pins back).
//
// Thread safety: Reset (the consumer thread), Acquire and Finish (decode threads) and the
// download threads synchronise on one mutex; pins are dropped outside it. Stop releases every
// pin, wakes the waiting decode threads (their Acquire fails) and joins the download threads
// (a download in flight finishes first).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "mm/reader.h"
#include "order/epoch_order.h"
#include "remote/cache.h"

namespace mm::reader::internal {

class Prefetcher {
 public:
  /// The order of an epoch under the loader's arrangement and window.
  using OrderFor = std::function<std::shared_ptr<const EpochOrder>(uint64_t seed, int64_t epoch)>;

  /// What a run of this rank reads: batch k covers positions
  /// [start + k * global_batch + rank_offset, + batch) (modulo items past the epoch's end when
  /// `wraps`; cut at the epoch's end otherwise: LoaderOptions::even_batches false).
  struct Run {
    uint64_t gen = 0;
    uint64_t seed = 0;
    int64_t epoch = 0;
    int64_t start = 0;
    int64_t batches = 0;
    int64_t global_batch = 0;
    int64_t rank_offset = 0;
    int64_t batch = 0;
    bool wraps = true;
  };

  /// `limit`: the cache limit in bytes (0: none; then at most kUnboundedAheadBytes ahead).
  Prefetcher(std::shared_ptr<const ShardSet> set, OrderFor order_for, int64_t limit);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  static constexpr int64_t kUnboundedAheadBytes = int64_t{2} << 30;

  /// Starts `threads` download threads. Errors: IOError when the system refuses a thread.
  Status Start(int threads);
  /// Releases every pin and joins the download threads; Acquire fails from now on.
  void Stop();
  /// A new run.
  void Reset(const Run& run);
  /// Pins of `shards` (what a batch of generation `gen` reads), once the download threads hold
  /// them. Errors: the shard's download error; Internal when the run was replaced or stopped.
  Result<std::vector<ShardPin>> Acquire(uint64_t gen, const std::vector<uint32_t>& shards);
  /// Batch k of generation `gen` is decoded (or failed).
  void Finish(uint64_t gen, int64_t k);

 private:
  struct Window {
    int64_t begin = 0, end = 0;  // positions of the run (past the epoch's end: padding)
    std::vector<uint32_t> shards;
    int64_t bytes = 0;
    size_t handed_out = 0;  // shards considered for download, in order
  };
  void Work();
  // Gives back the pins no batch is reading (see the file comment).
  void Yield();
  // `pin` of `shard`, counted busy until the decode thread drops it.
  ShardPin Lend(uint32_t shard, const ShardPin& pin);
  bool NextTask(size_t* window, uint32_t* shard);  // caller holds mu_
  size_t WindowOf(int64_t pos) const;              // caller holds mu_
  // The first window past those from `low` that fit in the limit together (low always fits).
  size_t Horizon(size_t low) const;                                // caller holds mu_
  void ReleaseBefore(size_t window, std::vector<ShardPin>* drop);  // caller holds mu_

  const std::shared_ptr<const ShardSet> set_;
  const OrderFor order_for_;
  const int64_t limit_;
  std::mutex mu_;
  std::condition_variable work_cv_;   // download threads: a task, or stop
  std::condition_variable ready_cv_;  // decode threads: a shard arrived or failed, or stop
  bool stop_ = false;
  Run run_;
  std::vector<Window> windows_;  // the run's, then the next epoch's
  size_t run_windows_ = 0;
  size_t low_ = 0;                     // the lowest window still needed
  int64_t low_batch_ = 0;              // the lowest unfinished batch
  std::set<int64_t> finished_;         // finished batches above low_batch_
  std::vector<int64_t> last_use_;      // per shard: the last window reading it (-1: none)
  std::map<uint32_t, ShardPin> held_;  // shards held, until no window of the horizon reads them
  std::map<uint32_t, Status> failed_;  // this run's failed shards
  std::set<uint32_t> in_flight_;       // shards being fetched
  std::deque<uint32_t> demanded_;      // shards a waiting batch needs
  std::vector<ShardPin> retired_;  // the previous run's pins, kept until this run's first window
  std::map<uint32_t, int> busy_;   // shards lent to decode threads (Lend), how many times
  std::vector<std::thread> threads_;
  const std::shared_ptr<CacheDir> cache_;  // the set's cache directory (null: none)
  int yielder_ = -1;                       // this prefetcher's registration with cache_
};

}  // namespace mm::reader::internal
