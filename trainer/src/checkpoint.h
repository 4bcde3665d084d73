// checkpoint.h: everything needed to continue a run exactly, in one file written atomically.
//
// A checkpoint is a LibTorch archive (torch::serialize, the zip format torch.jit.load reads)
// holding: "model" (parameters by name), "optimizer" (AdamW moments and step counts),
// "scaler" (loss scale and growth tracker), "meta" (step, epoch, early-stopping state),
// "loader_state" (mm::reader::LoaderState::ToJson), "config" (the run's settings as JSON,
// the model's shape among them), "rng" (the CPU generator's state).
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
  std::string loader_state;  // LoaderState::ToJson
  std::string config;        // run settings, JSON
  std::string model_config;  // ModelConfig::ToJson
};

/// Throws std::runtime_error naming the path when writing or renaming fails.
void SaveCheckpoint(const std::string& path, Coca& model, torch::optim::Optimizer& optimizer,
                    const LossScaler& scaler, const CheckpointMeta& meta);

/// Reads only the meta part (to rebuild the model with the saved shape before loading).
CheckpointMeta ReadCheckpointMeta(const std::string& path);

/// Loads parameters, optimizer, scaler and RNG into existing objects of the same shape.
/// Throws std::runtime_error / c10::Error on a missing file or a shape mismatch.
CheckpointMeta LoadCheckpoint(const std::string& path, Coca& model,
                              torch::optim::Optimizer& optimizer, LossScaler& scaler);

}  // namespace mm::train
