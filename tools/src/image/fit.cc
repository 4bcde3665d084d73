// fit.cc: see fit.h.
#include "image/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mm::pack {
namespace {

// Largest k in {1, 2, 4, 8} with k <= limit.
int PowerOfTwoShrink(double limit) {
  int k = 1;
  while (k < 8 && 2.0 * k <= limit + 1e-9) k *= 2;
  return k;
}

// EXIF orientation o (1..8) as the transform from a shown pixel (dx, dy) to the stored one:
// transpose first (5..8 turn the image by 90 degrees), then mirror each axis of the stored image
// (TIFF 6.0 / EXIF 2.3 tag 0x0112; what Pillow's exif_transpose undoes).
struct Orientation {
  bool transpose, flip_x, flip_y;
};
constexpr Orientation kOrientations[9] = {
    {false, false, false},  // 0: not a value; as 1
    {false, false, false},  // 1: upright
    {false, true, false},   // 2: mirrored left-right
    {false, true, true},    // 3: turned 180 degrees
    {false, false, true},   // 4: mirrored top-bottom
    {true, false, false},   // 5: transposed
    {true, false, true},    // 6: turned 90 degrees clockwise to view
    {true, true, true},     // 7: transversed
    {true, true, false},    // 8: turned 90 degrees anticlockwise to view
};

const Orientation& OrientationOf(int orientation) {
  return kOrientations[orientation >= 1 && orientation <= 8 ? orientation : 1];
}

// The stored-frame range [*lo, *lo + *n) that the oriented range [a, b) of an axis maps to,
// on a stored axis of `size` pixels, mirrored or not.
void StoredRange(int64_t a, int64_t b, bool flip, int64_t size, int64_t* lo, int* n) {
  *lo = flip ? size - b : a;
  *n = static_cast<int>(b - a);
}

// The stored pixel of `resized` (the plan's window, [win_h, win_w]) that the oriented image
// shows at (dx, dy) of the resized oriented frame.
const uint8_t* StoredPixel(const uint8_t* resized, int bands, const Orientation& o,
                           const FitPlan& plan, int64_t dx, int64_t dy) {
  const int64_t u = o.transpose ? dy : dx, v = o.transpose ? dx : dy;
  const int64_t sx = (o.flip_x ? plan.need_w - 1 - u : u) - plan.win_x;
  const int64_t sy = (o.flip_y ? plan.need_h - 1 - v : v) - plan.win_y;
  return resized + (static_cast<size_t>(sy) * plan.win_w + static_cast<size_t>(sx)) * bands;
}

// Lengths: fit_scale <= out side / 1 <= 2^13 and sources < 2^31, so every product below
// stays under 2^44 (no overflow in int64, exact in double).
int64_t Scaled(int side, double scale) {
  return std::max<int64_t>(1, std::llround(static_cast<double>(side) * scale));
}

}  // namespace

