// fit.h: how a source image is fitted to the output size (ProcessImage, image_pipeline.h),
// in two parts:
//   PlanFit        the geometry, a pure function of sizes (no pixels): the power-of-two shrink
//                  to decode at, the size to resize to, the window of it that is kept, where it
//                  lands in the output, valid_box;
//   PlaceOriented  the resized pixels copied into the output, with the EXIF orientation
//                  applied and the pad background around them.
// Modes: center-crop covers the output and crops the middle, pad fits inside it and is
// letterboxed (centred), stretch scales both axes independently.
#pragma once

#include <cstdint>

#include "image/image_pipeline.h"

namespace mm::pack {

/// The geometry of one image's fit; all sizes and positions in pixels. The resized size may
/// be far larger than either image (a 1x10,000,000 source covering 224x224 is resized to
/// 224 x 2,240,000,000 and cropped to its middle), so it and positions in it are 64-bit; only
/// the window that is kept is ever computed (win_w x win_h, at most the output's size).
struct FitPlan {
  bool swap = false;                     // orientation 5..8: stored turned by 90 degrees
  int oriented_w = 0, oriented_h = 0;    // the source after orientation (original_size)
  int shrink = 1;                        // decode at 1/shrink per side: 1, 2, 4 or 8
  int64_t resized_w = 0, resized_h = 0;  // the oriented source resized, before the fit
  int64_t need_w = 0, need_h = 0;        // the same in the stored orientation
  int64_t x = 0, y = 0;                  // its top-left in the output (< 0: cropped)
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;    // the output region it covers, [x0, x1) x [y0, y1)
  // The window of the resized image (stored orientation) that is kept: the output region
  // [x0, x1) x [y0, y1) mapped back through the orientation. Only it is resized.
  int64_t win_x = 0, win_y = 0;
  int win_w = 0, win_h = 0;
  int valid_box[4] = {0, 0, 0, 0};  // x, y, width, height of the image region of the output
};

/// The largest output side PlanFit takes: with sources below 2^31 pixels a side, every
/// resized size stays below 2^44, exact in the double arithmetic of the resampler (2^53).
constexpr int kMaxFitSide = 1 << 13;

/// The fit of a source of `raw_w` x `raw_h` pixels (stored orientation, both > 0) with EXIF
/// `orientation` (1..8; other values as 1) into `out_w` x `out_h` (each 1..kMaxFitSide) in
/// `mode`. The shrink is the largest power of two whose decode (rounded down, 427 / 4 = 106)
/// still covers `need_w` x `need_h`, so the resize always shrinks: no near-1 upscale that
/// would shift the content.
FitPlan PlanFit(int raw_w, int raw_h, int orientation, int out_w, int out_h,
                format::ResizeMode mode);

/// Writes `resized` (the plan's window: [win_h, win_w, bands] uint8, bands 1 or 3) into
/// out->pixels ([opt.height, opt.width, 3] uint8, resized here) with `orientation` applied,
/// the background around it in pad mode, and out->valid_box.
void PlaceOriented(const uint8_t* resized, int bands, int orientation, const FitPlan& plan,
                   const ImageOptions& opt, ProcessedImage* out);

}  // namespace mm::pack
