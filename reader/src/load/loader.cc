// The Loader: this rank's batches, decoded by worker threads into a bounded pool of reusable
// buffers, delivered in order.
//
// Split over ranks: with G = world_size * batch_size, the run's global batch g covers global
// positions [start + g*G, start + (g+1)*G) and rank r takes [start + g*G + r*B, ... + B).
// `start` is 0 at StartEpoch and LoaderState::consumed after Restore, so a restored loader
// continues the same global order under any world size. drop_last: the tail shorter than G is
// dropped; otherwise positions past the end wrap to the epoch's first items (pos mod n), as
// torch's DistributedSampler pads, and every rank gets the same number of full batches; or,
// with even_batches false, nothing wraps: rank r's batch is cut at the epoch's end (short, or
// not there at all), so every item is handed out exactly once over all ranks.
//
// Threads share the work of a batch: a thread opens the next batch (a buffer from the pool,
// sized), then the batch's rows are decoded in ranges of a few rows that any thread claims,
// the lowest open batch first; the thread that decodes a batch's last range completes it
// (token rows padded to the longest, caption texts) and queues it for Next(). So every thread
// decodes whatever prefetch_batches is, and batches still complete in order. Every row's pixels,
// tokens and key are functions of (seed, epoch, position) only: the batches are byte for byte
// those of a single thread.
//
// Memory: at most prefetch_batches batches are being decoded or wait for the consumer; buffers
// the consumer releases go back to a free list of at most prefetch_batches. Batches the
// consumer holds are its own: holding them never blocks the loader (no hang), it only costs
// their memory.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <mutex>
#include <system_error>
#include <thread>

#include "load/image_transform.h"
#include "load/loader_batches.h"
#include "load/loader_state.h"
#include "load/prefetcher.h"
#include "mm/reader.h"
#include "mm/sample_text.h"
#include "order/sampler.h"
#include "set/order.h"

namespace mm::reader {
namespace {

using internal::LoaderShared;
using internal::OpenBatch;
using internal::Slot;

// Rows a thread claims at once: about kRangesPerThread ranges per thread and batch, so that at
// the end of a batch (prefetch_batches 1: nothing else to do) the other threads wait for at
// most a few rows, while the claims stay rare next to the decoding.
constexpr int kRangesPerThread = 16;

class LoaderImpl final : public Loader {
 public:
  LoaderImpl(std::shared_ptr<const ShardSet> set, const LoaderOptions& options,
             const internal::ResolvedOrder& order)
      : set_(std::move(set)),
        impl_(set_->impl()),
        options_(WithOrder(options, order)),
        order_(order),
        shape_(internal::MakeOrderShape(impl_, options.caption_mode)),
        items_(internal::EpochItems(*shape_)),
        global_batch_(static_cast<int64_t>(options.world_size) * options.batch_size),
        shard_set_(ShardSets(impl_)),
        shared_(std::make_shared<LoaderShared>()) {
    // A set without a tokenizer (`--tokenizer none`): batches carry caption text instead.
    if (!set_->info().has_tokenizer) text_ = std::make_unique<SampleText>(set_);
    shared_->capacity = static_cast<size_t>(options.prefetch_batches);
    shared_->grain = std::max(1, options.batch_size / (kRangesPerThread * options.num_threads));
    shared_->seed = options.seed;
  }

  // A remote set: download threads that keep the shards of the order's windows resident ahead
  // of the batches (prefetcher.h), as many as the set's RemoteOptions::download_threads.
  Status StartPrefetcher() {
    if (!set_->remote()) return Status::OK();
    const RemoteOptions* remote = impl_.remote_options();
    prefetcher_ = std::make_unique<internal::Prefetcher>(
        set_, [this](uint64_t seed, int64_t epoch) { return MakeOrder(seed, epoch); },
        impl_.cache_limit());
    return prefetcher_->Start(std::max(1, remote ? remote->download_threads : 2));
  }

  // Starts the decode threads. A thread the system refuses (std::thread throws
  // std::system_error: EAGAIN under a process or memory limit) is an error, not an abort; the
  // threads already started are stopped and joined by the destructor.
  Status StartWorkers() {
    threads_.reserve(static_cast<size_t>(options_.num_threads));
    for (int t = 0; t < options_.num_threads; ++t) {
      try {
        threads_.emplace_back([this] { Work(); });
      } catch (const std::system_error& e) {
        return Status::IOError("loader: the system refused decode thread " + std::to_string(t + 1) +
                               " of " + std::to_string(options_.num_threads) + " (" + e.what() +
                               "); lower num_threads or raise the process limits");
      }
    }
    return Status::OK();
  }

