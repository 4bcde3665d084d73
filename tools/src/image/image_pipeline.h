// image_pipeline.h: one encoded image in, one [H, W, 3] uint8 sRGB image out (libvips).
//
// Steps, per sample, on the calling thread (libvips' own threading is set to 1: mmpack
// parallelises across samples):
//   1. sniff the type from the magic bytes (JPEG, PNG, GIF, WebP, TIFF, BMP; anything else
//      is unsupported_format) and read the size from the file's own header, then libvips'
//      header (EXIF orientation): width*height > max_pixels is refused (too_many_pixels)
//      before any pixel is decoded;
//   2. decode at the largest power-of-two shrink that still covers the target (JPEG: DCT
//      scaling 1/2, 1/4, 1/8; WebP: `scale`), first frame/page only, truncated data an error.
//      JPEGs (YCbCr, RGB, grey) without an ICC profile, or with an sRGB one, go through
//      TurboJPEG straight into packed RGB or grey; other JPEGs (CMYK, YCCK, tagged with
//      another profile) and every other format through libvips (sequential access,
//      `fail_on` = truncated), where colour becomes 8-bit sRGB: an embedded RGB or grey ICC
//      profile that is not sRGB (Adobe RGB, ProPhoto/ROMM, Display P3, ...; JPEG APP2, PNG
//      iCCP, TIFF, WebP ICCP) through vips_icc_transform to sRGB (relative colorimetric, as
//      Pillow's ImageCms and browsers do); CMYK through ICC (embedded profile, else libvips'
//      CMYK default); grey/16-bit/palette/other interpretations through vips_colourspace;
//      alpha composited onto the background (vips_flatten); very large loads are box-shrunk
//      (vips_shrink, streaming) to about twice the target first;
//   3. resize with an antialiased Lanczos-3 filter (resample.h, Pillow's method) in the
//      stored orientation, only the window that is kept;
//   4. apply the EXIF orientation (1..8) and fit: center-crop (cover, crop the middle), pad
//      (contain, letterbox centred on the background), stretch (both axes independently);
//      keep-ratio / keep-ratio-largest: the image's own aspect ratio, scaled down so that its
//      shorter / longer side is at most max_size (KeepRatioSize), never up.
// Errors from libvips (vips_error_buffer, vips_errors.cc) and TurboJPEG (tjGetErrorStr2,
// decode_turbo.cc) are translated there only. Files: sniff.h, jpeg_metadata.h, decode.h,
// resample.h, colour.h; image_pipeline.cc runs the steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "image/colour.h"
#include "mm/format.h"
#include "mm/status.h"

namespace mm::pack {

struct ImageOptions {
  int width = 224;   // output pixels (fixed-size modes)
  int height = 224;  // output pixels
  format::ResizeMode mode = format::ResizeMode::kCenterCrop;
  // Keep-ratio modes: the bound of the shorter (kKeepRatio) or longer (kKeepRatioLargest) side;
  // the image is scaled down to it, never up, and kKeepRatio's longer side also to at most
  // kMaxFitSide (fit.h).
  int max_size = 0;
  Rgb background;                 // behind alpha and around a padded image
  int64_t max_pixels = 89478485;  // width*height of the source, from its header
};

struct ProcessedImage {
  int width = 0, height = 0;    // pixels: the options' size, or the keep-ratio size
  std::vector<uint8_t> pixels;  // [height, width, 3] uint8, sRGB, row-major
  int32_t original_width = 0;   // source pixels, after EXIF orientation
  int32_t original_height = 0;
  int32_t valid_box[4] = {0, 0, 0, 0};  // x, y, width, height of the image region
};

/// Why an image failed, as report.json names it.
struct ImageFailure {
  std::string reason;  // unsupported_format | too_many_pixels | corrupt_image | truncated_image
  std::string detail;  // one line, libvips' message where there is one
};

/// The size, pixels, that a keep-ratio mode gives an image of `w` x `h` (after orientation):
/// scale = min(1, max_size / bounded side, kMaxFitSide / longer side), each side
/// max(1, round(side * scale)); the bounded side is the shorter (kKeepRatio) or the longer
/// (kKeepRatioLargest) one. Images already within the bound keep their size.
void KeepRatioSize(int w, int h, format::ResizeMode mode, int max_size, int* out_w, int* out_h);

/// Encodes [height, width, 3] uint8 RGB as a baseline JPEG (libjpeg-turbo, 4:2:0, `quality`
/// 1..100, JFIF, no EXIF: the pixels are already oriented and sRGB), with a restart marker every
/// JpegRestartMcus(width) MCUs (mm/internal/jpeg_encode.h). Thread-safe (one compressor per
/// thread). Errors: InvalidArgument, Internal with libjpeg's message.
[[nodiscard]] Result<std::vector<uint8_t>> EncodeJpeg(const uint8_t* rgb, int width, int height,
                                                      int quality);

/// Decodes a JPEG that EncodeJpeg wrote, `width` x `height`, into [height, width, 3] uint8 RGB
/// as the reader's ShardSet::ReadImage does (TurboJPEG with its defaults: ISLOW IDCT, fancy
/// chroma upsampling), so that hashes of the result equal hashes of a stored image read back
/// (--append --dedup, build_append.h). Thread-safe (one decompressor per thread).
/// Errors: Corruption (TurboJPEG's message, or another size).
[[nodiscard]] Result<std::vector<uint8_t>> DecodeStoredJpeg(const std::vector<uint8_t>& jpeg,
                                                            int width, int height);

/// Starts libvips once per process (VIPS_INIT, concurrency 1, operation cache off so memory
/// does not grow with the input). Thread-safe; ProcessImage calls it too.
/// Errors: Internal.
[[nodiscard]] Status InitVips();

/// Decodes and fits one encoded image (`bytes`: the file's contents).
/// Thread-safe: call from many threads at once, one image each.
/// Returns true and fills `out`, or false and fills `failure`; `out` is then unspecified.
/// The reason depends only on the bytes (not on timing), so reports are the same at any
/// thread count; so does the detail: libvips' error buffer is process-wide, so a decode that
/// failed in libvips is run once more while no other libvips work runs, and the detail is that
/// run's message.
bool ProcessImage(const std::string& bytes, const ImageOptions& options, ProcessedImage* out,
                  ImageFailure* failure);

}  // namespace mm::pack
