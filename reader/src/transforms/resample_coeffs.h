// resample_coeffs.h: the resampling filter's per-axis coefficients: for each output pixel of a
// window, its first source pixel and fixed-point weights (Pillow's precompute_coeffs), cached
// per thread. Internal to resample*.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "mm/internal/resample.h"

namespace mm::image::internal {

constexpr int kPrecisionBits = 14;
constexpr double kSupport = 3.0;  // Lanczos-3

// For each output coordinate of a window [out0, out0 + n) of an axis of out_size pixels: the
// first source index and fixed-point weights, as Pillow's precompute_coeffs (centre sampling:
// out pixel i covers source [in0 + i*scale, in0 + (i+1)*scale) with scale = (in1 - in0) /
// out_size). Only the window's pixels are computed, so the cost follows what is kept, not the
// virtual size: a 1x1,000,000 source fitted to 224x224 is resized to 224 x 224,000,000 and
// cropped (the whole axis would be 8 GB of coefficients). Indices are relative to out0.
// Taps whose fixed-point weight is 0 at either end are dropped (first and count shrink): they
// add nothing, and a pass then reads fewer rows.
struct Coeffs {
  uint64_t id = 0;              // new for every Precompute on this thread (PairPlan's key)
  int taps = 0;                 // weights per output pixel (max)
  std::vector<int> first;       // [n] first source index
  std::vector<int> count;       // [n] weights used
  std::vector<int32_t> weight;  // [n, taps]
};

// The coefficients of the window [out0, out0 + n_out) of an axis of `out_size` output pixels
// over the source box [in0, in1) of `in_size` pixels (n_out -1: the whole axis). Coefficients
// depend only on (in_size, box, out_size, window, filter): datasets repeat sizes, so each thread
// keeps the last few (one cache for both axes: ResampleSupport's answer is the ResizeBox that
// follows it; random crops miss, and cost little next to the passes). The reference stays valid
// until this thread's next call but one.
const Coeffs& CachedCoeffs(int in_size, double in0, double in1, int64_t out_size, int64_t out0 = 0,
                           int n_out = -1, Filter filter = Filter::kLanczos3);

}  // namespace mm::image::internal
