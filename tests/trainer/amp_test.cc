// The loss scaler (trainer/src/amp.h) against torch.amp.GradScaler's rules, on CPU with
// injected inf/NaN gradients. The rules, as GradScaler documents and implements them
// (torch/amp/grad_scaler.py; the kernels in aten/src/ATen/native/cuda/AmpKernels.cu):
//   - unscale_: every gradient is multiplied by 1/scale (computed in double, stored as float);
//     found_inf is set when any gradient element is inf or NaN;
//   - step: skipped when found_inf;
//   - update: found_inf -> scale *= backoff_factor, growth tracker = 0; else tracker += 1 and
//     when it reaches growth_interval, scale *= growth_factor (only if the result is finite)
//     and tracker = 0.
// Reference below: that rule set written out on its own (class GradScalerRules), independent of
// the code under test. On Debian's LibTorch 1.13 the CPU scaler runs its tensor-op path; where
// this LibTorch has GradScaler's kernels for the CPU (torch >= 2.3) both paths run and must agree.
#include "amp.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using mm::train::LossScaler;

/// GradScaler's update rule on plain doubles (float32 scale, as the kernel keeps it).
class GradScalerRules {
 public:
  GradScalerRules(double init, double growth, double backoff, int64_t interval)
      : scale_(static_cast<float>(init)), growth_(growth), backoff_(backoff), interval_(interval) {}
  /// One optimizer step; returns whether the step runs.
  bool Step(bool found_inf) {
    if (found_inf) {
      scale_ = static_cast<float>(scale_ * backoff_);
      tracker_ = 0;
      return false;
    }
    if (++tracker_ == interval_) {
      const float grown = static_cast<float>(scale_ * growth_);
      if (std::isfinite(grown)) scale_ = grown;
      tracker_ = 0;
    }
    return true;
  }
  float scale() const { return scale_; }

 private:
  float scale_;
  double growth_, backoff_;
  int64_t interval_, tracker_ = 0;
};

enum class Grad { kFinite, kInf, kNegInf, kNaN };

/// A parameter whose gradient is what backward of (loss * scale) leaves: `scale * true_grad`,
/// with element 3 of the second parameter replaced by inf/-inf/NaN when asked.
struct Model {
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> true_grads;

  explicit Model(torch::ScalarType grad_dtype = torch::kFloat) {
    torch::manual_seed(3);
    for (int64_t n : {5, 7}) {
      auto p = torch::zeros({n}, torch::dtype(grad_dtype).requires_grad(true));
      params.push_back(p);
      // Multiples of 1/8 in [-2, 2]: exact in fp16 and under power-of-two scales.
      true_grads.push_back((torch::randint(-16, 17, {n}) / 8.0).to(grad_dtype));
    }
  }
  void Backward(float scale, Grad g) {
    for (size_t i = 0; i < params.size(); ++i) {
      auto grad = (true_grads[i].to(torch::kFloat) * scale).to(params[i].scalar_type());
      if (i == 1 && g != Grad::kFinite) {
        grad[3] = g == Grad::kNaN   ? std::numeric_limits<float>::quiet_NaN()
                  : g == Grad::kInf ? std::numeric_limits<float>::infinity()
                                    : -std::numeric_limits<float>::infinity();
      }
      params[i].mutable_grad() = grad;
    }
  }
};

/// Runs `pattern` through `scaler` and the reference; checks skip, scale and unscaled grads.
void ExpectFollowsGradScaler(LossScaler& scaler, GradScalerRules ref,
                             const std::vector<Grad>& pattern,
                             torch::ScalarType grad_dtype = torch::kFloat) {
  Model m(grad_dtype);
  for (size_t step = 0; step < pattern.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_EQ(static_cast<float>(scaler.scale()), ref.scale());
    // The loss is scaled by the current scale: Scale(loss) == loss * scale.
    auto loss = torch::tensor(1.5f);
    EXPECT_EQ(scaler.Scale(loss).item<float>(), 1.5f * ref.scale());
    m.Backward(ref.scale(), pattern[step]);
    scaler.Unscale(m.params);
    const bool runs = ref.Step(pattern[step] != Grad::kFinite);
    EXPECT_EQ(scaler.StepIsFinite(), runs);
    if (runs) {  // unscaled back to the true gradients, exactly (powers of two)
      for (size_t i = 0; i < m.params.size(); ++i) {
        EXPECT_TRUE(torch::equal(m.params[i].grad(), m.true_grads[i])) << m.params[i].grad();
      }
    }
    scaler.Update();
  }
  EXPECT_EQ(static_cast<float>(scaler.scale()), ref.scale());
}

const Grad F = Grad::kFinite, I = Grad::kInf, N = Grad::kNaN, M = Grad::kNegInf;

TEST(LossScaler, SkipsInfAndNanStepsBacksOffAndGrowsAsGradScaler) {
  // growth_interval 3 so that growth shows: it needs 3 finite steps in a row, and a skipped
  // step restarts the count.
  const std::vector<Grad> pattern = {F, F, F, F, I, F, F, N, N, F, F,
                                     F, M, F, F, F, F, F, F, F, F, F};
  LossScaler scaler(true, torch::kCPU, 65536.0, 2.0, 0.5, 3);
  ExpectFollowsGradScaler(scaler, GradScalerRules(65536.0, 2.0, 0.5, 3), pattern);
  // The pattern's own arithmetic, by hand: grows at steps 2, 11, 15, 18 and 21, backs off at
  // 4, 7, 8 and 12: 65536 * 2 / 2 / 2 / 2 * 2 / 2 * 2 * 2 * 2 = 131072.
  EXPECT_EQ(scaler.scale(), 131072.0);
}