  ~LoaderImpl() override {
    if (prefetcher_) prefetcher_->Stop();  // drops its pins: decode threads waiting on it fail
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->stop = true;
      shared_->ready.clear();
      shared_->free.clear();
    }
    shared_->work_cv.notify_all();
    shared_->ready_cv.notify_all();
    for (auto& t : threads_) t.join();
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->open.clear();  // what the stopped threads left: buffers and pins
  }

  int64_t items_per_epoch() const override { return items_; }
  const LoaderOptions& options() const override { return options_; }
  const std::string& notice() const override { return order_.notice; }
  int64_t batches_per_epoch() const override { return BatchesFrom(0); }

  void StartEpoch(int64_t epoch) override { Reset(epoch, 0, shared_seed()); }

  Result<BatchPtr> Next() override {
    if (::getpid() != creator_) {  // a forked child: the decode threads are not here
      return Status::Internal("loader: used in process " + std::to_string(::getpid()) +
                              ", a fork of process " + std::to_string(creator_) +
                              " that created it; its decode threads run only there: create "
                              "the Loader in the process that reads it");
    }
    if (!started_) StartEpoch(0);
    std::unique_lock<std::mutex> lock(shared_->mu);
    if (next_deliver_ >= shared_->total) return BatchPtr();
    const int64_t k = next_deliver_;
    shared_->ready_cv.wait(lock, [&] { return shared_->stop || shared_->ready.count(k) > 0; });
    if (shared_->stop) return Status::Internal("loader is shutting down");
    Slot slot = std::move(shared_->ready[k]);
    shared_->ready.erase(k);
    ++next_deliver_;
    lock.unlock();
    shared_->work_cv.notify_all();  // a slot is free for the next batch
    if (!slot.status.ok()) {
      shared_->Recycle(std::move(slot.batch));
      return slot.status;
    }
    std::shared_ptr<LoaderShared> owner = shared_;
    return BatchPtr(slot.batch.release(), [owner](const Batch* b) {
      owner->Recycle(std::unique_ptr<Batch>(const_cast<Batch*>(b)));
    });
  }

  LoaderState state() const override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    LoaderState s;
    s.seed = shared_->seed;
    s.epoch = shared_->epoch;
    s.consumed = started_ ? std::min(items_, shared_->start + next_deliver_ * global_batch_) : 0;
    s.world_size = options_.world_size;
    s.batch_size = options_.batch_size;
    s.order = internal::OrderName(order_.arrangement);
    s.shuffle_window = order_.arrangement == internal::Arrangement::kBlock ? order_.window : 0;
    s.set = impl_.identity();
    s.set_source = set_->info().root;
    s.caption_mode = options_.caption_mode == CaptionMode::kAllCaptions ? "all" : "random";
    return s;
  }

  Status Restore(const LoaderState& state) override {
    if (state.consumed < 0 || state.consumed > items_) {
      return Status::InvalidArgument("loader state consumed=" + std::to_string(state.consumed) +
                                     " outside the epoch's " + std::to_string(items_) + " items");
    }
    if (state.epoch < 0) return Status::InvalidArgument("loader state epoch < 0");
    MM_RETURN_NOT_OK(internal::CheckRestorable(state, this->state()));
    Reset(state.epoch, state.consumed, state.seed);
    return Status::OK();
  }

