// jpeg_region.h: decoding only the part of a JPEG that a crop needs, at a reduced DCT scale.
// Private to mm_reader.
//
// Through libjpeg-turbo's libjpeg API (TurboJPEG 2.1, Debian 12's, has no cropping; TurboJPEG
// 3.0's tj3SetCroppingRegion is this same mechanism): `scale_num / 8` DCT scaling (the IDCT
// produces the reduced image directly, 1/8..8/8), `jpeg_crop_scanline` (every column is still
// Huffman-decoded, but only the iMCU columns covering the asked ones are inverse-transformed,
// upsampled and colour-converted) and `jpeg_skip_scanlines` (rows above the region are
// Huffman-decoded only; rows below it are never touched). libjpeg's errors and warnings (any
// warning here means damaged data) become Status values in jpeg_region.cc only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mm/status.h"

namespace mm::reader::internal {

/// Width and height of a JPEG from its header, pixels.
/// Errors: Corruption (not a JPEG, a damaged header).
Status JpegDimensions(const uint8_t* data, size_t size, int* width, int* height);

/// Part of a decoded image.
struct JpegRegion {
  const uint8_t* pixels = nullptr;     // pixel (x0, y0) of the scaled image; [rows, cols, 3] RGB
  int stride = 0;                      // bytes from one row to the next
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the region decoded, scaled-image pixels
  int scaled_w = 0, scaled_h = 0;      // the whole scaled image: ceil(W * num / 8) etc.
  int width = 0, height = 0;           // the image at full size (its header)
};

/// The width (or height) of a `size`-pixel side scaled by num/8, as libjpeg computes it.
inline int JpegScaled(int size, int num) { return static_cast<int>((int64_t{size} * num + 7) / 8); }

/// Decodes at least columns [x0, x1) and rows [y0, y1) of the image scaled by scale_num / 8
/// (1..8; coordinates in the scaled image, clipped to it) as 8-bit RGB (greyscale JPEGs are
/// expanded). The region may start left of x0 (iMCU alignment): `out` says what was decoded.
/// out->pixels stays valid until this thread's next call. ISLOW integer IDCT and fancy
/// (triangle) chroma upsampling: Pillow's and TurboJPEG's defaults.
/// expect_width/height > 0: the header must state that size, checked before anything is
/// decoded or allocated (a damaged header may state 65535 x 65535).
/// Errors: Corruption with libjpeg's message (damaged data, truncation: any libjpeg warning; a
/// header size unlike the expected one), Unsupported (CMYK or YCCK).
Status DecodeJpegRegion(const uint8_t* data, size_t size, int scale_num, int x0, int y0, int x1,
                        int y1, JpegRegion* out, int expect_width = 0, int expect_height = 0);

/// The whole JPEG at full size into dst ([height, width, 3] uint8 RGB, rows packed); the header
/// must state width x height. Reads on to the end of the data after the last row, so damage
/// anywhere in the entropy-coded data is an error (a region decode sees only its rows').
/// Errors: as DecodeJpegRegion.
Status DecodeJpeg(const uint8_t* data, size_t size, int width, int height, uint8_t* dst);

}  // namespace mm::reader::internal
