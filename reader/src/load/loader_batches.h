// loader_batches.h: the state a Loader's decode threads share with it (see loader.cc's file
// comment): the batches being decoded (OpenBatch), those ready for Next() (Slot) and the pool of
// free batch buffers, under one mutex (LoaderShared). Private to mm_reader.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "mm/reader.h"
#include "order/epoch_order.h"

namespace mm::reader::internal {

// A batch the threads finished, waiting for Next(): its buffer and how its decoding went.
struct Slot {
  std::unique_ptr<Batch> batch;
  Status status;
};

// A batch being decoded (loader.cc's file comment). Fields marked "mu" are guarded by
// LoaderShared::mu; rows [lo, hi) of batch and tokens are written only by the thread that claimed
// their range.
struct OpenBatch {
  uint64_t gen = 0;   // the run it belongs to
  int64_t k = 0;      // its index in the run
  int rows = 0;       // batch_size, or fewer: a short last batch (even_batches false)
  LoaderOptions run;  // the options with the run's seed
  int64_t epoch = 0, start = 0;
  std::shared_ptr<const EpochOrder> order;
  std::unique_ptr<Batch> batch;
  std::vector<Span<const int32_t>> tokens;  // [B] each row's ids, views into the mapping
  int ranges = 0;                           // mu: 0 while the opening thread sizes the buffers
  int next_range = 0;                       // mu: the next range a thread claims
  int finished = 0;                         // mu: ranges decoded, failed or skipped
  // mu: the batch's error and its row: a shard's download (row -1) before the lowest failed
  // row, as a single thread reporting the first error would (pins first, then rows in order).
  int failed_row = std::numeric_limits<int>::max();
  Status status;
  std::vector<ShardPin> pins;  // mu: a remote set's shards the rows read, kept until complete
};

// Everything the worker threads and the batch deleters share with the loader. Owned by a
// shared_ptr so that a BatchPtr outliving its loader still returns (or frees) its buffer safely.
struct LoaderShared {
  std::mutex mu;
  std::condition_variable work_cv;   // workers: a range, a batch to open, or stop
  std::condition_variable ready_cv;  // consumer: a batch is ready, or stop
  bool stop = false;
  size_t capacity = 4;  // batches open or ready, at most
  int grain = 1;        // rows per range
  std::vector<std::unique_ptr<Batch>> free;
  // The current run (an epoch from `start`), replaced by StartEpoch/Restore (gen changes).
  uint64_t gen = 0;
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t start = 0;
  int64_t total = 0;       // batches in the run
  int64_t next_claim = 0;  // next batch a worker opens
  // Batches being decoded, in the order they were opened (a replaced run's first); a replaced
  // run's batches stay until their claimed ranges return, their other ranges are skipped.
  std::deque<std::unique_ptr<OpenBatch>> open;
  std::map<int64_t, Slot> ready;
  std::shared_ptr<const EpochOrder> order;  // the run's epoch order

  // Caller holds mu.
  void RecycleLocked(std::unique_ptr<Batch> b) {
    if (b && !stop && free.size() < capacity) free.push_back(std::move(b));
  }
  void Recycle(std::unique_ptr<Batch> b) {
    std::lock_guard<std::mutex> lock(mu);
    RecycleLocked(std::move(b));
  }
  // Caller holds mu. The first open batch with an unclaimed range, that range claimed, or null.
  OpenBatch* ClaimRangeLocked(int* range) {
    for (auto& ob : open) {
      if (ob->next_range < ob->ranges) {
        *range = ob->next_range++;
        return ob.get();
      }
    }
    return nullptr;
  }
  // Caller holds mu. Whether a thread may open the run's next batch.
  bool CanOpenLocked() const { return next_claim < total && open.size() + ready.size() < capacity; }
  // Caller holds mu. Removes `ob` (no thread works on it any more) from `open`.
  std::unique_ptr<OpenBatch> TakeOpenLocked(const OpenBatch* ob) {
    auto it = std::find_if(open.begin(), open.end(), [&](const auto& p) { return p.get() == ob; });
    std::unique_ptr<OpenBatch> taken = std::move(*it);
    open.erase(it);
    return taken;
  }
};

}  // namespace mm::reader::internal