TEST(LossScaler, DefaultsAreGradScalersAndGrowOnlyAfter2000FiniteSteps) {
  LossScaler scaler(true, torch::kCPU);
  EXPECT_EQ(scaler.scale(), 65536.0);
  std::vector<Grad> pattern(1999, F);
  ExpectFollowsGradScaler(scaler, GradScalerRules(65536.0, 2.0, 0.5, 2000), pattern);
  EXPECT_EQ(scaler.scale(), 65536.0);  // 1999 finite steps: not yet
  Model m;
  m.Backward(65536.0f, F);
  scaler.Unscale(m.params);
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 131072.0);  // the 2000th
  m.Backward(131072.0f, I);
  scaler.Unscale(m.params);
  EXPECT_FALSE(scaler.StepIsFinite());
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 65536.0);  // backoff 0.5
}

TEST(LossScaler, UnscalesHalfPrecisionGradients) {
  const std::vector<Grad> pattern = {F, I, F, F, N, F};
  LossScaler scaler(true, torch::kCPU, 1024.0, 2.0, 0.5, 2);
  ExpectFollowsGradScaler(scaler, GradScalerRules(1024.0, 2.0, 0.5, 2), pattern, torch::kHalf);
}

TEST(LossScaler, KeepsTheScaleWhenGrowingWouldOverflowFloat32) {
  // Gradients of 2^-4 scaled by float32's largest power of two stay finite; growing the scale
  // every finite step (interval 1) would make it inf, so it stays where it is.
  const float big = std::ldexp(1.0f, 127);
  LossScaler scaler(true, torch::kCPU, big, 2.0, 0.5, 1);
  GradScalerRules ref(big, 2.0, 0.5, 1);
  auto p = torch::zeros({3}, torch::requires_grad());
  for (bool inf : {false, false, true, false}) {
    auto g = torch::full({3}, 0.0625f) * static_cast<float>(scaler.scale());
    if (inf) g[1] = std::numeric_limits<float>::infinity();
    p.mutable_grad() = g;
    scaler.Unscale({p});
    EXPECT_EQ(scaler.StepIsFinite(), ref.Step(inf));
    if (!inf) {
      EXPECT_TRUE(torch::equal(p.grad(), torch::full({3}, 0.0625f)));
    }
    scaler.Update();
    EXPECT_EQ(static_cast<float>(scaler.scale()), ref.scale());
  }
  // Kept at 2^127 twice, backed off to 2^126 by the inf step, grown back by the last.
  EXPECT_EQ(scaler.scale(), std::ldexp(1.0, 127));
}

TEST(LossScaler, DisabledScalerChangesNothing) {
  LossScaler scaler(false, torch::kCPU);
  Model m;
  m.Backward(1.0f, I);
  scaler.Unscale(m.params);
  EXPECT_TRUE(scaler.StepIsFinite());  // fp32/bf16 runs never skip
  scaler.Update();
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_TRUE(std::isinf(m.params[1].grad()[3].item<float>()));
}

TEST(LossScaler, StateRoundTripsThroughACheckpoint) {
  LossScaler a(true, torch::kCPU, 65536.0, 2.0, 0.5, 3);
  Model m;
  for (Grad g : {F, F, I, F}) {
    m.Backward(static_cast<float>(a.scale()), g);
    a.Unscale(m.params);
    a.Update();
  }
  LossScaler b(true, torch::kCPU, 65536.0, 2.0, 0.5, 3);
  b.LoadState(a.State());
  EXPECT_EQ(b.scale(), a.scale());
  // The growth tracker came along: two more finite steps grow both (1 + 2 = 3).
  for (LossScaler* s : {&a, &b}) {
    for (int i = 0; i < 2; ++i) {
      m.Backward(static_cast<float>(s->scale()), F);
      s->Unscale(m.params);
      s->Update();
    }
  }
  EXPECT_EQ(a.scale(), 65536.0);
  EXPECT_EQ(b.scale(), a.scale());
}

TEST(LossScaler, TensorOpPathAgreesWithGradScalersKernels) {
  LossScaler probe(true, torch::kCPU);
  if (!probe.uses_amp_kernels()) {
    GTEST_SKIP() << "this LibTorch (" << TORCH_VERSION
                 << ") has no CPU kernels for _amp_update_scale_ (torch >= 2.3 has): the "
                    "tensor-op path is the one the other tests check";
  }
  const std::vector<Grad> pattern = {F, F, I, F, F, F, N, F, M, F, F, F, F};
  for (bool force : {false, true}) {
    LossScaler scaler(true, torch::kCPU, 65536.0, 2.0, 0.5, 3);
    if (force) scaler.ForceTensorOps();
    SCOPED_TRACE(force ? "tensor ops" : "kernels");
    ExpectFollowsGradScaler(scaler, GradScalerRules(65536.0, 2.0, 0.5, 3), pattern);
  }
}

}  // namespace
