// crop_resize.h: one sample's output pixels from its stored image: a crop window resized to
// the output size with the antialiased Lanczos-3 filter (mm/internal/resample.h, Pillow's
// LANCZOS), optionally mirrored. From raw pixels (the raw codec: no decode) or from JPEG bytes
// (decoded at the smallest DCT scale that still covers the crop at the output size, only the
// rows and columns the filter reads: jpeg_region.h). Private to mm_reader; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mm/internal/resample.h"
#include "mm/status.h"
#include "transforms/crop_window.h"

namespace mm::reader::internal {

/// The smallest scale_num (1..8, the scale being scale_num / 8) at which `window` still spans
/// at least out_w x out_h pixels, so the resize after it only shrinks; 8 when the window is
/// smaller than the output (an enlargement decodes at full size).
int JpegScaleFor(const CropWindow& window, int out_w, int out_h);

/// Mirrors an image ([h, w, 3] uint8, rows packed) left to right in place.
void FlipHorizontal(uint8_t* pixels, int w, int h);

/// `window` of `pixels` ([height, width, 3] uint8, rows packed) resized to `dst`
/// ([out_h, out_w, 3] uint8), mirrored when `flip`. window inside the image, sizes > 0.
void CropResizePixels(const uint8_t* pixels, int width, int height, const CropWindow& window,
                      int out_w, int out_h, bool flip, uint8_t* dst,
                      image::Filter filter = image::Filter::kLanczos3);

/// The same from a JPEG of `width` x `height` pixels (what the set's image_size table says; the
/// header must agree). Errors: Corruption (damaged JPEG; header size differs from the table),
/// Unsupported (CMYK).
Status CropResizeJpeg(const uint8_t* jpeg, size_t size, int width, int height,
                      const CropWindow& window, int out_w, int out_h, bool flip, uint8_t* dst,
                      image::Filter filter = image::Filter::kLanczos3);

}  // namespace mm::reader::internal
