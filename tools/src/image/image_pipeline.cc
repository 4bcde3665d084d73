// image_pipeline.cc: see image_pipeline.h. One image: sniff and check the size (sniff.h),
// decode (decode.h), resize (resample.h), orient and fit.
#include "image/image_pipeline.h"

#include <vips/vips.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "image/decode.h"
#include "image/jpeg_metadata.h"
#include "image/resample.h"
#include "image/sniff.h"
#include "image/vips_errors.h"

namespace mm::pack {
namespace {

// Largest k in {1, 2, 4, 8} with k <= limit.
int PowerOfTwoShrink(double limit) {
  int k = 1;
  while (k < 8 && 2.0 * k <= limit + 1e-9) k *= 2;
  return k;
}

// ProcessImage, without the error gate.
bool ProcessImageOnce(const std::string& bytes, const ImageOptions& opt, ProcessedImage* out,
                      ImageFailure* failure) {
  if (bytes.empty()) return Fail(failure, "corrupt_image", "empty file");
  const ImageKind kind = Sniff(bytes);
  if (kind == ImageKind::kUnknown) {
    return Fail(failure, "unsupported_format",
                "not a JPEG, PNG, GIF, WebP, TIFF or BMP file (magic bytes)");
  }
  const void* data = bytes.data();
  const size_t size = bytes.size();
  auto too_many = [&](int64_t w, int64_t h) {
    return Fail(failure, "too_many_pixels",
                std::to_string(w) + "x" + std::to_string(h) + " = " + std::to_string(w * h) +
                    " pixels > --max-pixels " + std::to_string(opt.max_pixels));
  };
  if (int64_t w = 0, h = 0; PeekSize(kind, bytes, &w, &h) && w * h > opt.max_pixels) {
    return too_many(w, h);
  }

  // 1. Header only: nothing is decoded until pixels are asked for. JPEGs: size from the SOF
  // segment and orientation from EXIF, read here (libvips' header costs as much as a tenth of
  // the decode); everything else: libvips' header.
  VipsImagePtr header;
  int raw_w = 0, raw_h = 0, orientation = 1;
  int64_t peek_w = 0, peek_h = 0;
  if (kind == ImageKind::kJpeg && PeekSize(kind, bytes, &peek_w, &peek_h) && peek_w > 0 &&
      peek_h > 0) {
    raw_w = static_cast<int>(peek_w);
    raw_h = static_cast<int>(peek_h);
    orientation = JpegExifOrientation(bytes);
  } else {
    header.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                            "fail_on", VIPS_FAIL_ON_TRUNCATED, nullptr));
    if (!header) return DecodeFail(kind, bytes, failure);
    raw_w = vips_image_get_width(header.get());
    raw_h = vips_image_get_height(header.get());
    if (vips_image_get_typeof(header.get(), VIPS_META_ORIENTATION)) {
      if (vips_image_get_int(header.get(), VIPS_META_ORIENTATION, &orientation) != 0) {
        orientation = 1;
      }
      if (orientation < 1 || orientation > 8) orientation = 1;
    }
  }
  if (raw_w <= 0 || raw_h <= 0) return Fail(failure, "corrupt_image", "zero-sized image");
  const int64_t pixels = int64_t{raw_w} * raw_h;
  if (pixels > opt.max_pixels) return too_many(raw_w, raw_h);
  const bool swap = orientation >= 5;   // 90 or 270 degrees
  const int ow = swap ? raw_h : raw_w;  // oriented source size
  const int oh = swap ? raw_w : raw_h;
  out->original_width = ow;
  out->original_height = oh;

  const double sx_full = static_cast<double>(opt.width) / ow;
  const double sy_full = static_cast<double>(opt.height) / oh;
  const double cover = std::max(sx_full, sy_full);
  const double fit_scale = opt.mode == ResizeMode::kPad ? std::min(sx_full, sy_full) : cover;

  // The size the source is resized to before the fit (oriented frame), from its full size.
  int tw, th;  // oriented frame
  if (opt.mode == ResizeMode::kStretch) {
    tw = opt.width;
    th = opt.height;
  } else {
    tw = std::max(1, static_cast<int>(std::lround(ow * fit_scale)));
    th = std::max(1, static_cast<int>(std::lround(oh * fit_scale)));
    if (opt.mode == ResizeMode::kCenterCrop) {
      tw = std::max(tw, opt.width);
      th = std::max(th, opt.height);
    } else {
      tw = std::min(tw, opt.width);
      th = std::min(th, opt.height);
    }
  }