 private:
  uint64_t shared_seed() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->seed;
  }

  // This rank's batches of a run from position `start`: under even_batches false those whose
  // first row lies before the epoch's end (see LoaderOptions::even_batches).
  int64_t BatchesFrom(int64_t start) const {
    int64_t left = items_ - start;
    if (left <= 0) return 0;
    if (options_.drop_last) return left / global_batch_;
    if (options_.even_batches) return (left + global_batch_ - 1) / global_batch_;
    left -= RankOffset();
    return left <= 0 ? 0 : (left + global_batch_ - 1) / global_batch_;
  }

  int64_t RankOffset() const { return static_cast<int64_t>(options_.rank) * options_.batch_size; }

  // Rows of this rank's batch k of a run from `start` (k < BatchesFrom(start)): batch_size,
  // except the last under even_batches false, cut at the epoch's end.
  int RowsOf(int64_t start, int64_t k) const {
    if (options_.drop_last || options_.even_batches) return options_.batch_size;
    const int64_t first = start + k * global_batch_ + RankOffset();
    return static_cast<int>(std::min<int64_t>(options_.batch_size, items_ - first));
  }

  // Which set of the mixture (its position in the mixture's list) each shard belongs to.
  static std::vector<int32_t> ShardSets(const internal::ShardSetImpl& set) {
    std::vector<int32_t> of(set.num_shards(), 0);
    const auto& parts = set.parts();
    for (size_t p = 0; p < parts.size(); ++p) {
      for (size_t k = parts[p].first_shard; k < parts[p].end_shard; ++k) {
        of[k] = static_cast<int32_t>(p);
      }
    }
    return of;
  }

  std::shared_ptr<const internal::EpochOrder> MakeOrder(uint64_t seed, int64_t epoch) const {
    return std::make_shared<const internal::EpochOrder>(shape_, order_.arrangement, order_.window,
                                                        seed, epoch);
  }

  static LoaderOptions WithOrder(LoaderOptions options, const internal::ResolvedOrder& order) {
    options.shuffle_mode = order.arrangement == internal::Arrangement::kBlock
                               ? ShuffleMode::kBlock
                               : ShuffleMode::kGlobal;
    options.shuffle_window = order.window;
    return options;
  }

  void Reset(int64_t epoch, int64_t start, uint64_t seed) {
    std::shared_ptr<const internal::EpochOrder> order = MakeOrder(seed, epoch);
    uint64_t gen = 0;
    {
      // Only this (the consumer's) thread changes gen, so the next one is known here.
      std::lock_guard<std::mutex> lock(shared_->mu);
      gen = shared_->gen + 1;
    }
    // The prefetcher learns the new run before any worker can claim one of its batches: a
    // worker of the new run asking it for pins while it still held the old run would be told
    // "replaced", and that error would reach Next() at the epoch ends of a remote set.
    if (prefetcher_) {
      internal::Prefetcher::Run run;
      run.gen = gen;
      run.seed = seed;
      run.epoch = epoch;
      run.start = start;
      run.batches = BatchesFrom(start);
      run.global_batch = global_batch_;
      run.rank_offset = RankOffset();
      run.batch = options_.batch_size;
      run.wraps = !options_.drop_last && options_.even_batches;
      prefetcher_->Reset(run);
    }
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->gen = gen;
      shared_->order = std::move(order);
      shared_->seed = seed;
      shared_->epoch = epoch;
      shared_->start = start;
      shared_->total = BatchesFrom(start);
      shared_->next_claim = 0;  // the replaced run's open batches skip their remaining ranges
      for (auto& [k, slot] : shared_->ready) shared_->RecycleLocked(std::move(slot.batch));
      shared_->ready.clear();
    }
    next_deliver_ = 0;
    started_ = true;
    shared_->work_cv.notify_all();
  }

  // A decode thread: claims ranges of open batches (the lowest first), else opens the run's
  // next batch when there is room, else waits.
  void Work() {
    LoaderShared& sh = *shared_;
    std::unique_lock<std::mutex> lock(sh.mu);
    while (!sh.stop) {
      int range = 0;
      if (OpenBatch* ob = sh.ClaimRangeLocked(&range)) {
        const int lo = range * sh.grain;
        const int hi = std::min(lo + sh.grain, ob->rows);
        // Nothing to decode for a replaced run, or past a row that already failed.
        const bool skip = ob->gen != sh.gen || ob->failed_row < lo;
        lock.unlock();
        int failed_row = -1;
        Status status =
            skip ? Status::OK() : Guarded([&] { return DecodeRows(*ob, lo, hi, &failed_row); });
        lock.lock();
        ++ob->finished;
        if (!status.ok() && failed_row < ob->failed_row) {
          ob->failed_row = failed_row;
          ob->status = std::move(status);
        }
        if (ob->finished == ob->ranges && !sh.stop) Complete(ob, lock);
      } else if (sh.CanOpenLocked()) {
        OpenBatch* ob = OpenLocked();
        const bool current = ob->gen == sh.gen;
        lock.unlock();
        SizeBuffers(*ob);
        // A remote set: the shards of the whole batch are pinned in one Acquire (all or nothing)
        // before any range is claimed, and stay resident until the batch completes. Were each
        // range to pin its own rows' shards, a batch could hold some of its shards while waiting
        // for room for the others, and two processes sharing a limited cache then each held what
        // the other waited for (python_remote's two_loaders_sharing_a_limited_cache hung so).
        std::vector<ShardPin> pins;
        Status pinned = Status::OK();
        if (prefetcher_ && current) {
          pinned = Guarded([&] {
            MM_ASSIGN_OR_RETURN(pins, PinShards(BatchDraws(*ob), ob->gen));
            return Status::OK();
          });
        }
        lock.lock();
        ob->pins = std::move(pins);
        if (!pinned.ok() && ob->status.ok()) {  // a shard's download: before any row's error
          ob->failed_row = -1;
          ob->status = std::move(pinned);
        }
        ob->ranges = (ob->rows + sh.grain - 1) / sh.grain;
        sh.work_cv.notify_all();
      } else {
        sh.work_cv.wait(lock);
      }
    }
  }

  // f() with an exception (std::bad_alloc from a buffer) turned into a Status.
  template <typename F>
  static Status Guarded(F f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return Status::Internal(std::string("loader worker: ") + e.what());
    }
  }

  // Caller holds mu. Opens the run's next batch with a buffer from the pool (or a new one).
  OpenBatch* OpenLocked() {
    LoaderShared& sh = *shared_;
    auto ob = std::make_unique<OpenBatch>();
    ob->gen = sh.gen;
    ob->k = sh.next_claim++;
    ob->run = options_;
    ob->run.seed = sh.seed;
    ob->epoch = sh.epoch;
    ob->start = sh.start;
    ob->order = sh.order;
    ob->rows = RowsOf(ob->start, ob->k);
    if (!sh.free.empty()) {
      ob->batch = std::move(sh.free.back());
      sh.free.pop_back();
    }
    sh.open.push_back(std::move(ob));
    return sh.open.back().get();
  }

  // The opening thread, before the ranges are published: the buffers at the batch's size. A
  // failed allocation fails the batch (at row -1: no row is decoded).
  void SizeBuffers(OpenBatch& ob) const {
    Status status = Guarded([&] {
      if (!ob.batch) ob.batch = std::make_unique<Batch>();
      Batch& b = *ob.batch;
      const int B = ob.rows;
      int out_h = 0, out_w = 0;
      internal::OutputSize(*set_, ob.run, &out_h, &out_w);
      b.size = B;
      b.height = out_h;
      b.width = out_w;
      b.images.resize(static_cast<size_t>(out_h) * out_w * 3 * B);
      b.lengths.resize(B);
      b.indices.resize(B);
      b.caption.resize(B);
      b.keys.resize(B);
      b.set_index.resize(B);
      b.epoch = ob.epoch;
      b.step_in_epoch = ob.start / global_batch_ + ob.k;
      ob.tokens.resize(B);
      return Status::OK();
    });
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      ob.failed_row = -1;
      ob.status = std::move(status);
    }
  }

  // Caller holds mu (through `lock`); every range of `ob` has finished. Completes the batch
  // outside the lock, then queues it for Next() (or recycles it: a replaced run).
  void Complete(OpenBatch* ob, std::unique_lock<std::mutex>& lock) {
    LoaderShared& sh = *shared_;
    const bool current = ob->gen == sh.gen;
    std::vector<ShardPin> pins = std::move(ob->pins);
    lock.unlock();
    Status status = std::move(ob->status);
    if (status.ok() && current) status = Guarded([&] { return AssembleTokens(*ob); });
    pins.clear();  // a remote set: the batch's shards may be released
    if (prefetcher_) prefetcher_->Finish(ob->gen, ob->k);
    lock.lock();
    std::unique_ptr<OpenBatch> done = sh.TakeOpenLocked(ob);
    if (done->gen == sh.gen && !sh.stop) {
      sh.ready[done->k] = Slot{std::move(done->batch), std::move(status)};
      sh.ready_cv.notify_all();
    } else {
      sh.RecycleLocked(std::move(done->batch));
      sh.work_cv.notify_all();  // the slot it held is free again
    }
  }

  // Pins of the distinct shards of `draws` (a remote set), from the prefetcher.
  Result<std::vector<ShardPin>> PinShards(const std::vector<internal::Draw>& draws,
                                          uint64_t gen) const {
    std::vector<uint32_t> shards;
    for (const internal::Draw& d : draws) shards.push_back(d.shard);
    std::sort(shards.begin(), shards.end());
    shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
    return prefetcher_->Acquire(gen, shards);
  }

  // The draw of row j of `ob` (padding wraps to the epoch's first items; under even_batches
  // false no row lies past the epoch's end).
  internal::Draw DrawAt(const OpenBatch& ob, int j) const {
    int64_t pos =
        ob.start + ob.k * global_batch_ + static_cast<int64_t>(ob.run.rank) * ob.run.batch_size + j;
    if (pos >= items_) pos %= items_;
    return ob.order->At(pos);
  }

  // The draws of every row of `ob`.
  std::vector<internal::Draw> BatchDraws(const OpenBatch& ob) const {
    std::vector<internal::Draw> draws(static_cast<size_t>(ob.rows));
    for (int j = 0; j < ob.rows; ++j) draws[j] = DrawAt(ob, j);
    return draws;
  }

  // Decodes rows [lo, hi) of `ob`: each row's image (transformed), sample, caption, key and
  // token view (a remote set's shards were pinned when the batch was opened). On failure
  // *failed_row is the row.
  Status DecodeRows(OpenBatch& ob, int lo, int hi, int* failed_row) const {
    const ShardSet& set = *set_;
    const LoaderOptions& run = ob.run;
    Batch& b = *ob.batch;
    const size_t image_bytes = static_cast<size_t>(b.height) * b.width * 3;
    for (int j = lo; j < hi; ++j) {
      *failed_row = j;
      const internal::Draw draw = DrawAt(ob, j);
      const Item item = internal::ResolveDraw(impl_, run, ob.epoch, draw);
      uint8_t* dst = b.images.data() + image_bytes * j;
      MM_RETURN_NOT_OK(
          internal::TransformImage(set, run, ob.epoch, item.sample, b.width, b.height, dst));
      b.indices[j] = item.sample;
      b.caption[j] = item.caption;
      b.keys[j].assign(set.Key(item.sample));
      b.set_index[j] = shard_set_[draw.shard];
      ob.tokens[j] = set.Tokens(item.sample, item.caption);
      b.lengths[j] = static_cast<int32_t>(ob.tokens[j].size());
    }
    return Status::OK();
  }

  // Once every row is decoded: the token rows padded to the longest ([B, L], L >= 1), or for a
  // set without a tokenizer the caption texts (L = 0), read in one thread.
  Status AssembleTokens(OpenBatch& ob) const {
    Batch& b = *ob.batch;
    const int B = b.size;
    int max_len = 1;
    for (int j = 0; j < B; ++j) max_len = std::max(max_len, b.lengths[j]);
    if (text_) {  // text only: no ids, L = 0
      max_len = 0;
      b.texts.resize(static_cast<size_t>(B));
      for (int j = 0; j < B; ++j) {
        MM_ASSIGN_OR_RETURN(std::vector<std::string> captions, text_->Captions(b.indices[j]));
        if (b.caption[j] < 0 || static_cast<size_t>(b.caption[j]) >= captions.size()) {
          return Status::Corruption("sample " + std::to_string(b.indices[j]) + " has no caption " +
                                    std::to_string(b.caption[j]));
        }
        b.texts[j] = std::move(captions[static_cast<size_t>(b.caption[j])]);
      }
    } else {
      b.texts.clear();
    }
    b.max_length = max_len;
    b.tokens.assign(static_cast<size_t>(B) * max_len, set_->info().pad_id);
    for (int j = 0; j < B; ++j) {
      if (!ob.tokens[j].empty()) {
        std::memcpy(b.tokens.data() + static_cast<size_t>(j) * max_len, ob.tokens[j].data(),
                    ob.tokens[j].size() * sizeof(int32_t));
      }
    }
    // Everything above was read from the mappings: none changed meanwhile (shard.h).
    for (int j = 0; j < B; ++j) MM_RETURN_NOT_OK(impl_.CheckIntact(b.indices[j]));
    return Status::OK();
  }

  std::shared_ptr<const ShardSet> set_;
  std::unique_ptr<SampleText> text_;  // only for a set without a tokenizer (Batch::texts)
  const internal::ShardSetImpl& impl_;
  const LoaderOptions options_;
  const internal::ResolvedOrder order_;
  const std::shared_ptr<const internal::OrderShape> shape_;
  const int64_t items_;
  const int64_t global_batch_;
  const std::vector<int32_t> shard_set_;  // [shards] the mixture's set of each shard
  std::shared_ptr<LoaderShared> shared_;
  std::vector<std::thread> threads_;
  std::unique_ptr<internal::Prefetcher> prefetcher_;  // a remote set only
  const pid_t creator_ = ::getpid();                  // the process whose threads decode
  bool started_ = false;                              // consumer thread only
  int64_t next_deliver_ = 0;                          // consumer thread only
};

