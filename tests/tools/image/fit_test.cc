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
  FitPlan p = PlanFit(640, 480, 1, 224, 224, format::ResizeMode::kCenterCrop);
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
  FitPlan p = PlanFit(640, 480, 1, 224, 224, format::ResizeMode::kPad);
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
  FitPlan p = PlanFit(640, 480, 1, 160, 96, format::ResizeMode::kStretch);
  EXPECT_EQ(p.resized_w, 160);
  EXPECT_EQ(p.resized_h, 96);
  EXPECT_EQ(p.shrink, 4);
  EXPECT_EQ(p.x, 0);
  EXPECT_EQ(p.y, 0);
  EXPECT_EQ(p.win_w, 160);
  EXPECT_EQ(p.win_h, 96);
}

TEST(PlanFit, TurnedOrientationsSwapTheFrameAndResizeOnlyTheKeptWindow) {
  // Stored 640x480 with EXIF 6 (turned 90 degrees) shows as 480x640: resized 224x299 shown,
  // 299x224 stored; shown rows [37, 261) are kept (y = -37), which are stored columns
  // [37, 261) (6 transposes, then mirrors stored rows: all 224 of them are kept).
  FitPlan p = PlanFit(640, 480, 6, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_TRUE(p.swap);
  EXPECT_EQ(p.oriented_w, 480);
  EXPECT_EQ(p.oriented_h, 640);
  EXPECT_EQ(p.resized_w, 224);
  EXPECT_EQ(p.resized_h, 299);
  EXPECT_EQ(p.need_w, 299);
  EXPECT_EQ(p.need_h, 224);
  EXPECT_EQ(p.y, -37);
  EXPECT_EQ(p.win_x, 37);
  EXPECT_EQ(p.win_w, 224);
  EXPECT_EQ(p.win_y, 0);
  EXPECT_EQ(p.win_h, 224);
  // Mirrors keep the frame; a left-right mirror keeps shown columns [37, 261) of 299, which
  // are stored columns 298 - 260 .. 298 - 37 = [38, 262).
  FitPlan m = PlanFit(640, 480, 2, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_FALSE(m.swap);
  EXPECT_EQ(m.win_x, 38);
  EXPECT_EQ(m.win_w, 224);
  // Orientation 8 (transpose, then mirror stored columns): shown rows [37, 261) of 299 are
  // stored columns [38, 262).
  FitPlan e = PlanFit(640, 480, 8, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_EQ(e.win_x, 38);
  EXPECT_EQ(e.win_w, 224);
  EXPECT_EQ(e.win_h, 224);
}

TEST(PlanFit, ExtremeAspectIsCroppedIn64BitNotStretched) {
  // 1x10,000,000 -> 224x224 center-crop: scale 224, resized 224 x 2,240,000,000 (over 2^31:
  // an int overflowed here and the image came out stretched); the middle 224 rows are kept,
  // from (2,240,000,000 - 224) / 2 = 1,119,999,888 on.
  FitPlan p = PlanFit(1, 10000000, 1, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_EQ(p.resized_w, 224);
  EXPECT_EQ(p.resized_h, 2240000000);
  EXPECT_EQ(p.y, -1119999888);
  EXPECT_EQ(p.win_y, 1119999888);
  EXPECT_EQ(p.win_w, 224);
  EXPECT_EQ(p.win_h, 224);
  EXPECT_EQ(p.shrink, 1);
  // The same source turned by EXIF 6 (shows as 10,000,000 x 1): the kept shown columns are
  // stored rows, mirrored (6 mirrors stored rows): [2,240,000,000 - 1,120,000,112, ...).
  FitPlan t = PlanFit(1, 10000000, 6, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_EQ(t.oriented_w, 10000000);
  EXPECT_EQ(t.need_h, 2240000000);
  EXPECT_EQ(t.win_y, 1119999888);
  EXPECT_EQ(t.win_h, 224);
  EXPECT_EQ(t.win_w, 224);
  // A 3x60000 JPEG turned by EXIF 6 (issue 9: it took 6 GB): a 224x224 window, nothing more.
  FitPlan j = PlanFit(3, 60000, 6, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_EQ(static_cast<int64_t>(j.win_w) * j.win_h, 224 * 224);
  // The largest sides: 2^31 - 1 by 1 into 8192 x 8192 stays exact.
  FitPlan big =
      PlanFit(1, 2147483647, 1, kMaxFitSide, kMaxFitSide, format::ResizeMode::kCenterCrop);
  EXPECT_EQ(big.resized_h, int64_t{2147483647} * kMaxFitSide);
  EXPECT_EQ(big.win_h, kMaxFitSide);
  EXPECT_EQ(big.win_y, (big.resized_h - kMaxFitSide) / 2);
}

TEST(PlanFit, ShrinkNeverDecodesBelowTheResizeTarget) {
  // 673x448 -> 224: scale 0.5, so 1/2 would do by the ratio, but 673/2 = 336 (rounded down)
  // < 337 columns needed: decode at full size and shrink in the resize instead.
  EXPECT_EQ(PlanFit(673, 448, 1, 224, 224, format::ResizeMode::kCenterCrop).shrink, 1);
  // 1195x896 -> 224: 1/4 by the ratio, but 1195/4 = 298 < 299: 1/2.
  EXPECT_EQ(PlanFit(1195, 896, 1, 224, 224, format::ResizeMode::kCenterCrop).shrink, 2);
  // An exact power of two is taken: 896 -> 224 is 1/4.
  EXPECT_EQ(PlanFit(896, 896, 1, 224, 224, format::ResizeMode::kCenterCrop).shrink, 4);
  // Never beyond 1/8.
  EXPECT_EQ(PlanFit(8000, 8000, 1, 224, 224, format::ResizeMode::kCenterCrop).shrink, 8);
}

TEST(PlanFit, ATinySourceIsEnlargedNotShrunk) {
  // 10x5 -> 224: scale max(22.4, 44.8) = 44.8: resized 448x224, no shrink.
  FitPlan p = PlanFit(10, 5, 1, 224, 224, format::ResizeMode::kCenterCrop);
  EXPECT_EQ(p.shrink, 1);
  EXPECT_EQ(p.resized_w, 448);
  EXPECT_EQ(p.resized_h, 224);
  EXPECT_EQ(p.x, -112);
}

}  // namespace
}  // namespace mm::pack
