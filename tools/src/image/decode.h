// decode.h: the two decode paths of ProcessImage (private to image/). Both decode at a
// power-of-two shrink that still covers the target, into 8-bit grey or sRGB.
//   DecodeJpegTurbo (decode_turbo.cc): JPEGs in YCbCr, RGB or grey without an ICC profile that
//     needs converting, straight into packed pixels through TurboJPEG's DCT scaling.
//   DecodeVips (decode_vips.cc): everything else through libvips: ICC and colour-space
//     conversion to sRGB, alpha onto the background, very large loads box-shrunk first.
// TurboJPEG's errors (tjGetErrorStr2) become ImageFailures in decode_turbo.cc only.
#pragma once

#include <cstdint>
#include <string>

#include "base/c_handles.h"
#include "image/image_pipeline.h"
#include "image/sniff.h"

namespace mm::pack {

// Pixels of one decoded image: [height, width, bands] uint8, bands 1 (grey) or 3 (sRGB).
struct Decoded {
  const uint8_t* pixels = nullptr;
  int width = 0, height = 0, bands = 0;
  GMemoryPtr vips_mem;  // libvips output
};

/// 1: decoded into `out` at 1/`shrink` (1, 2, 4 or 8) per side; 0: not handled here (CMYK,
/// YCCK, a header TurboJPEG refuses): use DecodeVips; -1: failed (`failure` says why). `out`'s
/// pixels stay valid until this thread's next decode.
int DecodeJpegTurbo(const std::string& bytes, int shrink, Decoded* out, ImageFailure* failure);

/// Decodes `bytes` (of `kind`; `header`: libvips' header image when the caller opened one)
/// at `shrink` where the codec can (JPEG, WebP), with colour to 8-bit sRGB (grey stays one
/// band), alpha flattened onto `opt.background`, and loads far above `need_w` x `need_h` (the
/// size the caller resizes to, stored orientation) box-shrunk. False and `failure` on error.
bool DecodeVips(VipsImagePtr header, ImageKind kind, const std::string& bytes,
                const ImageOptions& opt, int shrink, int64_t need_w, int64_t need_h, Decoded* out,
                ImageFailure* failure);

}  // namespace mm::pack
