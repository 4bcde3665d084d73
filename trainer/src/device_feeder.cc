#include "device_feeder.h"

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

namespace mm::train {

/// The CUDA half (see the header): the pin thread and its queue, the side stream, and the step
/// whose copies are in flight.
struct DeviceFeeder::Cuda {
  struct Pinned {
    HostBatch host;
    reader::LoaderState state;  // the loader's position right after this batch
  };
  struct InFlight {
    std::vector<DeviceBatch> batches;  // allocated and filled on the side stream
    std::vector<HostBatch> hosts;      // their pinned sources, alive until handed out
    reader::LoaderState state;
    c10::Event ready{c10::DeviceType::CUDA};  // recorded on the side stream after the copies
  };

  Cuda(BatchStream& stream, const torch::Device& device, int64_t max_tokens, size_t capacity)
      : impl(c10::DeviceType::CUDA),
        side(impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false)),
        capacity_(capacity) {
    thread =
        std::thread([this, &stream, device, max_tokens] { PinLoop(stream, device, max_tokens); });
  }

  ~Cuda() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }

  /// The pin thread: reader batches -> pinned host batches, at most `capacity_` waiting.
  void PinLoop(BatchStream& stream, const torch::Device& device, int64_t max_tokens) {
    try {
      impl.setDevice(device);  // page-locked allocations belong to this device's context
      for (;;) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [this] { return stop || queue.size() < capacity_; });
          if (stop) return;
        }
        double unused_wait = 0;
        reader::BatchPtr b = stream.Next(&unused_wait);
        Pinned p{ToHost(*b, max_tokens, /*pinned=*/true), stream.state()};
        b.reset();  // the reader's buffer goes back to its pool
        {
          std::lock_guard<std::mutex> lock(mu);
          queue.push_back(std::move(p));
        }
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      error = std::current_exception();
      cv.notify_all();
    }
  }

  /// `k` pinned batches, waiting for them when `block` (else nullopt when fewer are ready).
  /// Rethrows the pin thread's error.
  std::optional<std::vector<Pinned>> Take(size_t k, bool block) {
    std::unique_lock<std::mutex> lock(mu);
    if (block) cv.wait(lock, [&] { return error || queue.size() >= k; });
    if (queue.size() < k) {
      if (error) std::rethrow_exception(error);
      return std::nullopt;
    }
    std::vector<Pinned> out;
    for (size_t i = 0; i < k; ++i) {
      out.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    lock.unlock();
    cv.notify_all();
    return out;
  }

  /// Enqueues the copies of `pinned` on the side stream; they become `next`.
  void Launch(std::vector<Pinned> pinned, const torch::Device& device) {
    InFlight f;
    {
      c10::StreamGuard on_side(side);
      for (auto& p : pinned) {
        f.batches.push_back(ToDevice(p.host, device, /*non_blocking=*/true));
        f.hosts.push_back(std::move(p.host));
      }
      f.ready.record(side);
    }
    f.state = pinned.back().state;
    next = std::move(f);
  }

  c10::impl::VirtualGuardImpl impl;
  c10::Stream side;
  std::optional<InFlight> next;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Pinned> queue;  // guarded by mu
  bool stop = false;         // guarded by mu
  std::exception_ptr error;  // guarded by mu
  std::thread thread;

 private:
  size_t capacity_;
};

DeviceFeeder::DeviceFeeder(BatchStream& stream, const torch::Device& device, int64_t max_tokens,
                           int micro_per_step)
    : stream_(stream),
      device_(device),
      max_tokens_(max_tokens),
      micro_(micro_per_step),
      state_(stream.state()) {
  if (device_.is_cuda()) {
    // Two steps pinned ahead besides the one in flight.
    cuda_ = std::make_unique<Cuda>(stream_, device_, max_tokens_, 2 * static_cast<size_t>(micro_));
  }
}

DeviceFeeder::~DeviceFeeder() = default;

std::vector<DeviceBatch> DeviceFeeder::NextStep(double* wait_s) {
  if (!cuda_) {
    std::vector<DeviceBatch> micro;
    for (int k = 0; k < micro_; ++k) {
      reader::BatchPtr b = stream_.Next(wait_s);  // back to the loader's pool at scope end
      micro.push_back(ToDevice(*b, device_, max_tokens_));
      state_ = stream_.state();
    }
    return micro;
  }
  Cuda& c = *cuda_;
  if (!c.next) {  // the first step, or the pin thread fell behind: no overlap this time
    const auto t0 = Clock::now();
    auto pinned = c.Take(micro_, /*block=*/true);
    *wait_s += Seconds(t0, Clock::now());
    c.Launch(std::move(*pinned), device_);
  }
  Cuda::InFlight current = std::move(*c.next);
  c.next.reset();
  const c10::Stream compute = c.impl.getStream(device_);
  current.ready.block(compute);  // the step's kernels wait for the copies, the host does not
  for (auto& d : current.batches) {
    d.images.record_stream(compute);
    d.tokens.record_stream(compute);
    d.lengths.record_stream(compute);
  }
  state_ = current.state;
  // The next step's copies start now, beside this step's compute, if its batches are pinned.
  if (auto pinned = c.Take(micro_, /*block=*/false)) c.Launch(std::move(*pinned), device_);
  return std::move(current.batches);
}

reader::LoaderState DeviceFeeder::state() const { return state_; }

}  // namespace mm::train
