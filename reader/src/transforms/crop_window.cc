// crop_window.cc: see crop_window.h.
#include "transforms/crop_window.h"

#include <algorithm>
#include <cmath>

#include "order/sampler.h"

namespace mm::reader::internal {

uint64_t CounterRng::Next() { return Mix64(key_ ^ Mix64(counter_++)); }

double CounterRng::Uniform(double lo, double hi) {
  const double u = static_cast<double>(Next() >> 11) * 0x1.0p-53;  // [0, 1)
  return lo + (hi - lo) * u;
}

int64_t CounterRng::Below(int64_t n) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(Next()) * static_cast<uint64_t>(n)) >>
                              64);
}

int RoundHalfEven(double v) {
  // std::nearbyint rounds in the current mode, which is round-to-nearest-even unless a caller
  // changed it; do not depend on that.
  const double r = std::round(v);  // half away from zero
  if (std::abs(v - std::trunc(v)) == 0.5) return static_cast<int>(2.0 * std::round(v / 2.0));
  return static_cast<int>(r);
}

CropWindow RandomResizedCrop(int width, int height, const RandomResizedCropParams& p,
                             CounterRng* rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(p.ratio_min), log_hi = std::log(p.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng->Uniform(p.scale_min, p.scale_max);
    const double aspect = std::exp(rng->Uniform(log_lo, log_hi));
    const int w = RoundHalfEven(std::sqrt(target_area * aspect));
    const int h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int y = static_cast<int>(rng->Below(height - h + 1));  // torch draws i, then j
      const int x = static_cast<int>(rng->Below(width - w + 1));
      return CropWindow{x, y, w, h};
    }
  }
  // Fallback: the whole image, its ratio clamped into [ratio_min, ratio_max], centred.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < p.ratio_min) {
    h = RoundHalfEven(w / p.ratio_min);
  } else if (in_ratio > p.ratio_max) {
    w = RoundHalfEven(h * p.ratio_max);
  }
  return CropWindow{(width - w) / 2, (height - h) / 2, w, h};
}

CropWindow CenterCrop(int width, int height, int out_w, int out_h, double ratio) {
  // The largest window of the output's shape: limited by width or by height.
  const double s =
      std::min(static_cast<double>(width) / out_w, static_cast<double>(height) / out_h);
  int w = static_cast<int>(ratio * s * out_w + 1e-9);
  int h = static_cast<int>(ratio * s * out_h + 1e-9);
  w = std::clamp(w, 1, width);
  h = std::clamp(h, 1, height);
  return CropWindow{(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace mm::reader::internal
