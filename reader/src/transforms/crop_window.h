// crop_window.h: which part of a stored image a sample's output shows (load-time crops),
// drawn per (seed, epoch, sample) from a counter-based generator. Private to mm_reader.
//
// RandomResizedCrop follows torchvision's `RandomResizedCrop.get_params`
// (torchvision/transforms/transforms.py, the ImageNet recipe of Szegedy et al., "Going deeper
// with convolutions", 2015): up to 10 tries, each drawing the crop's area uniformly from
// scale * (W * H) and its aspect ratio log-uniformly from `ratio`, w = round(sqrt(area * r)),
// h = round(sqrt(area / r)) (Python's round: half to even), accepted when 0 < w <= W and
// 0 < h <= H, its top-left corner then uniform over the valid positions; after 10 misses the
// centred largest window whose ratio is `ratio` clamped to the image's. Draws come from the
// generator below, not torch's, so the same (seed, epoch, sample) gives the same window on any
// thread, any world size and after a LoaderState restore.
#pragma once

#include <cstdint>

namespace mm::reader::internal {

/// A crop window in stored-image pixels: columns [x, x + w), rows [y, y + h).
struct CropWindow {
  int x = 0, y = 0, w = 0, h = 0;
};

/// A counter-based generator: draw k of stream `key` is a pure function of (key, k), so
/// results do not depend on which thread draws or in which order samples are visited.
class CounterRng {
 public:
  explicit CounterRng(uint64_t key) : key_(key) {}
  /// 64 random bits (splitmix64's finaliser over key and counter).
  uint64_t Next();
  /// Uniform in [lo, hi), 53-bit resolution.
  double Uniform(double lo, double hi);
  /// Uniform integer in [0, n), n >= 1 (multiply-shift on 64 bits: bias below 2^-32 for
  /// n < 2^32).
  int64_t Below(int64_t n);

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

struct RandomResizedCropParams {
  double scale_min = 0.08, scale_max = 1.0;             // of the image's area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

/// torchvision's RandomResizedCrop.get_params on an image of `width` x `height` (> 0) pixels.
CropWindow RandomResizedCrop(int width, int height, const RandomResizedCropParams& params,
                             CounterRng* rng);

/// The evaluation crop, as FFCV's CenterCropRGBImageDecoder (`get_center_crop`): the largest
/// window with the output's aspect ratio (out_w / out_h) that fits the image, each side
/// times `ratio` truncated to whole pixels, placed at floor(margin / 2). For a square output
/// and ratio = 224/256 (FFCV's default) it keeps what torchvision's Resize(256) +
/// CenterCrop(224) keeps, up to a pixel of rounding (torchvision resizes first and rounds the
/// margin, so it differs by at most one source pixel per side); ratio = 1 keeps all of the
/// image that fits the output's shape (what mmpack build's center-crop keeps).
CropWindow CenterCrop(int width, int height, int out_w, int out_h, double ratio);

/// Python's round(): to nearest, ties to even.
int RoundHalfEven(double v);

}  // namespace mm::reader::internal
