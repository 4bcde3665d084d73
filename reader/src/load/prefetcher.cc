// prefetcher.cc: see prefetcher.h.
#include "load/prefetcher.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include "remote/remote_shards.h"
#include "set/shard_set_impl.h"

namespace mm::reader::internal {

namespace {

constexpr auto kYieldPoll = std::chrono::milliseconds(200);

}  // namespace

Prefetcher::Prefetcher(std::shared_ptr<const ShardSet> set, OrderFor order_for, int64_t limit)
    : set_(std::move(set)),
      order_for_(std::move(order_for)),
      limit_(limit),
      cache_(set_->impl().cache_dir()) {}

Prefetcher::~Prefetcher() { Stop(); }

Status Prefetcher::Start(int threads) {
  if (cache_ && yielder_ < 0) yielder_ = cache_->AddYielder([this] { Yield(); });
  for (int t = 0; t < threads; ++t) {
    try {
      threads_.emplace_back([this] { Work(); });
    } catch (const std::system_error& e) {
      return Status::IOError("loader: the system refused download thread " + std::to_string(t + 1) +
                             " of " + std::to_string(threads) + " (" + e.what() + ")");
    }
  }
  return Status::OK();
}

void Prefetcher::Stop() {
  if (cache_ && yielder_ >= 0) {
    cache_->RemoveYielder(yielder_);  // no Yield() runs or starts after this returns
    yielder_ = -1;
  }
  std::vector<ShardPin> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (auto& [shard, pin] : held_) drop.push_back(std::move(pin));
    held_.clear();
    drop.insert(drop.end(), retired_.begin(), retired_.end());
    retired_.clear();
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  drop.clear();  // a download waiting for cache room may now finish
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Prefetcher::Reset(const Run& run) {
  const std::shared_ptr<const EpochOrder> order = order_for_(run.seed, run.epoch);
  const std::shared_ptr<const EpochOrder> next = order_for_(run.seed, run.epoch + 1);
  const int64_t items = order->size();
  int64_t end = run.start + run.batches * run.global_batch;  // past items: padding
  if (!run.wraps) end = std::min(end, items);
  std::vector<Window> windows;
  const std::vector<OrderWindow> epoch_windows = order->Windows();
  for (int64_t shift = 0; items > 0 && shift < end; shift += items) {
    for (const OrderWindow& w : epoch_windows) {
      if (w.end + shift <= run.start || w.begin + shift >= end) continue;
      windows.push_back(Window{w.begin + shift, w.end + shift, w.shards, 0, 0});
    }
  }
  const size_t run_windows = windows.size();
  for (const OrderWindow& w : next->Windows()) {
    windows.push_back(Window{end + w.begin, end + w.end, w.shards, 0, 0});
  }
  std::vector<int64_t> last_use(set_->num_shards(), -1);
  for (size_t i = 0; i < windows.size(); ++i) {
    for (uint32_t k : windows[i].shards) {
      windows[i].bytes += set_->info().shards[k].bytes;
      last_use[k] = static_cast<int64_t>(i);
    }
  }
  std::vector<ShardPin> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(retired_);
    for (auto& [shard, pin] : held_) retired_.push_back(std::move(pin));  // until the
    held_.clear();  // new run holds its first window: shards in both stay open meanwhile
    failed_.clear();
    demanded_.clear();
    finished_.clear();
    windows_.swap(windows);
    last_use_.swap(last_use);
    run_windows_ = run_windows;
    run_ = run;
    low_ = 0;
    low_batch_ = 0;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

size_t Prefetcher::WindowOf(int64_t pos) const {
  auto after = std::upper_bound(windows_.begin(),
                                windows_.begin() + static_cast<std::ptrdiff_t>(run_windows_), pos,
                                [](int64_t p, const Window& w) { return p < w.begin; });
  return after == windows_.begin() ? 0 : static_cast<size_t>(after - windows_.begin()) - 1;
}

// The windows from low_ whose bytes fit in the limit together (low_ always) bound what may be
// fetched: first the shards waiting batches need, then the windows' shards in order.
size_t Prefetcher::Horizon(size_t low) const {
  const int64_t cap = limit_ > 0 ? limit_ : kUnboundedAheadBytes;
  size_t horizon = low;
  for (int64_t bytes = 0; horizon < windows_.size(); ++horizon) {
    bytes += windows_[horizon].bytes;
    if (horizon > low && bytes > cap) break;
  }
  return horizon;
}

bool Prefetcher::NextTask(size_t* window, uint32_t* shard) {
  if (windows_.empty()) return false;
  if (cache_ && cache_->MustYield()) return false;  // an older wait of another process first
  const size_t horizon = Horizon(low_);
  auto wanted = [&](uint32_t k) {
    return !held_.count(k) && !in_flight_.count(k) && !failed_.count(k);
  };
  for (auto it = demanded_.begin(); it != demanded_.end();) {
    const uint32_t k = *it;
    if (!wanted(k) || last_use_[k] < static_cast<int64_t>(low_)) {
      it = demanded_.erase(it);
      continue;
    }
    size_t w = low_;
    while (w < horizon && std::find(windows_[w].shards.begin(), windows_[w].shards.end(), k) ==
                              windows_[w].shards.end()) {
      ++w;
    }
    if (w < horizon) {
      demanded_.erase(it);
      *window = w;
      *shard = k;
      return true;
    }
    ++it;
  }
  for (size_t w = low_; w < horizon; ++w) {
    Window& win = windows_[w];
    while (win.handed_out < win.shards.size()) {
      const uint32_t k = win.shards[win.handed_out++];
      if (wanted(k)) {
        *window = w;
        *shard = k;
        return true;
      }
    }
  }
  return false;
}

void Prefetcher::Work() {
  for (;;) {
    size_t window = 0;
    uint32_t shard = 0;
    uint64_t gen = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const bool woken =
          work_cv_.wait_for(lock, kYieldPoll, [&] { return stop_ || NextTask(&window, &shard); });
      if (stop_) return;
      if (!woken) {  // nothing to fetch: another process may wait for what this one holds
        const bool yield = cache_ && cache_->MustYield();
        lock.unlock();
        if (yield) Yield();
        continue;
      }
      in_flight_.insert(shard);
      gen = run_.gen;
    }
    Result<ShardPin> pin = set_->PinShard(shard);
    std::vector<ShardPin> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(shard);
      if (!pin.ok()) {
        if (gen == run_.gen && !stop_) failed_[shard] = pin.status();
      } else if (!stop_ && last_use_[shard] >= static_cast<int64_t>(low_) && !held_.count(shard)) {
        held_[shard] = pin.MoveValue();
      } else {
        drop.push_back(pin.MoveValue());
      }
      if (!retired_.empty() && low_ < windows_.size() &&
          std::all_of(windows_[low_].shards.begin(), windows_[low_].shards.end(),
                      [&](uint32_t k) { return held_.count(k) || failed_.count(k); })) {
        drop.insert(drop.end(), retired_.begin(), retired_.end());
        retired_.clear();
      }
    }
    ready_cv_.notify_all();
    work_cv_.notify_all();
  }
}

Result<std::vector<ShardPin>> Prefetcher::Acquire(uint64_t gen,
                                                  const std::vector<uint32_t>& shards) {
  std::unique_lock<std::mutex> lock(mu_);
  auto replaced = [&] { return stop_ || gen != run_.gen; };
  if (replaced()) return Status::Internal("loader: the run was replaced or stopped");
  bool asked = false;
  for (uint32_t s : shards) {
    if (!held_.count(s) && !in_flight_.count(s) && !failed_.count(s)) {
      demanded_.push_back(s);
      asked = true;
    }
  }
  if (asked) work_cv_.notify_all();
  ready_cv_.wait(lock, [&] {
    return replaced() || std::all_of(shards.begin(), shards.end(), [&](uint32_t s) {
             return held_.count(s) || failed_.count(s);
           });
  });
  if (replaced()) return Status::Internal("loader: the run was replaced or stopped");
  std::vector<ShardPin> pins;
  for (uint32_t s : shards) {
    auto failed = failed_.find(s);
    if (failed != failed_.end()) return failed->second;
  }
  for (uint32_t s : shards) pins.push_back(Lend(s, held_[s]));
  return pins;
}

// Caller holds mu_. The lent pin's deleter runs in the decode thread that drops it, without mu_.
ShardPin Prefetcher::Lend(uint32_t shard, const ShardPin& pin) {
  ++busy_[shard];
  auto* lent = new ShardPin(pin);
  return ShardPin(std::shared_ptr<const void>(lent, [this, shard, lent](const void*) {
    delete lent;
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_[shard] == 0) busy_.erase(shard);
  }));
}