Status CheckTransformOptions(const LoaderOptions& o) {
  if ((o.output_height == 0) != (o.output_width == 0)) {
    return Status::InvalidArgument("output_height and output_width: give both or neither");
  }
  for (int side : {o.output_height, o.output_width}) {
    if (side < 0 || side > kMaxOutputSide) {
      return Status::InvalidArgument("output side " + std::to_string(side) + " outside [1, " +
                                     std::to_string(kMaxOutputSide) + "]");
    }
  }
  if (!(o.center_crop_ratio > 0.0 && o.center_crop_ratio <= 1.0)) {
    return Status::InvalidArgument("center_crop_ratio must be in (0, 1]");
  }
  return Status::OK();
}

// A mixture's batches must have one shape: sets stored at other sizes need an output size (each
// sample's window is then resized to it); the stored sizes themselves may differ.
Status CheckOutputShape(const internal::ShardSetImpl& set, const LoaderOptions& o) {
  const int p = set.PartOfOtherImageSize();
  if (p < 0 || o.output_height > 0) return Status::OK();
  const auto& parts = set.parts();
  const auto size = [](const SetInfo& i) {
    return std::to_string(i.image_width) + "x" + std::to_string(i.image_height);
  };
  return Status::InvalidArgument(
      "mixture: " + parts[p].location.text + " is stored at " + size(parts[p].info) + ", " +
      parts[0].location.text + " at " + size(parts[0].info) +
      ": give an output size (output_height/output_width; Python output_size=(H, W)) so that "
      "every batch has one shape");
}

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const ShardSet> set,
                                               const LoaderOptions& options) {
  if (!set) return Status::InvalidArgument("Loader::Create: no shard set");
  if (options.batch_size < 1) return Status::InvalidArgument("batch_size must be >= 1");
  if (options.world_size < 1) return Status::InvalidArgument("world_size must be >= 1");
  if (options.rank < 0 || options.rank >= options.world_size) {
    return Status::InvalidArgument("rank " + std::to_string(options.rank) + " outside [0, " +
                                   std::to_string(options.world_size) + ")");
  }
  if (options.num_threads < 0 || options.num_threads > kMaxLoaderThreads) {
    return Status::InvalidArgument("num_threads " + std::to_string(options.num_threads) +
                                   " outside [1, " + std::to_string(kMaxLoaderThreads) +
                                   "] (0: one per CPU available)");
  }
  if (options.prefetch_batches < 1 || options.prefetch_batches > kMaxPrefetchBatches) {
    return Status::InvalidArgument("prefetch_batches " + std::to_string(options.prefetch_batches) +
                                   " outside [1, " + std::to_string(kMaxPrefetchBatches) + "]");
  }
  MM_RETURN_NOT_OK(CheckTransformOptions(options));
  const internal::ShardSetImpl& impl = set->impl();
  MM_RETURN_NOT_OK(CheckOutputShape(impl, options));
  MM_ASSIGN_OR_RETURN(internal::ResolvedOrder order, internal::ResolveOrder(impl, options));
  const auto shape = internal::MakeOrderShape(impl, options.caption_mode);
  MM_RETURN_NOT_OK(internal::CheckOrderSize(*shape));  // before any order is allocated
  const int64_t items = internal::EpochItems(*shape);
  if (items == 0) return Status::InvalidArgument("the shard set is empty");
  const int64_t global = static_cast<int64_t>(options.world_size) * options.batch_size;
  if (options.drop_last && items < global) {
    return Status::InvalidArgument("drop_last with " + std::to_string(items) +
                                   " items leaves no batch of world_size * "
                                   "batch_size = " +
                                   std::to_string(global));
  }
  if (!options.even_batches && options.drop_last) {
    return Status::InvalidArgument(
        "even_batches=false hands out the epoch's last, partial global batch unpadded; with "
        "drop_last=true that batch is dropped: give drop_last=false (exact evaluation) or keep "
        "even_batches");
  }
  LoaderOptions resolved = options;
  if (resolved.num_threads == 0) resolved.num_threads = DefaultLoaderThreads();
  auto loader = std::make_unique<LoaderImpl>(std::move(set), resolved, order);
  MM_RETURN_NOT_OK(loader->StartWorkers());  // on failure ~LoaderImpl joins those started
  MM_RETURN_NOT_OK(loader->StartPrefetcher());
  return std::unique_ptr<Loader>(std::move(loader));
}

}  // namespace mm::reader
