// checkpoint.h: everything needed to continue a run exactly, in one file written atomically
// and checked before it is trusted.
//
// File layout: a LibTorch archive (torch::serialize, the zip format torch.jit.load and
// torch.load read; both ignore what follows it) and then one 73-byte text line, the trailer:
//   "mmtrain-checkpoint 1 xxh3-64 <16 hex digits> bytes <20 decimal digits>\n"
// giving the XXH3-64 (mm/internal/checksum.h, as index.json's shard checksums) and the length
// of the archive before it.
// A file without that line, of another length, or whose archive hashes otherwise is refused,
// naming the file, before LibTorch parses a byte of it (LibTorch's reader skips the zip CRCs:
// corrupted tensor bytes would load silently).
//
// The archive holds: "model" (parameters by name), "optimizer" (AdamW moments and step
// counts), "scaler" (loss scale and growth tracker), "meta/..." (step, epoch, early-stopping
// state, loader state, the run's config and model shape as JSON, the training set's
// identity), "rng" (the CPU generator's state).
// Writes go to PATH.tmp.<pid>, are fsync'ed, then renamed over PATH: a crash leaves the old
// checkpoint or the new one, never half of one.
#pragma once

#include <torch/torch.h>

#include <string>

#include "amp.h"
#include "model.h"

namespace mm::train {

struct CheckpointMeta {
  int64_t step = 0;        // optimizer steps done
  int64_t epoch = 0;       // loader epoch of the next batch
  double best_val = 1e30;  // best validation captioning loss so far
  int64_t evals_since_best = 0;
  std::string loader_state;     // LoaderState::ToJson
  std::string config;           // TrainConfig::ToJson
  std::string model_config;     // ModelConfig::ToJson
  std::string shards_identity;  // SetIdentity(--shards): JSON
  int64_t world_size = 1;       // ranks that trained it (the global batch is B x K x this)
};

/// Throws std::runtime_error naming the path when writing or renaming fails.
void SaveCheckpoint(const std::string& path, Coca& model, torch::optim::Optimizer& optimizer,
                    const LossScaler& scaler, const CheckpointMeta& meta);

/// A checkpoint file read into memory and checked (trailer, length, XXH3-64) before anything
/// parses it. Immutable after Read.
class Checkpoint {
 public:
  /// Throws std::runtime_error naming `path`: missing, not a regular file (a FIFO is refused
  /// without blocking), larger than half of physical memory, not an mmtrain checkpoint (no
  /// trailer), cut short or damaged (length or checksum mismatch), or unparsable.
  static Checkpoint Read(const std::string& path);

  const std::string& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }

  /// Loads parameters, optimizer, scaler and the CPU RNG into objects of the saved shape.
  /// Throws c10::Error / std::runtime_error on a shape mismatch.
  void Restore(Coca& model, torch::optim::Optimizer& optimizer, LossScaler& scaler) const;

 private:
  std::string path_;
  std::string archive_;  // the LibTorch archive, trailer removed, checksum verified
  CheckpointMeta meta_;
};

}  // namespace mm::train