void Prefetcher::Yield() {
  std::vector<ShardPin> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = held_.begin(); it != held_.end();) {
      if (busy_.count(it->first)) {
        ++it;
        continue;
      }
      drop.push_back(std::move(it->second));
      it = held_.erase(it);
    }
    drop.insert(drop.end(), retired_.begin(), retired_.end());
    retired_.clear();
    for (size_t w = low_; w < windows_.size(); ++w) windows_[w].handed_out = 0;  // fetch again
  }
  drop.clear();  // outside mu_: the last pin of a shard unmaps it and wakes reservations
  work_cv_.notify_all();
}

// A shard of the windows left behind stays held only when a window within the new horizon
// reads it again. One read again later (the wrap-around of a padded last batch, the next
// epoch's windows) is dropped now and fetched again when its window comes (from the cache, or
// downloaded anew if it was evicted meanwhile): holding it would take cache room the windows
// in between were promised (their bytes alone decide the horizon).
void Prefetcher::ReleaseBefore(size_t window, std::vector<ShardPin>* drop) {
  const size_t horizon = Horizon(window);
  auto needed_soon = [&](uint32_t k) {
    for (size_t w = window; w < horizon; ++w) {
      const std::vector<uint32_t>& in = windows_[w].shards;
      if (std::find(in.begin(), in.end(), k) != in.end()) return true;
    }
    return false;
  };
  for (size_t w = low_; w < window && w < windows_.size(); ++w) {
    for (uint32_t k : windows_[w].shards) {
      auto held = held_.find(k);
      if (held != held_.end() && !needed_soon(k)) {
        drop->push_back(std::move(held->second));
        held_.erase(held);
      }
    }
  }
}

void Prefetcher::Finish(uint64_t gen, int64_t k) {
  std::vector<ShardPin> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (gen != run_.gen || stop_) return;
    finished_.insert(k);
    while (finished_.count(low_batch_)) finished_.erase(low_batch_++);
    const size_t low =
        low_batch_ < run_.batches
            ? WindowOf(run_.start + low_batch_ * run_.global_batch + run_.rank_offset)
            : run_windows_;
    if (low <= low_) return;
    ReleaseBefore(low, &drop);
    low_ = low;
  }
  work_cv_.notify_all();
}

}  // namespace mm::reader::internal
