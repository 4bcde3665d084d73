#include "amp.h"

#include <ATen/autocast_mode.h>

#include <cmath>
#include <stdexcept>

namespace mm::train {

void CheckAmpSupported(AmpMode mode, const torch::Device& device) {
  if (mode == AmpMode::kFp16 && !device.is_cuda()) {
    throw std::invalid_argument(
        "--amp fp16 needs a CUDA device (CPU autocast supports bfloat16 only): use --amp bf16 "
        "or --amp off");
  }
}

// The autocast API changed in 2.4 (device-type-generic setters); older versions, 1.13
// included, have per-device functions.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define MM_AUTOCAST_GENERIC 1
#endif

AutocastScope::AutocastScope(AmpMode mode, const torch::Device& device) {
  if (mode == AmpMode::kOff) return;
  active_ = true;
  cuda_ = device.is_cuda();
  const at::ScalarType dtype = mode == AmpMode::kBf16 ? at::kBFloat16 : at::kHalf;
#ifdef MM_AUTOCAST_GENERIC
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
  prev_enabled_ = at::autocast::is_autocast_enabled(type);
  prev_dtype_ = at::autocast::get_autocast_dtype(type);
  at::autocast::set_autocast_enabled(type, true);
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (cuda_) {
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef MM_AUTOCAST_GENERIC
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(type, prev_enabled_);
  at::autocast::set_autocast_dtype(type, prev_dtype_);
#else
  if (cuda_) {
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
  } else {
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
#endif
}

namespace {

/// Whether GradScaler's in-place kernels are registered for `device` in this LibTorch: CUDA
/// always; CPU only from torch 2.3 (1.13 raises "Could not run ... with arguments from the
/// 'CPU' backend"). Tried once on scalars.
bool AmpKernelsRun(const torch::Device& device) {
  if (device.is_cuda()) return true;
  try {
    auto f = torch::TensorOptions().dtype(torch::kFloat).device(device);
    auto scale = torch::ones({}, f), found = torch::zeros({}, f);
    auto tracker = torch::zeros({}, f.dtype(torch::kInt));
    std::vector<torch::Tensor> grads{torch::ones({1}, f)};
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, scale);
    at::_amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2000);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

LossScaler::LossScaler(bool enabled, const torch::Device& device, double init_scale,
                       double growth_factor, double backoff_factor, int64_t growth_interval)
    : enabled_(enabled),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
  auto f = torch::TensorOptions().dtype(torch::kFloat).device(device);
  scale_ = torch::full({}, enabled ? init_scale : 1.0, f);
  growth_tracker_ = torch::zeros({}, f.dtype(torch::kInt));
  found_inf_ = torch::zeros({}, f);
  kernels_ = enabled && AmpKernelsRun(device);
}

torch::Tensor LossScaler::Scale(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

void LossScaler::Unscale(const std::vector<torch::Tensor>& params) {
  if (!enabled_) return;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  found_inf_.zero_();
  // GradScaler.unscale_: the reciprocal in double, then float32.
  auto inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  if (kernels_) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
    return;
  }
  // The kernel's arithmetic: found_inf = 1 when any element is inf/NaN before scaling; every
  // gradient multiplied by inv_scale in its own dtype's math (fp32 for fp16 gradients).
  torch::NoGradGuard no_grad;
  for (auto& g : grads) {
    found_inf_.copy_(
        torch::fmax(found_inf_, torch::isfinite(g).logical_not().any().to(torch::kFloat)));
    if (g.scalar_type() == torch::kHalf || g.scalar_type() == torch::kBFloat16) {
      g.copy_(g.to(torch::kFloat) * inv_scale);
    } else {
      g.mul_(inv_scale.to(g.scalar_type()));
    }
  }
}

bool LossScaler::StepIsFinite() const { return !enabled_ || found_inf_.item<float>() == 0.0f; }

void LossScaler::Update() {
  if (!enabled_) return;
  if (kernels_) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, growth_factor_, backoff_factor_,
                           growth_interval_);
    return;
  }
  // _amp_update_scale_'s arithmetic (aten/src/ATen/native/cuda/AmpKernels.cu), float32 scale.
  torch::NoGradGuard no_grad;
  if (found_inf_.item<float>() != 0.0f) {
    scale_.mul_(static_cast<float>(backoff_factor_));
    growth_tracker_.zero_();
    return;
  }
  const int64_t successful = growth_tracker_.item<int>() + 1;
  if (successful == growth_interval_) {
    auto grown = scale_ * static_cast<float>(growth_factor_);
    if (std::isfinite(grown.item<float>())) scale_.copy_(grown);
    growth_tracker_.zero_();
  } else {
    growth_tracker_.fill_(successful);
  }
}

double LossScaler::scale() const { return scale_.item<double>(); }

std::vector<torch::Tensor> LossScaler::State() const {
  return {scale_.cpu().clone(), growth_tracker_.cpu().clone()};
}

void LossScaler::LoadState(const std::vector<torch::Tensor>& state) {
  TORCH_CHECK(state.size() == 2, "loss scaler state must hold scale and growth tracker");
  scale_.copy_(state[0]);
  growth_tracker_.copy_(state[1]);
}

}  // namespace mm::train
