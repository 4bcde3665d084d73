// device_feeder.h: each optimizer step's micro-batches, on the training device.
//
// CPU: the step's batches are read and converted when asked for (BatchStream + ToDevice), as
// a plain loop does.
// CUDA, the way a GPU is kept busy (NVIDIA Apex's data_prefetcher, DataLoader's pin-memory
// thread, FFCV's ToDevice):
//   1. a pin thread takes the reader's batches as they come and copies each into page-locked
//      (pinned) host memory, up to two steps ahead;
//   2. when the trainer takes step N's batches, step N+1's are already pinned: their
//      host-to-device copies (and the uint8 -> float normalisation) are enqueued at once on a
//      side stream, so they run while step N computes on the current stream;
//   3. step N+1's batches are handed out after the current stream has been made to wait for
//      the copy's event (no host synchronisation), and their memory is recorded on the
//      current stream (Tensor::record_stream) so the caching allocator does not reuse it while
//      the step still reads it.
// When the pin thread is behind, the copy is issued when the trainer asks (no overlap), and
// the time it blocks is the step's data wait.
//
// Streams and events go through c10's device-generic interfaces (c10::Stream, c10::Event,
// c10::impl::VirtualGuardImpl): no CUDA header, so this compiles against Debian's CPU
// LibTorch 1.13 as against pip's CUDA torch 2.x.
//
// Checkpoints: the reader runs ahead of training, so the loader state a checkpoint stores is
// the one saved right after the last batch handed to the trainer (state()), not the reader's.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "data.h"

namespace mm::train {

class DeviceFeeder {
 public:
  /// `stream` (restored from a checkpoint first, if any) is read by this feeder only from now
  /// on (on CUDA by its pin thread); it must outlive the feeder. `micro_per_step`: K.
  /// Throws std::runtime_error when the device cannot be used.
  DeviceFeeder(BatchStream& stream, const torch::Device& device, int64_t max_tokens,
               int micro_per_step);
  /// Stops and joins the pin thread.
  ~DeviceFeeder();
  DeviceFeeder(const DeviceFeeder&) = delete;
  DeviceFeeder& operator=(const DeviceFeeder&) = delete;

  /// The next step's K micro-batches, ready for the current stream. Adds the seconds blocked
  /// waiting for them to *wait_s. Throws what the reader threw (std::runtime_error).
  std::vector<DeviceBatch> NextStep(double* wait_s);

  /// The loader's position after the last batch NextStep handed out.
  reader::LoaderState state() const;

  /// Whether copies are overlapped (CUDA: pinned memory, side stream).
  bool overlapped() const { return cuda_ != nullptr; }

 private:
  struct Cuda;  // pin thread, queue, side stream, the step in flight

  BatchStream& stream_;
  torch::Device device_;
  int64_t max_tokens_;
  int micro_;
  reader::LoaderState state_;
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace mm::train
