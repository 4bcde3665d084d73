// amp.h: mixed precision: an autocast scope and a dynamic loss scaler.
//
// bf16: autocast on CPU (at::autocast CPU dtype bfloat16) or CUDA; no loss scaling needed
// (bfloat16 has float32's exponent range).
// fp16: autocast on CUDA plus dynamic loss scaling that behaves as torch.amp.GradScaler, with
// its defaults: initial scale 2^16, growth 2 every 2000 finite steps in a row, backoff 0.5 on
// inf/NaN (the step is then skipped). It runs GradScaler's own kernels
// (at::_amp_foreach_non_finite_check_and_unscale_, at::_amp_update_scale_) where this LibTorch
// has them for the device (CUDA; CPU from torch 2.3 on), else the same arithmetic in tensor
// ops (Debian's CPU LibTorch 1.13), which the tests compare with GradScaler's rules.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "config.h"  // AmpMode

namespace mm::train {

/// Throws std::invalid_argument when `mode` cannot run on `device` (fp16 on CPU).
void CheckAmpSupported(AmpMode mode, const torch::Device& device);

/// Enables autocast for `device` while alive (forward pass only, as torch.autocast is used).
/// Restores the previous state and clears the autocast weight cache on exit.
class AutocastScope {
 public:
  AutocastScope(AmpMode mode, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

/// Dynamic loss scaler (GradScaler's algorithm). Disabled scalers are identities.
/// State: scale [] float32, growth_tracker [] int32, both on the training device.
/// Per optimizer step: Scale(loss).backward(); Unscale(params); StepIsFinite() ? step : skip;
/// Update(). Update after a step with inf/NaN: scale *= backoff_factor, tracker = 0; after a
/// finite one: tracker += 1, and when it reaches growth_interval, scale *= growth_factor (kept
/// only if finite) and tracker = 0 (GradScaler.update, torch/amp/grad_scaler.py).
class LossScaler {
 public:
  LossScaler(bool enabled, const torch::Device& device, double init_scale = 65536.0,
             double growth_factor = 2.0, double backoff_factor = 0.5,
             int64_t growth_interval = 2000);
  bool enabled() const { return enabled_; }
  /// Whether Unscale/Update run GradScaler's kernels (else the tensor-op equivalent).
  bool uses_amp_kernels() const { return kernels_; }
  /// For tests: run the tensor-op equivalent even where the kernels exist.
  void ForceTensorOps() { kernels_ = false; }
  /// loss * scale (identity when disabled).
  torch::Tensor Scale(const torch::Tensor& loss) const;
  /// Divides the gradients by the scale in place and records whether any is inf/NaN.
  /// Call once per optimizer step, after backward (and after DDP reduction).
  void Unscale(const std::vector<torch::Tensor>& params);
  /// true when the last Unscale saw no inf/NaN (the optimizer step may run).
  bool StepIsFinite() const;
  /// Grows or backs off the scale after a step (skipped or not).
  void Update();
  double scale() const;
  /// For checkpoints: {scale, growth_tracker}.
  std::vector<torch::Tensor> State() const;
  void LoadState(const std::vector<torch::Tensor>& state);

 private:
  bool enabled_;
  bool kernels_ = false;
  double growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  torch::Tensor scale_, growth_tracker_, found_inf_;
};

}  // namespace mm::train
