// crop_resize.cc: see crop_resize.h.
#include "transforms/crop_resize.h"

#include <algorithm>
#include <string>
#include <utility>

#include "mm/internal/resample.h"
#include "transforms/jpeg_region.h"

namespace mm::reader::internal {
namespace {

// Decoded pixels beyond what the filter reads, per side (scaled-image pixels): libjpeg's
// chroma upsampling at a cropped or skipped edge sees no neighbour, so the outermost decoded
// pixels may differ from a full decode; this margin keeps them out of the filter's reach.
constexpr int kDecodeMargin = 2;

}  // namespace

int JpegScaleFor(const CropWindow& window, int out_w, int out_h) {
  for (int num = 1; num < 8; ++num) {
    if (int64_t{window.w} * num >= int64_t{8} * out_w &&
        int64_t{window.h} * num >= int64_t{8} * out_h) {
      return num;
    }
  }
  return 8;
}

void FlipHorizontal(uint8_t* pixels, int w, int h) {
  for (int y = 0; y < h; ++y) {
    uint8_t* row = pixels + static_cast<size_t>(y) * w * 3;
    for (int a = 0, b = w - 1; a < b; ++a, --b) {
      std::swap(row[3 * a], row[3 * b]);
      std::swap(row[3 * a + 1], row[3 * b + 1]);
      std::swap(row[3 * a + 2], row[3 * b + 2]);
    }
  }
}

void CropResizePixels(const uint8_t* pixels, int width, int height, const CropWindow& window,
                      int out_w, int out_h, bool flip, uint8_t* dst, image::Filter filter) {
  const image::Box box{static_cast<double>(window.x), static_cast<double>(window.y),
                       static_cast<double>(window.x + window.w),
                       static_cast<double>(window.y + window.h)};
  image::ResizeBox(pixels, 0, 0, width * 3, width, height, 3, box, out_w, out_h, dst, filter);
  if (flip) FlipHorizontal(dst, out_w, out_h);
}

Status CropResizeJpeg(const uint8_t* jpeg, size_t size, int width, int height,
                      const CropWindow& window, int out_w, int out_h, bool flip, uint8_t* dst,
                      image::Filter filter) {
  const int num = JpegScaleFor(window, out_w, out_h);
  const int sw = JpegScaled(width, num), sh = JpegScaled(height, num);
  // The window in the scaled image: pixel i of the scaled image covers source
  // [i * 8 / num, (i + 1) * 8 / num), so coordinates scale by num / 8 exactly.
  const double f = num / 8.0;
  const image::Box box{window.x * f, window.y * f, std::min<double>((window.x + window.w) * f, sw),
                       std::min<double>((window.y + window.h) * f, sh)};
  int c0, c1, r0, r1;
  image::ResampleSupport(sw, box.x0, box.x1, out_w, &c0, &c1, filter);
  image::ResampleSupport(sh, box.y0, box.y1, out_h, &r0, &r1, filter);
  JpegRegion region;
  MM_RETURN_NOT_OK(DecodeJpegRegion(jpeg, size, num, c0 - kDecodeMargin, r0 - kDecodeMargin,
                                    c1 + kDecodeMargin, r1 + kDecodeMargin, &region, width,
                                    height));
  if (region.width != width || region.height != height) {
    return Status::Corruption("JPEG is " + std::to_string(region.width) + "x" +
                              std::to_string(region.height) +
                              " pixels, the image_size table says " + std::to_string(width) + "x" +
                              std::to_string(height));
  }
  image::ResizeBox(region.pixels, region.x0, region.y0, region.stride, sw, sh, 3, box, out_w,
                   out_h, dst, filter);
  if (flip) FlipHorizontal(dst, out_w, out_h);
  return Status::OK();
}

}  // namespace mm::reader::internal
