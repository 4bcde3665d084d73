// fit.cc: see fit.h.
#include "image/fit.h"

#include <algorithm>
#include <cmath>
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

// The stored pixel of `resized` ([win_h, win_w] of the plan) that the oriented image shows at
// (dx, dy): orientations 2..8 address the whole stored image; 1 reads the plan's window.
const uint8_t* StoredPixel(const uint8_t* resized, int bands, int orientation, const FitPlan& plan,
                           int dx, int dy) {
  int sx = dx - plan.win_x, sy = dy - plan.win_y;
  if (orientation >= 2 && orientation <= 8) {
    const Orientation& o = kOrientations[orientation];
    const int u = o.transpose ? dy : dx, v = o.transpose ? dx : dy;
    sx = o.flip_x ? plan.need_w - 1 - u : u;
    sy = o.flip_y ? plan.need_h - 1 - v : v;
  }
  return resized + (static_cast<size_t>(sy) * plan.win_w + sx) * bands;
}

}  // namespace

FitPlan PlanFit(int raw_w, int raw_h, int orientation, int out_w, int out_h, ResizeMode mode) {
  FitPlan p;
  p.swap = orientation >= 5;  // 90 or 270 degrees
  p.oriented_w = p.swap ? raw_h : raw_w;
  p.oriented_h = p.swap ? raw_w : raw_h;
  const double sx_full = static_cast<double>(out_w) / p.oriented_w;
  const double sy_full = static_cast<double>(out_h) / p.oriented_h;
  const double cover = std::max(sx_full, sy_full);
  const double fit_scale = mode == ResizeMode::kPad ? std::min(sx_full, sy_full) : cover;

  // The size the source is resized to before the fit (oriented frame), from its full size.
  if (mode == ResizeMode::kStretch) {
    p.resized_w = out_w;
    p.resized_h = out_h;
  } else {
    p.resized_w = std::max(1, static_cast<int>(std::lround(p.oriented_w * fit_scale)));
    p.resized_h = std::max(1, static_cast<int>(std::lround(p.oriented_h * fit_scale)));
    if (mode == ResizeMode::kCenterCrop) {
      p.resized_w = std::max(p.resized_w, out_w);
      p.resized_h = std::max(p.resized_h, out_h);
    } else {
      p.resized_w = std::min(p.resized_w, out_w);
      p.resized_h = std::min(p.resized_h, out_h);
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
  p.x0 = std::max(0, p.x);
  p.y0 = std::max(0, p.y);
  p.x1 = std::min(out_w, p.x + p.resized_w);
  p.y1 = std::min(out_h, p.y + p.resized_h);
  // Upright images are resized only inside the window that is kept.
  p.win_w = p.need_w;
  p.win_h = p.need_h;
  if (orientation == 1) {
    p.win_x = p.x0 - p.x;
    p.win_y = p.y0 - p.y;
    p.win_w = p.x1 - p.x0;
    p.win_h = p.y1 - p.y0;
  }
  const bool pad = mode == ResizeMode::kPad;
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
  if (opt.mode == ResizeMode::kPad &&
      (plan.resized_w != opt.width || plan.resized_h != opt.height)) {
    for (size_t i = 0; i < out_bytes; i += 3) {
      dst[i] = opt.background.r;
      dst[i + 1] = opt.background.g;
      dst[i + 2] = opt.background.b;
    }
  }
  for (int oy = plan.y0; oy < plan.y1; ++oy) {
    uint8_t* row = dst + (static_cast<size_t>(oy) * opt.width) * 3;
    const int dy = oy - plan.y;
    if (orientation == 1 && bands == 3) {
      std::memcpy(row + plan.x0 * 3,
                  StoredPixel(resized, bands, orientation, plan, plan.x0 - plan.x, dy),
                  static_cast<size_t>(plan.x1 - plan.x0) * 3);
      continue;
    }
    for (int ox = plan.x0; ox < plan.x1; ++ox) {
      const uint8_t* p = StoredPixel(resized, bands, orientation, plan, ox - plan.x, dy);
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