FitPlan PlanFit(int raw_w, int raw_h, int orientation, int out_w, int out_h,
                format::ResizeMode mode) {
  FitPlan p;
  const Orientation& o = OrientationOf(orientation);
  p.swap = o.transpose;  // 90 or 270 degrees
  p.oriented_w = p.swap ? raw_h : raw_w;
  p.oriented_h = p.swap ? raw_w : raw_h;
  const double sx_full = static_cast<double>(out_w) / p.oriented_w;
  const double sy_full = static_cast<double>(out_h) / p.oriented_h;
  const double cover = std::max(sx_full, sy_full);
  const double fit_scale = mode == format::ResizeMode::kPad ? std::min(sx_full, sy_full) : cover;

  // The size the source is resized to before the fit (oriented frame), from its full size.
  if (mode == format::ResizeMode::kStretch) {
    p.resized_w = out_w;
    p.resized_h = out_h;
  } else {
    p.resized_w = Scaled(p.oriented_w, fit_scale);
    p.resized_h = Scaled(p.oriented_h, fit_scale);
    if (mode == format::ResizeMode::kCenterCrop) {
      p.resized_w = std::max<int64_t>(p.resized_w, out_w);
      p.resized_h = std::max<int64_t>(p.resized_h, out_h);
    } else {
      p.resized_w = std::min<int64_t>(p.resized_w, out_w);
      p.resized_h = std::min<int64_t>(p.resized_h, out_h);
    }
  }
  p.need_w = p.swap ? p.resized_h : p.resized_w;
  p.need_h = p.swap ? p.resized_w : p.resized_h;
  p.shrink = fit_scale < 1.0 ? PowerOfTwoShrink(1.0 / fit_scale) : 1;
  while (p.shrink > 1 && (raw_w / p.shrink < p.need_w || raw_h / p.shrink < p.need_h)) {
    p.shrink /= 2;
  }

  // The oriented [resized_h, resized_w] image is centred; what overhangs is cropped
  // (center-crop), the rest is background (pad).
  p.x = (out_w - p.resized_w) / 2;
  p.y = (out_h - p.resized_h) / 2;
  p.x0 = static_cast<int>(std::max<int64_t>(0, p.x));
  p.y0 = static_cast<int>(std::max<int64_t>(0, p.y));
  p.x1 = static_cast<int>(std::min<int64_t>(out_w, p.x + p.resized_w));
  p.y1 = static_cast<int>(std::min<int64_t>(out_h, p.y + p.resized_h));
  // Only the kept window is resized: the oriented [x0 - x, x1 - x) x [y0 - y, y1 - y) in the
  // stored frame (transposed for 5..8, mirrored where the orientation mirrors).
  const int64_t dx0 = p.x0 - p.x, dx1 = p.x1 - p.x, dy0 = p.y0 - p.y, dy1 = p.y1 - p.y;
  StoredRange(o.transpose ? dy0 : dx0, o.transpose ? dy1 : dx1, o.flip_x, p.need_w, &p.win_x,
              &p.win_w);
  StoredRange(o.transpose ? dx0 : dy0, o.transpose ? dx1 : dy1, o.flip_y, p.need_h, &p.win_y,
              &p.win_h);
  const bool pad = mode == format::ResizeMode::kPad;
  p.valid_box[0] = pad ? p.x0 : 0;
  p.valid_box[1] = pad ? p.y0 : 0;
  p.valid_box[2] = pad ? p.x1 - p.x0 : out_w;
  p.valid_box[3] = pad ? p.y1 - p.y0 : out_h;
  return p;
}

void PlaceOriented(const uint8_t* resized, int bands, int orientation, const FitPlan& plan,
                   const ImageOptions& opt, ProcessedImage* out) {
  const size_t out_bytes = static_cast<size_t>(opt.width) * opt.height * 3;
  out->pixels.resize(out_bytes);
  uint8_t* dst = out->pixels.data();
  if (opt.mode == format::ResizeMode::kPad &&
      (plan.resized_w != opt.width || plan.resized_h != opt.height)) {
    for (size_t i = 0; i < out_bytes; i += 3) {
      dst[i] = opt.background.r;
      dst[i + 1] = opt.background.g;
      dst[i + 2] = opt.background.b;
    }
  }
  const Orientation& o = OrientationOf(orientation);
  const bool upright = !o.transpose && !o.flip_x && !o.flip_y;
  for (int oy = plan.y0; oy < plan.y1; ++oy) {
    uint8_t* row = dst + (static_cast<size_t>(oy) * opt.width) * 3;
    const int64_t dy = oy - plan.y;
    if (upright && bands == 3) {
      std::memcpy(row + plan.x0 * 3, StoredPixel(resized, bands, o, plan, plan.x0 - plan.x, dy),
                  static_cast<size_t>(plan.x1 - plan.x0) * 3);
      continue;
    }
    for (int ox = plan.x0; ox < plan.x1; ++ox) {
      const uint8_t* p = StoredPixel(resized, bands, o, plan, ox - plan.x, dy);
      uint8_t* q = row + ox * 3;
      if (bands == 3) {
        q[0] = p[0];
        q[1] = p[1];
        q[2] = p[2];
      } else {
        q[0] = q[1] = q[2] = p[0];
      }
    }
  }
  std::copy(plan.valid_box, plan.valid_box + 4, out->valid_box);
}

}  // namespace mm::pack
