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

/// The geometry of one image's fit; all sizes and positions in pixels.
struct FitPlan {
  bool swap = false;                   // orientation 5..8: the stored image is turned by 90 degrees
  int oriented_w = 0, oriented_h = 0;  // the source after orientation (original_size)
  int shrink = 1;                      // decode at 1/shrink per side: 1, 2, 4 or 8
  int resized_w = 0, resized_h = 0;    // what the oriented source is resized to before the fit
  int need_w = 0, need_h = 0;          // the same in the stored orientation
  int x = 0, y = 0;                    // the resized image's top-left in the output (< 0: cropped)
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the output region it covers, [x0, x1) x [y0, y1)
  // The window of the resized image (stored orientation) that is computed: for an upright
  // image only the part that is kept, else all of it.
  int win_x = 0, win_y = 0, win_w = 0, win_h = 0;
  int valid_box[4] = {0, 0, 0, 0};  // x, y, width, height of the image region of the output
};

/// The fit of a source of `raw_w` x `raw_h` pixels (stored orientation, both > 0) with EXIF
/// `orientation` (1..8) into `out_w` x `out_h` in `mode`. The shrink is the largest power of
/// two whose decode (rounded down, 427 / 4 = 106) still covers `need_w` x `need_h`, so the
/// resize always shrinks: no near-1 upscale that would shift the content.
FitPlan PlanFit(int raw_w, int raw_h, int orientation, int out_w, int out_h, ResizeMode mode);

/// Writes `resized` (the plan's window: [win_h, win_w, bands] uint8, bands 1 or 3) into
/// out->pixels ([opt.height, opt.width, 3] uint8, resized here) with `orientation` applied,
/// the background around it in pad mode, and out->valid_box.
void PlaceOriented(const uint8_t* resized, int bands, int orientation, const FitPlan& plan,
                   const ImageOptions& opt, ProcessedImage* out);

}  // namespace mm::pack
