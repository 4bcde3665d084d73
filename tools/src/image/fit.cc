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

// The stored pixel of `resized` ([win_h, win_w] of the plan) that the oriented image shows at
// (dx, dy): EXIF orientation 2..8 mirror and turn the whole stored image; 1 reads the window.
const uint8_t* StoredPixel(const uint8_t* resized, int bands, int orientation, const FitPlan& plan,
                           int dx, int dy) {
  const int sw = plan.need_w, sh = plan.need_h;
  int sx, sy;
  switch (orientation) {
    case 2:
      sx = sw - 1 - dx;
      sy = dy;
      break;
    case 3:
      sx = sw - 1 - dx;
      sy = sh - 1 - dy;
      break;
    case 4:
      sx = dx;
      sy = sh - 1 - dy;
      break;
    case 5:
      sx = dy;
      sy = dx;
      break;
    case 6:
      sx = dy;
      sy = sh - 1 - dx;
      break;
    case 7:
      sx = sw - 1 - dy;
      sy = sh - 1 - dx;
      break;
    case 8:
      sx = sw - 1 - dy;
      sy = dx;
      break;
    default:
      sx = dx - plan.win_x;
      sy = dy - plan.win_y;
      break;
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
