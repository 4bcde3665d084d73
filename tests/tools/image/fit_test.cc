// Tests of image/fit.h's PlanFit: the fit geometry as a pure function of sizes, no pixels.
// Expected figures are worked out in the comments from the modes' definitions.
#include "image/fit.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mm::pack {
namespace {

TEST(PlanFit, CenterCropCoversAndComputesOnlyTheKeptMiddle) {
  // 640x480 -> 224x224: scale max(224/640, 224/480) = 0.4667, resized 299x224 (640 * 0.4667
  // = 298.7); the 75 columns that overhang are cropped, 37 on the left.
  FitPlan p = PlanFit(640, 480, 1, 224, 224, ResizeMode::kCenterCrop);
  EXPECT_EQ(p.oriented_w, 640);
  EXPECT_EQ(p.oriented_h, 480);
  EXPECT_EQ(p.resized_w, 299);
  EXPECT_EQ(p.resized_h, 224);
  EXPECT_EQ(p.shrink, 2);  // 1 / 0.4667 = 2.14; 640/2 = 320 >= 299 and 480/2 = 240 >= 224
  EXPECT_EQ(p.x, -37);
  EXPECT_EQ(p.y, 0);
  EXPECT_EQ(p.win_x, 37);  // upright: only the kept window is resized
  EXPECT_EQ(p.win_w, 224);
  EXPECT_EQ(p.win_h, 224);
  EXPECT_EQ(p.x0, 0);
  EXPECT_EQ(p.x1, 224);
  const int full[4] = {0, 0, 224, 224};
  EXPECT_TRUE(std::equal(full, full + 4, p.valid_box));
}

TEST(PlanFit, PadFitsInsideAndRecordsTheLetterbox) {
  // 640x480 -> 224x224: scale min = 0.35, resized 224x168, centred 28 rows down.
  FitPlan p = PlanFit(640, 480, 1, 224, 224, ResizeMode::kPad);
  EXPECT_EQ(p.resized_w, 224);
  EXPECT_EQ(p.resized_h, 168);
  EXPECT_EQ(p.shrink, 2);  // 1 / 0.35 = 2.86
  EXPECT_EQ(p.y0, 28);
  EXPECT_EQ(p.y1, 196);
  const int box[4] = {0, 28, 224, 168};
  EXPECT_TRUE(std::equal(box, box + 4, p.valid_box));
}

TEST(PlanFit, StretchScalesEachAxisOnItsOwn) {
  // 640x480 -> 160x96: scales 0.25 and 0.2; the decode shrink follows the larger (1/4).
  FitPlan p = PlanFit(640, 480, 1, 160, 96, ResizeMode::kStretch);
  EXPECT_EQ(p.resized_w, 160);
  EXPECT_EQ(p.resized_h, 96);
  EXPECT_EQ(p.shrink, 4);
  EXPECT_EQ(p.x, 0);
  EXPECT_EQ(p.y, 0);
  EXPECT_EQ(p.win_w, 160);
  EXPECT_EQ(p.win_h, 96);
}

TEST(PlanFit, TurnedOrientationsSwapTheFrameAndResizeTheWholeImage) {
  // Stored 640x480 with EXIF 6 (turned 90 degrees) shows as 480x640: resized 224x299 shown,
  // 299x224 stored; not upright, so the whole stored image is resized and cropped afterwards.
  FitPlan p = PlanFit(640, 480, 6, 224, 224, ResizeMode::kCenterCrop);
  EXPECT_TRUE(p.swap);
  EXPECT_EQ(p.oriented_w, 480);
  EXPECT_EQ(p.oriented_h, 640);
  EXPECT_EQ(p.resized_w, 224);
  EXPECT_EQ(p.resized_h, 299);
  EXPECT_EQ(p.need_w, 299);
  EXPECT_EQ(p.need_h, 224);
  EXPECT_EQ(p.win_x, 0);
  EXPECT_EQ(p.win_w, 299);
  EXPECT_EQ(p.win_h, 224);
  EXPECT_EQ(p.y, -37);
  // Mirrors (2..4) keep the frame but still resize everything.
  FitPlan m = PlanFit(640, 480, 2, 224, 224, ResizeMode::kCenterCrop);
  EXPECT_FALSE(m.swap);
  EXPECT_EQ(m.win_w, 299);
}

TEST(PlanFit, ShrinkNeverDecodesBelowTheResizeTarget) {
  // 673x448 -> 224: scale 0.5, so 1/2 would do by the ratio, but 673/2 = 336 (rounded down)
  // < 337 columns needed: decode at full size and shrink in the resize instead.
  EXPECT_EQ(PlanFit(673, 448, 1, 224, 224, ResizeMode::kCenterCrop).shrink, 1);
  // 1195x896 -> 224: 1/4 by the ratio, but 1195/4 = 298 < 299: 1/2.
  EXPECT_EQ(PlanFit(1195, 896, 1, 224, 224, ResizeMode::kCenterCrop).shrink, 2);
  // An exact power of two is taken: 896 -> 224 is 1/4.
  EXPECT_EQ(PlanFit(896, 896, 1, 224, 224, ResizeMode::kCenterCrop).shrink, 4);
  // Never beyond 1/8.
  EXPECT_EQ(PlanFit(8000, 8000, 1, 224, 224, ResizeMode::kCenterCrop).shrink, 8);
}

TEST(PlanFit, ATinySourceIsEnlargedNotShrunk) {
  // 10x5 -> 224: scale max(22.4, 44.8) = 44.8: resized 448x224, no shrink.
  FitPlan p = PlanFit(10, 5, 1, 224, 224, ResizeMode::kCenterCrop);
  EXPECT_EQ(p.shrink, 1);
  EXPECT_EQ(p.resized_w, 448);
  EXPECT_EQ(p.resized_h, 224);
  EXPECT_EQ(p.x, -112);
}

}  // namespace
}  // namespace mm::pack