  // 2. Decode at a shrink factor that keeps the target covered after rounding down
  // (427 / 4 = 106), so the resize below always shrinks: no near-1 upscale that would shift
  // the content.
  int shrink = fit_scale < 1.0 ? PowerOfTwoShrink(1.0 / fit_scale) : 1;
  const int need_w = swap ? th : tw, need_h = swap ? tw : th;  // stored orientation
  while (shrink > 1 && (raw_w / shrink < need_w || raw_h / shrink < need_h)) shrink /= 2;
  Decoded decoded;
  int turbo = 0;
  if (kind == ImageKind::kJpeg) {
    // A JPEG tagged with a non-sRGB profile is converted by libvips (DecodeVips), not here.
    const std::string icc = JpegIccProfile(bytes);
    const auto* p = reinterpret_cast<const uint8_t*>(icc.data());
    const bool convert = IccNeedsConversion(p, icc.size(), /*grey=*/false) ||
                         IccNeedsConversion(p, icc.size(), /*grey=*/true);
    if (!convert) turbo = DecodeJpegTurbo(bytes, shrink, &decoded, failure);
  }
  if (turbo < 0) return false;
  if (turbo == 0 &&
      !DecodeVips(std::move(header), kind, bytes, opt, shrink, need_w, need_h, &decoded, failure)) {
    return false;
  }
  const int lw = decoded.width, lh = decoded.height, nb = decoded.bands;

  // 3. Resize with Lanczos-3 in the stored orientation (resample.h: about 3x faster than
  // vips_resize at these sizes).
  // 4. Orientation (EXIF 1..8) and fit into [height, width, 3]: the oriented [th, tw] image
  // is centred; what overhangs is cropped (center-crop), the rest is background (pad).
  const int x = (opt.width - tw) / 2;
  const int y = (opt.height - th) / 2;
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(opt.width, x + tw), y1 = std::min(opt.height, y + th);
  // Upright images are resized only inside the window that is kept.
  int win_x = 0, win_y = 0, win_w = need_w, win_h = need_h;
  if (orientation == 1) {
    win_x = x0 - x;
    win_y = y0 - y;
    win_w = x1 - x0;
    win_h = y1 - y0;
  }
  thread_local std::vector<uint8_t> resized;  // reused: no page faults per image
  const uint8_t* small = decoded.pixels;
  if (lw != need_w || lh != need_h || win_w != need_w || win_h != need_h) {
    ResizeLanczos3(small, lw, lh, lw * nb, nb, need_w, need_h, win_x, win_y, win_w, win_h,
                   &resized);
    small = resized.data();
  }

  const size_t out_bytes = static_cast<size_t>(opt.width) * opt.height * 3;
  out->pixels.resize(out_bytes);
  uint8_t* dst = out->pixels.data();
  if (opt.mode == ResizeMode::kPad && (tw != opt.width || th != opt.height)) {
    for (size_t i = 0; i < out_bytes; i += 3) {
      dst[i] = opt.background.r;
      dst[i + 1] = opt.background.g;
      dst[i + 2] = opt.background.b;
    }
  }
  // Displayed pixel (dx, dy) of the oriented image -> pixel of `small` ([win_h, win_w]).
  const int sw = need_w, sh = need_h;
  auto stored = [&](int dx, int dy) -> const uint8_t* {
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
        sx = dx - win_x;
        sy = dy - win_y;
        break;
    }
    return small + (static_cast<size_t>(sy) * win_w + sx) * nb;
  };
  for (int oy = y0; oy < y1; ++oy) {
    uint8_t* row = dst + (static_cast<size_t>(oy) * opt.width) * 3;
    const int dy = oy - y;
    if (orientation == 1 && nb == 3) {
      std::memcpy(row + x0 * 3, stored(x0 - x, dy), static_cast<size_t>(x1 - x0) * 3);
      continue;
    }
    for (int ox = x0; ox < x1; ++ox) {
      const uint8_t* p = stored(ox - x, dy);
      uint8_t* q = row + ox * 3;
      if (nb == 3) {
        q[0] = p[0];
        q[1] = p[1];
        q[2] = p[2];
      } else {
        q[0] = q[1] = q[2] = p[0];
      }
    }
  }
  if (opt.mode == ResizeMode::kPad) {
    out->valid_box[0] = x0;
    out->valid_box[1] = y0;
    out->valid_box[2] = x1 - x0;
    out->valid_box[3] = y1 - y0;
  } else {
    out->valid_box[0] = 0;
    out->valid_box[1] = 0;
    out->valid_box[2] = opt.width;
    out->valid_box[3] = opt.height;
  }
  return true;
}

}  // namespace

bool ProcessImage(const std::string& bytes, const ImageOptions& opt, ProcessedImage* out,
                  ImageFailure* failure) {
  if (Status st = InitVips(); !st.ok()) return Fail(failure, "unreadable", st.message());
  return RunUnderVipsErrorGate([&] { return ProcessImageOnce(bytes, opt, out, failure); });
}

}  // namespace mm::pack
