// image_pipeline.cc: see image_pipeline.h. One image as named steps: ReadHeader (sniff.h,
// jpeg_metadata.h or libvips' header), PlanFit (fit.h), Decode (decode.h), Resize (resample.h),
// PlaceOriented (fit.h: where the EXIF orientation is applied).
#include "image/image_pipeline.h"

#include <vips/vips.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "image/decode.h"
#include "image/fit.h"
#include "image/jpeg_metadata.h"
#include "image/sniff.h"
#include "image/vips_errors.h"
#include "mm/internal/resample.h"

namespace mm::pack {
namespace {

// What a file's header says, before any pixel is decoded.
struct SourceHeader {
  ImageKind kind = ImageKind::kUnknown;
  int width = 0, height = 0;  // stored orientation
  int orientation = 1;        // EXIF, 1..8
  VipsImagePtr vips;          // libvips' header image (not for JPEGs), reused by DecodeVips
};

// w * h > max_pixels, without forming the product (a PNG header states up to 2^32 - 1 a side).
bool OverPixelBudget(int64_t w, int64_t h, const ImageOptions& opt) {
  return w > 0 && h > 0 && (w > opt.max_pixels || h > opt.max_pixels / w);
}

bool TooManyPixels(int64_t w, int64_t h, const ImageOptions& opt, ImageFailure* failure) {
  return Fail(failure, "too_many_pixels",
              std::to_string(w) + "x" + std::to_string(h) + " pixels > --max-pixels " +
                  std::to_string(opt.max_pixels));
}

// Step 1, the header only: the type from the magic bytes, the size from the file's own header
// (a huge image is refused before libvips reads anything), then JPEGs' size from the SOF
// segment and orientation from EXIF (libvips' header costs as much as a tenth of the decode),
// everything else's from libvips' header.
bool ReadHeader(const std::string& bytes, const ImageOptions& opt, SourceHeader* h,
                ImageFailure* failure) {
  if (bytes.empty()) return Fail(failure, "corrupt_image", "empty file");
  h->kind = Sniff(bytes);
  if (h->kind == ImageKind::kUnknown) {
    return Fail(failure, "unsupported_format",
                "not a JPEG, PNG, GIF, WebP, TIFF or BMP file (magic bytes)");
  }
  if (int64_t w = 0, h2 = 0; PeekSize(h->kind, bytes, &w, &h2) && OverPixelBudget(w, h2, opt)) {
    return TooManyPixels(w, h2, opt, failure);
  }
  int64_t peek_w = 0, peek_h = 0;
  if (h->kind == ImageKind::kJpeg && PeekSize(h->kind, bytes, &peek_w, &peek_h) && peek_w > 0 &&
      peek_h > 0) {
    h->width = static_cast<int>(peek_w);
    h->height = static_cast<int>(peek_h);
    h->orientation = JpegExifOrientation(bytes);
  } else {
    h->vips.reset(vips_image_new_from_buffer(bytes.data(), bytes.size(), "", "access",
                                             VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                             VIPS_FAIL_ON_TRUNCATED, nullptr));
    if (!h->vips) return DecodeFail(h->kind, bytes, failure);
    h->width = vips_image_get_width(h->vips.get());
    h->height = vips_image_get_height(h->vips.get());
    if (vips_image_get_typeof(h->vips.get(), VIPS_META_ORIENTATION)) {
      if (vips_image_get_int(h->vips.get(), VIPS_META_ORIENTATION, &h->orientation) != 0) {
        h->orientation = 1;
      }
      if (h->orientation < 1 || h->orientation > 8) h->orientation = 1;
    }
  }
  if (h->width <= 0 || h->height <= 0) return Fail(failure, "corrupt_image", "zero-sized image");
  if (OverPixelBudget(h->width, h->height, opt)) {
    return TooManyPixels(h->width, h->height, opt, failure);
  }
  return true;
}

// Step 2: TurboJPEG for JPEGs it handles whose ICC profile (if any) needs no conversion,
// libvips for the rest; both at the plan's shrink.
bool Decode(const std::string& bytes, SourceHeader* h, const FitPlan& plan, const ImageOptions& opt,
            Decoded* decoded, ImageFailure* failure) {
  int turbo = 0;
  if (h->kind == ImageKind::kJpeg) {
    // A JPEG tagged with a non-sRGB profile is converted by libvips (DecodeVips), not here.
    const std::string icc = JpegIccProfile(bytes);
    const auto* p = reinterpret_cast<const uint8_t*>(icc.data());
    const bool convert = IccNeedsConversion(p, icc.size(), /*grey=*/false) ||
                         IccNeedsConversion(p, icc.size(), /*grey=*/true);
    if (!convert) turbo = DecodeJpegTurbo(bytes, plan.shrink, decoded, failure);
  }
  if (turbo < 0) return false;
  return turbo == 1 || DecodeVips(std::move(h->vips), h->kind, bytes, opt, plan.shrink, plan.need_w,
                                  plan.need_h, decoded, failure);
}

// Step 3: Lanczos-3 in the stored orientation (resample.h, faster than vips_resize at these
// sizes: tests/bench/resample_bench.cc), only the plan's window. Returns [win_h, win_w, bands],
// valid until this thread's next call.
const uint8_t* Resize(const Decoded& d, const FitPlan& plan) {
  thread_local std::vector<uint8_t> resized;  // reused: no page faults per image
  if (d.width == plan.need_w && d.height == plan.need_h && plan.win_w == plan.need_w &&
      plan.win_h == plan.need_h) {
    return d.pixels;
  }
  mm::image::ResizeLanczos3(d.pixels, d.width, d.height, d.width * d.bands, d.bands, plan.need_w,
                            plan.need_h, plan.win_x, plan.win_y, plan.win_w, plan.win_h, &resized);
  return resized.data();
}

// ProcessImage, without the error gate.
bool ProcessImageOnce(const std::string& bytes, const ImageOptions& opt_in, ProcessedImage* out,
                      ImageFailure* failure) {
  const bool fixed = mm::format::IsFixedSize(opt_in.mode);
  if (fixed ? (opt_in.width < 1 || opt_in.height < 1 || opt_in.width > kMaxFitSide ||
               opt_in.height > kMaxFitSide)
            : (opt_in.max_size < 1 || opt_in.max_size > kMaxFitSide)) {
    return Fail(failure, "unreadable",
                "output size outside 1.." + std::to_string(kMaxFitSide) + " pixels a side");
  }
  SourceHeader header;
  if (!ReadHeader(bytes, opt_in, &header, failure)) return false;
  ImageOptions opt = opt_in;
  if (!mm::format::IsFixedSize(opt.mode)) {  // the image's own aspect ratio: a stretch to it
    const bool swap = header.orientation >= 5 && header.orientation <= 8;
    KeepRatioSize(swap ? header.height : header.width, swap ? header.width : header.height,
                  opt.mode, opt.max_size, &opt.width, &opt.height);
    opt.mode = format::ResizeMode::kStretch;
  }
  out->width = opt.width;
  out->height = opt.height;
  const FitPlan plan =
      PlanFit(header.width, header.height, header.orientation, opt.width, opt.height, opt.mode);
  out->original_width = plan.oriented_w;
  out->original_height = plan.oriented_h;
  Decoded decoded;
  if (!Decode(bytes, &header, plan, opt, &decoded, failure)) return false;
  // Step 4: orientation (EXIF 1..8) and fit into [height, width, 3].
  PlaceOriented(Resize(decoded, plan), decoded.bands, header.orientation, plan, opt, out);
  return true;
}

}  // namespace

void KeepRatioSize(int w, int h, format::ResizeMode mode, int max_size, int* out_w, int* out_h) {
  const int bounded = mode == format::ResizeMode::kKeepRatio ? std::min(w, h) : std::max(w, h);
  double scale = std::min(1.0, static_cast<double>(max_size) / bounded);
  scale = std::min(scale, static_cast<double>(kMaxFitSide) / std::max(w, h));
  if (scale >= 1.0) {
    *out_w = w;
    *out_h = h;
    return;
  }
  *out_w = std::clamp(static_cast<int>(std::lround(w * scale)), 1, kMaxFitSide);
  *out_h = std::clamp(static_cast<int>(std::lround(h * scale)), 1, kMaxFitSide);
}

bool ProcessImage(const std::string& bytes, const ImageOptions& opt, ProcessedImage* out,
                  ImageFailure* failure) {
  if (Status st = InitVips(); !st.ok()) return Fail(failure, "unreadable", st.message());
  return RunUnderVipsErrorGate([&] { return ProcessImageOnce(bytes, opt, out, failure); });
}

}  // namespace mm::pack
