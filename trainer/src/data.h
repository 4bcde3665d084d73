// data.h: the reader's batches as LibTorch tensors, the one bridge between mm_reader and the
// model: reader Status -> exception, reader::Batch -> DeviceBatch, a loader -> an endless stream
// of micro-batches across epochs.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mm/reader.h"

namespace mm::train {

using Clock = std::chrono::steady_clock;

/// Seconds from a to b.
inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The one place a reader Status becomes an exception: std::runtime_error("what: status").
void ThrowIfError(const Status& st, const std::string& what);
template <typename T>
T Take(Result<T> r, const std::string& what) {
  ThrowIfError(r.status(), what);
  return std::move(r).value();
}

/// What makes a training set itself, as one-line JSON: its tokenizer (SHA-256, vocabulary
/// size), its sample count and an XXH3-64 over its shards' names, sample counts and file
/// checksums (index.json's). The same set moved to another directory keeps its identity; a set
/// with another tokenizer or other shards does not.
std::string SetIdentity(const reader::SetInfo& info);
/// A SetIdentity in words: "326 samples, shards XXH3-64 2039daa1a0c67245, tokenizer SHA-256
/// fefb02b667a6...".
std::string DescribeSet(const std::string& identity);

/// A batch as tensors on the training device.
struct DeviceBatch {
  torch::Tensor images;          // [B,3,H,W] float32, normalised with CLIP's mean and std
  torch::Tensor tokens;          // [B,L] int64, L = min(batch's longest caption, max_tokens)
  torch::Tensor lengths;         // [B] int64 in [1, L]
  std::vector<int64_t> indices;  // [B] global sample index
  int64_t caption_tokens = 0;    // predicted tokens: sum(max(len-1, 0))
};

/// A reader batch copied out of the reader's buffer (which goes back to its pool), still on the
/// host: what crosses to the device.
struct HostBatch {
  torch::Tensor images;          // [B,H,W,3] uint8
  torch::Tensor tokens;          // [B,L] int64, L = min(batch's longest caption, max_tokens)
  torch::Tensor lengths;         // [B] int64 in [1, L]
  std::vector<int64_t> indices;  // [B] global sample index
  int64_t caption_tokens = 0;    // predicted tokens: sum(max(len-1, 0))
};

/// Copies `b` out of the reader's buffer, captions cut to `max_tokens` (the model's
/// position-table length). `pinned`: into page-locked memory, so that a copy to a CUDA device
/// can run asynchronously (needs a CUDA LibTorch).
HostBatch ToHost(const reader::Batch& b, int64_t max_tokens, bool pinned);

/// `h` on `device`: uint8 crosses (4x fewer bytes than float), then is normalised there.
/// `non_blocking`: asynchronous copies on the current stream (from pinned memory), as
/// Tensor.to(non_blocking=True).
DeviceBatch ToDevice(const HostBatch& h, const torch::Device& device, bool non_blocking);

/// ToDevice(ToHost(b, max_tokens, false), device, false).
DeviceBatch ToDevice(const reader::Batch& b, const torch::Device& device, int64_t max_tokens);

/// This rank's stream of micro-batches across epochs. Not thread-safe.
class BatchStream {
 public:
  explicit BatchStream(std::unique_ptr<reader::Loader> loader) : loader_(std::move(loader)) {}
  /// Next batch, starting the next epoch at the end of one. Adds the seconds blocked to
  /// *wait_s. Throws when the reader fails or an epoch yields no batch.
  reader::BatchPtr Next(double* wait_s);
  reader::LoaderState state() const { return loader_->state(); }
  /// Continues from a checkpoint's LoaderState::ToJson. With same_set false (a --resume-override
  /// onto another training set) the saved positions would name other items, so only the epoch is
  /// kept: the loader starts that epoch of the new set from its beginning. Returns the epoch.
  int64_t Restore(const std::string& json, bool same_set = true);
  reader::Loader& loader() { return *loader_; }

 private:
  std::unique_ptr<reader::Loader> loader_;
  int64_t epoch_ = 0;
};

}  // namespace mm::train
