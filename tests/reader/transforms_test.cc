// The reader's load-time transforms (reader/src/transforms): the crop sampler against the real
// torchvision (python3-torchvision), JPEG region decoding against a full decode, and decode +
// crop + resize against Pillow on real photos.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "image/jpeg_encode.h"
#include "mm/internal/resample.h"
#include "order/sampler.h"
#include "shard_fixture.h"
#include "transforms/crop_resize.h"
#include "transforms/crop_window.h"
#include "transforms/jpeg_region.h"

namespace mm::reader::internal {
namespace {

using mm::testing::ReadFile;
using mm::testing::SharedDir;
using mm::testing::TempDir;

// Runs Debian's Python on tests/reader/`script` with `args`; its stdout, or fails the test.
std::string RunScript(const std::string& script, const std::string& args) {
  const std::string cmd =
      std::string(MM_PYTHON) + " '" + MM_SOURCE_DIR + "/tests/reader/" + script + "' " + args;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen " << cmd;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd << "\n" << out;
  return out;
}

TEST(CounterRng, SameKeySameDrawsOtherKeyOtherDraws) {
  CounterRng a(42), b(42), c(43);
  for (int k = 0; k < 100; ++k) {
    const uint64_t va = a.Next();
    EXPECT_EQ(va, b.Next());
    EXPECT_NE(va, c.Next());
  }
  CounterRng u(7);
  for (int k = 0; k < 10000; ++k) {
    const double v = u.Uniform(0.08, 1.0);
    ASSERT_GE(v, 0.08);
    ASSERT_LT(v, 1.0);
    const int64_t i = u.Below(5);
    ASSERT_GE(i, 0);
    ASSERT_LT(i, 5);
  }
}

TEST(CropWindow, RoundHalfEvenIsPythonsRound) {
  EXPECT_EQ(RoundHalfEven(0.5), 0);
  EXPECT_EQ(RoundHalfEven(1.5), 2);
  EXPECT_EQ(RoundHalfEven(2.5), 2);
  EXPECT_EQ(RoundHalfEven(66.5), 66);
  EXPECT_EQ(RoundHalfEven(66.6667), 67);
  EXPECT_EQ(RoundHalfEven(3.49), 3);
}

// The same statistics as tests/reader/torchvision_rrc.py, from our sampler.
std::vector<double> OurStats(int n, int width, int height) {
  const double lo = std::log(3.0 / 4) - 0.05, hi = std::log(4.0 / 3) + 0.05;
  std::vector<double> s(22, 0.0);
  for (int k = 0; k < n; ++k) {
    CounterRng rng(SampleHash(0, 0, k, kCropSalt));
    const CropWindow c = RandomResizedCrop(width, height, {}, &rng);
    EXPECT_GT(c.w, 0);
    EXPECT_GT(c.h, 0);
    EXPECT_LE(c.x + c.w, width);
    EXPECT_LE(c.y + c.h, height);
    const double area = static_cast<double>(c.w) * c.h / (static_cast<double>(width) * height);
    s[std::min(9, static_cast<int>(10 * area))] += 1.0 / n;
    const int rb =
        static_cast<int>(10 * (std::log(static_cast<double>(c.w) / c.h) - lo) / (hi - lo));
    s[10 + std::clamp(rb, 0, 9)] += 1.0 / n;
    s[20] += (c.x + c.w / 2.0) / width / n;
    s[21] += (c.y + c.h / 2.0) / height / n;
  }
  return s;
}

// Histograms of area fraction and log aspect ratio, and the mean crop centre, of our sampler
// and of torchvision's get_params (5,000 draws each): every bin within 0.025 (the difference of
// two independent estimates of a proportion p = 0.15 has a standard deviation of 0.007; 0.025
// is 3.5 of them) and the centres within 0.01. On 1000x50 and 50x1000 no try can succeed, so
// both fall back and must agree exactly.
TEST(CropWindow, RandomResizedCropMatchesTorchvisionStatistics) {
  const int n = 5000;
  const std::string out =
      RunScript("torchvision_rrc.py", "5000 256 256 640 427 300 900 1000 50 50 1000");
  std::istringstream in(out);
  int width, height, lines = 0;
  while (in >> width >> height) {
    ++lines;
    std::vector<double> ref(22);
    for (double& v : ref) in >> v;
    CropWindow first;
    in >> first.x >> first.y >> first.w >> first.h;
    const std::vector<double> ours = OurStats(n, width, height);
    for (int b = 0; b < 20; ++b) {
      EXPECT_NEAR(ours[b], ref[b], 0.025)
          << width << "x" << height << (b < 10 ? " area bin " : " log-ratio bin ") << b % 10;
    }
    EXPECT_NEAR(ours[20], ref[20], 0.01) << width << "x" << height << " mean centre x";
    EXPECT_NEAR(ours[21], ref[21], 0.01) << width << "x" << height << " mean centre y";
    if (std::max(width, height) >= 20 * std::min(width, height)) {  // always the fallback
      CounterRng rng(1);
      const CropWindow c = RandomResizedCrop(width, height, {}, &rng);
      EXPECT_EQ(c.x, first.x);
      EXPECT_EQ(c.y, first.y);
      EXPECT_EQ(c.w, first.w);
      EXPECT_EQ(c.h, first.h);
    }
  }
  EXPECT_EQ(lines, 5) << out;
}

TEST(CropWindow, FallbackClampsTheRatioAndCentres) {
  CounterRng rng(3);
  // 1000x50: ratio 20 > 4/3: h = 50, w = round(50 * 4/3) = 67, centred at (1000 - 67) // 2.
  CropWindow c = RandomResizedCrop(1000, 50, {}, &rng);
  EXPECT_EQ(c.w, 67);
  EXPECT_EQ(c.h, 50);
  EXPECT_EQ(c.x, 466);
  EXPECT_EQ(c.y, 0);
  // A scale range no crop can meet (more than the whole image): the whole image, ratio in range.
  RandomResizedCropParams too_big;
  too_big.scale_min = 1.5;
  too_big.scale_max = 2.0;
  c = RandomResizedCrop(300, 250, too_big, &rng);
  EXPECT_EQ(c.x, 0);
  EXPECT_EQ(c.y, 0);
  EXPECT_EQ(c.w, 300);
  EXPECT_EQ(c.h, 250);
}

TEST(CropWindow, CenterCropIsFfcvsGetCenterCrop) {
  // FFCV: c = int(224/256 * min(640, 480)) = 420, offsets (640 - 420) // 2, (480 - 420) // 2.
  CropWindow c = CenterCrop(640, 480, 224, 224, 224.0 / 256);
  EXPECT_EQ(c.w, 420);
  EXPECT_EQ(c.h, 420);
  EXPECT_EQ(c.x, 110);
  EXPECT_EQ(c.y, 30);
  // Ratio 1, output 2:1 on a 300x300 image: the widest 2:1 window, 300x150, centred.
  c = CenterCrop(300, 300, 200, 100, 1.0);
  EXPECT_EQ(c.w, 300);
  EXPECT_EQ(c.h, 150);
  EXPECT_EQ(c.x, 0);
  EXPECT_EQ(c.y, 75);
}

TEST(CropResize, JpegScaleIsTheSmallestThatCoversTheOutput) {
  EXPECT_EQ(JpegScaleFor({0, 0, 1792, 1792}, 224, 224), 1);  // exactly 8x
  EXPECT_EQ(JpegScaleFor({0, 0, 1791, 1792}, 224, 224), 2);
  EXPECT_EQ(JpegScaleFor({0, 0, 448, 448}, 224, 224), 4);
  EXPECT_EQ(JpegScaleFor({0, 0, 300, 300}, 224, 224), 6);  // 300 * 6/8 = 225 >= 224
  EXPECT_EQ(JpegScaleFor({0, 0, 100, 100}, 224, 224), 8);  // enlargement: full size
  EXPECT_EQ(JpegScaleFor({0, 0, 900, 230}, 224, 224), 8);  // the short side decides
}

TEST(CropResize, FlipMirrorsRows) {
  std::vector<uint8_t> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  FlipHorizontal(p.data(), 3, 2);
  EXPECT_EQ(p,
            (std::vector<uint8_t>{7, 8, 9, 4, 5, 6, 1, 2, 3, 16, 17, 18, 13, 14, 15, 10, 11, 12}));
}

// Real photos as the JPEGs mmpack stores (Pillow, quality 90, 4:2:0, longer side <= 320).
struct Photo {
  std::string jpeg;  // file bytes
  std::string rgb;   // Pillow's decode, [h, w, 3]
  int w = 0, h = 0;
};

std::vector<Photo> WritePhotos(const TempDir& tmp, int count) {
  const std::string out =
      RunScript("pillow_crops.py", "'" + SharedDir() + "/data/coco-cc/images' '" + tmp.path() +
                                       "' " + std::to_string(count) + " 320");
  std::istringstream in(out);
  std::vector<Photo> photos;
  int k, w, h;
  while (in >> k >> w >> h) {
    Photo p;
    p.jpeg = ReadFile(tmp / (std::to_string(k) + ".jpg"));
    p.rgb = ReadFile(tmp / (std::to_string(k) + ".rgb"));
    p.w = w;
    p.h = h;
    photos.push_back(std::move(p));
  }
  EXPECT_EQ(static_cast<int>(photos.size()), count) << out;
  return photos;
}

// The region decoder (cropped columns, skipped rows, DCT scaling) gives the pixels a full
// decode at the same scale gives, inside the region, away from its edges' upsampling context.
TEST(JpegRegion, RegionEqualsTheSamePartOfAFullDecode) {
  TempDir tmp("mm_transforms");
  const std::vector<Photo> photos = WritePhotos(tmp, 3);
  for (const Photo& p : photos) {
    const auto* data = reinterpret_cast<const uint8_t*>(p.jpeg.data());
    for (int num : {8, 5, 4, 1}) {
      JpegRegion full;
      ASSERT_TRUE(DecodeJpegRegion(data, p.jpeg.size(), num, 0, 0, 1 << 20, 1 << 20, &full).ok());
      ASSERT_EQ(full.scaled_w, JpegScaled(p.w, num));
      ASSERT_EQ(full.scaled_h, JpegScaled(p.h, num));
      const std::vector<uint8_t> whole(
          full.pixels, full.pixels + static_cast<size_t>(full.stride) * full.scaled_h);
      const int x0 = full.scaled_w / 3, x1 = full.scaled_w * 3 / 4;
      const int y0 = full.scaled_h / 4, y1 = full.scaled_h * 2 / 3;
      JpegRegion r;
      ASSERT_TRUE(DecodeJpegRegion(data, p.jpeg.size(), num, x0, y0, x1, y1, &r).ok());
      ASSERT_LE(r.x0, x0);
      ASSERT_GE(r.x1, x1);
      ASSERT_EQ(r.y0, y0);
      ASSERT_EQ(r.y1, y1);
      int differ = 0;
      for (int y = y0 + 2; y < y1 - 2; ++y) {
        for (int x = x0 + 2; x < x1 - 2; ++x) {
          for (int c = 0; c < 3; ++c) {
            differ += whole[static_cast<size_t>(y) * full.stride + x * 3 + c] !=
                      r.pixels[static_cast<size_t>(y - r.y0) * r.stride + (x - r.x0) * 3 + c];
          }
        }
      }
      EXPECT_EQ(differ, 0) << "scale " << num << "/8";
    }
  }
}

TEST(JpegRegion, DamagedBytesAreCorruptionNotACrash) {
  TempDir tmp("mm_transforms");
  const std::vector<Photo> photos = WritePhotos(tmp, 1);
  ASSERT_EQ(photos.size(), 1u);
  const std::string& j = photos[0].jpeg;
  JpegRegion r;
  const std::string cut = j.substr(0, j.size() / 2);  // truncated in the entropy data
  Status st = DecodeJpegRegion(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), 8, 0, 0,
                               1 << 20, 1 << 20, &r);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  const std::string junk = "not a jpeg at all";
  st = DecodeJpegRegion(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), 8, 0, 0, 10, 10,
                        &r);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  std::vector<uint8_t> out(224 * 224 * 3);
  st = CropResizeJpeg(reinterpret_cast<const uint8_t*>(j.data()), j.size(), photos[0].w + 1,
                      photos[0].h, {0, 0, 100, 100}, 224, 224, false, out.data());
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
}

// One photo's pixels encoded twice by mmpack's encoder: with the restart markers mmpack stores
// (so the loader cuts out the MCUs a crop covers) and without (so it crops scanlines).
// `width` at most the photo's: the left part, to get odd and even MCU counts.
struct TwoEncodings {
  int w = 0, h = 0;
  std::vector<uint8_t> cut, plain;
};

TwoEncodings EncodeBoth(const Photo& p, int width) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * p.h * 3);
  for (int y = 0; y < p.h; ++y) {
    std::memcpy(rgb.data() + static_cast<size_t>(y) * width * 3,
                p.rgb.data() + static_cast<size_t>(y) * p.w * 3, static_cast<size_t>(width) * 3);
  }
  TwoEncodings e;
  e.w = width;
  e.h = p.h;
  auto a = image::EncodeJpegRgb(rgb.data(), width, p.h, 90, image::JpegRestartMcus(width));
  auto b = image::EncodeJpegRgb(rgb.data(), width, p.h, 90, 0);
  EXPECT_TRUE(a.ok() && b.ok());
  if (a.ok()) e.cut = std::move(*a);
  if (b.ok()) e.plain = std::move(*b);
  return e;
}

// Offset of the first `marker` (0xFFxx) segment before the scan, or -1.
int FindMarker(const std::vector<uint8_t>& j, uint8_t marker) {
  for (size_t p = 2; p + 4 <= j.size() && j[p] == 0xFF;) {
    if (j[p + 1] == marker) return static_cast<int>(p);
    if (j[p + 1] == 0xDA) return -1;
    p += 2 + (j[p + 2] << 8 | j[p + 3]);
  }
  return -1;
}

// The stored JPEG's restart interval (the DRI segment), and what it costs.
TEST(JpegEncode, RestartMarkersEveryOneOrTwoMcusAtLittleCost) {
  EXPECT_EQ(image::JpegRestartMcus(256), 2);  // 16 MCUs a row
  EXPECT_EQ(image::JpegRestartMcus(250), 2);
  EXPECT_EQ(image::JpegRestartMcus(240), 1);  // 15
  EXPECT_EQ(image::JpegRestartMcus(1), 1);
  TempDir tmp("mm_transforms");
  for (const Photo& p : WritePhotos(tmp, 2)) {
    for (int width : {p.w, p.w - 16}) {
      const TwoEncodings e = EncodeBoth(p, width);
      const int dri = FindMarker(e.cut, 0xDD);
      ASSERT_GT(dri, 0);
      EXPECT_EQ(e.cut[dri + 4] << 8 | e.cut[dri + 5], image::JpegRestartMcus(width));
      EXPECT_EQ(FindMarker(e.plain, 0xDD), -1);
      EXPECT_LT(e.cut.size(), e.plain.size() * 106 / 100) << width << "x" << p.h;
      // Both decode, whole, to the same pixels: restarts change the coding, not the coefficients.
      std::vector<uint8_t> a(static_cast<size_t>(e.w) * e.h * 3), b(a.size());
      ASSERT_TRUE(DecodeJpeg(e.cut.data(), e.cut.size(), e.w, e.h, a.data()).ok());
      ASSERT_TRUE(DecodeJpeg(e.plain.data(), e.plain.size(), e.w, e.h, b.data()).ok());
      EXPECT_EQ(a, b);
    }
  }
}

// A region decoded from the MCUs cut out of a JPEG with restart markers has the pixels of the
// same region of the same image decoded by cropping scanlines (no restart markers), away from
// its edges' upsampling context; and so the loader's crops give the same bytes either way, for
// random-resized crops, centre crops, enlargements and every DCT scale, with odd and even MCU
// counts a row (restart intervals of 1 and 2 MCUs).
TEST(JpegRegion, CutAtRestartMarkersGivesTheCroppedDecodesPixels) {
  TempDir tmp("mm_transforms");
  int cases = 0, cut_smaller = 0;
  for (const Photo& p : WritePhotos(tmp, 3)) {
    for (int width : {p.w, p.w - 16}) {
      const TwoEncodings e = EncodeBoth(p, width);
      CounterRng rng(7 + width);
      for (int n = 0; n < 40; ++n) {
        const int num = 1 + static_cast<int>(rng.Below(8));
        const int sw = JpegScaled(e.w, num), sh = JpegScaled(e.h, num);
        const int x0 = static_cast<int>(rng.Below(sw)), y0 = static_cast<int>(rng.Below(sh));
        const int x1 = x0 + 1 + static_cast<int>(rng.Below(sw - x0));
        const int y1 = y0 + 1 + static_cast<int>(rng.Below(sh - y0));
        JpegRegion a, b;
        ASSERT_TRUE(DecodeJpegRegion(e.cut.data(), e.cut.size(), num, x0, y0, x1, y1, &a, e.w, e.h)
                        .ok());
        const std::vector<uint8_t> got(a.pixels,
                                       a.pixels + static_cast<size_t>(a.stride) * (a.y1 - a.y0));
        ASSERT_TRUE(DecodeJpegRegion(e.plain.data(), e.plain.size(), num, x0, y0, x1, y1, &b, e.w,
                                     e.h)
                        .ok());
        ASSERT_LE(a.x0, x0);
        ASSERT_GE(a.x1, x1);
        ASSERT_LE(a.y0, y0);
        ASSERT_GE(a.y1, y1);
        EXPECT_EQ(a.scaled_w, sw);
        EXPECT_EQ(a.scaled_h, sh);
        EXPECT_EQ(a.width, e.w);
        EXPECT_EQ(a.height, e.h);
        cut_smaller += (a.x1 - a.x0) < sw || a.y0 > 0;
        int differ = 0;
        for (int y = std::max(y0, a.y0 + 2); y < y1 - 2; ++y) {
          for (int x = std::max(x0, a.x0 + 2); x < std::min(x1, a.x1 - 2); ++x) {
            for (int c = 0; c < 3; ++c) {
              differ += got[static_cast<size_t>(y - a.y0) * a.stride + (x - a.x0) * 3 + c] !=
                        b.pixels[static_cast<size_t>(y - b.y0) * b.stride + (x - b.x0) * 3 + c];
            }
          }
        }
        EXPECT_EQ(differ, 0) << "scale " << num << "/8, region " << x0 << "," << y0 << " " << x1
                             << "," << y1 << " of " << e.w << "x" << e.h;
        ++cases;
      }
      std::vector<CropWindow> windows = {{0, 0, e.w, e.h},
                                         CenterCrop(e.w, e.h, 224, 224, 224.0 / 256),
                                         {e.w / 5, e.h / 7, e.w / 9, e.h / 8},
                                         {e.w - 40, e.h - 30, 40, 30}};
      for (int n = 0; n < 30; ++n) windows.push_back(RandomResizedCrop(e.w, e.h, {}, &rng));
      for (const CropWindow& w : windows) {
        for (auto [ow, oh] : {std::pair{224, 224}, std::pair{64, 48}}) {
          for (image::Filter f : {image::Filter::kLanczos3, image::Filter::kBilinear}) {
            std::vector<uint8_t> a(static_cast<size_t>(ow) * oh * 3), b(a.size());
            ASSERT_TRUE(CropResizeJpeg(e.cut.data(), e.cut.size(), e.w, e.h, w, ow, oh, false,
                                       a.data(), f)
                            .ok());
            ASSERT_TRUE(CropResizeJpeg(e.plain.data(), e.plain.size(), e.w, e.h, w, ow, oh, false,
                                       b.data(), f)
                            .ok());
            EXPECT_EQ(a, b) << "window " << w.x << "," << w.y << " " << w.w << "x" << w.h
                            << " of " << e.w << "x" << e.h << " -> " << ow << "x" << oh;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cut_smaller, cases / 8);  // the cut path did run, on regions smaller than the image
}

// The same at extreme aspect ratios and tiny sizes (clip art, banners, one-pixel lines): one MCU
// row or column, partial MCUs at both edges, restart intervals of one MCU.
TEST(JpegRegion, CutAtRestartMarkersHoldsAtExtremeSizes) {
  CounterRng rng(5);
  for (auto [w, h] : {std::pair{1, 1}, std::pair{1, 300}, std::pair{300, 1}, std::pair{17, 900},
                      std::pair{900, 17}, std::pair{33, 33}, std::pair{2000, 40},
                      std::pair{36, 37}, std::pair{100, 37}, std::pair{67, 20}}) {
    std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        uint8_t* px = &rgb[(static_cast<size_t>(y) * w + x) * 3];
        px[0] = static_cast<uint8_t>(x * 7 + y);
        px[1] = static_cast<uint8_t>((x / 9 + y / 5) % 2 ? 230 : 20);
        px[2] = static_cast<uint8_t>(rng.Below(256));
      }
    }
    auto cut = image::EncodeJpegRgb(rgb.data(), w, h, 90, image::JpegRestartMcus(w));
    auto plain = image::EncodeJpegRgb(rgb.data(), w, h, 90, 0);
    ASSERT_TRUE(cut.ok() && plain.ok());
    std::vector<CropWindow> windows = {{0, 0, w, h}, CenterCrop(w, h, 224, 224, 224.0 / 256)};
    for (int n = 0; n < 20; ++n) windows.push_back(RandomResizedCrop(w, h, {}, &rng));
    // Narrow windows along the right and bottom edges: a cut inside the last, partial MCU
    // column (3 or 4 pixels wide at widths 36, 100, 67) once decoded with box-upsampled chroma.
    for (int x = std::max(0, w - 6); x < w; ++x) windows.push_back({x, h / 3, std::min(2, w - x), h / 2});
    for (int y = std::max(0, h - 6); y < h; ++y) windows.push_back({w / 3, y, w / 2, std::min(2, h - y)});
    for (const CropWindow& win : windows) {
      for (auto [ow, oh] : {std::pair{224, 224}, std::pair{16, 8}, std::pair{2, 8}}) {
        std::vector<uint8_t> a(static_cast<size_t>(ow) * oh * 3), b(a.size());
        ASSERT_TRUE(CropResizeJpeg(cut->data(), cut->size(), w, h, win, ow, oh, false, a.data(),
                                   image::Filter::kBilinear)
                        .ok());
        ASSERT_TRUE(CropResizeJpeg(plain->data(), plain->size(), w, h, win, ow, oh, false,
                                   b.data(), image::Filter::kBilinear)
                        .ok());
        EXPECT_EQ(a, b) << "window " << win.x << "," << win.y << " " << win.w << "x" << win.h
                        << " of " << w << "x" << h << " -> " << ow << "x" << oh;
      }
    }
  }
}

// Damage in a JPEG with restart markers: a truncation, a restart marker out of turn, a table
// that disagrees with the header, and bytes flipped anywhere are Corruption or pixels, never a
// crash or a read outside the bytes (the cut is made only from a scan whose markers all check
// out; anything else is decoded the ordinary way, which names the damage).
TEST(JpegRegion, DamagedJpegsWithRestartMarkersAreCorruptionNotACrash) {
  TempDir tmp("mm_transforms");
  const std::vector<Photo> photos = WritePhotos(tmp, 1);
  ASSERT_EQ(photos.size(), 1u);
  const TwoEncodings e = EncodeBoth(photos[0], photos[0].w);
  std::vector<uint8_t> whole(static_cast<size_t>(e.w) * e.h * 3);
  const std::vector<uint8_t> cut(e.cut.begin(), e.cut.begin() + e.cut.size() * 3 / 5);
  EXPECT_EQ(DecodeJpeg(cut.data(), cut.size(), e.w, e.h, whole.data()).code(),
            StatusCode::kCorruption);
  JpegRegion r;
  // A region below the truncation: the bytes it needs are not there.
  EXPECT_EQ(DecodeJpegRegion(cut.data(), cut.size(), 8, e.w / 2, e.h - 20, e.w, e.h, &r, e.w, e.h)
                .code(),
            StatusCode::kCorruption);
  // The fourth restart marker renumbered: out of turn.
  std::vector<uint8_t> renumbered = e.cut;
  int seen = 0;
  for (size_t p = static_cast<size_t>(FindMarker(e.cut, 0xDA)); p + 1 < renumbered.size(); ++p) {
    if (renumbered[p] == 0xFF && renumbered[p + 1] >= 0xD0 && renumbered[p + 1] <= 0xD7 &&
        ++seen == 4) {
      renumbered[p + 1] = static_cast<uint8_t>(0xD0 + ((renumbered[p + 1] - 0xD0 + 3) & 7));
      break;
    }
  }
  ASSERT_EQ(seen, 4);
  EXPECT_EQ(DecodeJpeg(renumbered.data(), renumbered.size(), e.w, e.h, whole.data()).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeJpegRegion(renumbered.data(), renumbered.size(), 8, e.w / 2, e.h / 2, e.w, e.h,
                             &r, e.w, e.h)
                .code(),
            StatusCode::kCorruption);
  // The image_size table says otherwise: refused before anything is cut or decoded.
  std::vector<uint8_t> out(224 * 224 * 3);
  EXPECT_EQ(CropResizeJpeg(e.cut.data(), e.cut.size(), e.w + 16, e.h, {16, 16, 64, 64}, 224, 224,
                           false, out.data())
                .code(),
            StatusCode::kCorruption);
  // Bytes flipped anywhere (headers, markers, data): whatever comes out, nothing crashes.
  CounterRng rng(99);
  int failed = 0;
  for (int n = 0; n < 300; ++n) {
    std::vector<uint8_t> m = e.cut;
    for (int k = 0; k < 1 + n % 3; ++k) {
      m[static_cast<size_t>(rng.Below(static_cast<int64_t>(m.size())))] ^=
          static_cast<uint8_t>(1 + rng.Below(255));
    }
    const CropWindow w = RandomResizedCrop(e.w, e.h, {}, &rng);
    const Status st =
        CropResizeJpeg(m.data(), m.size(), e.w, e.h, w, 224, 224, n % 2 == 1, out.data());
    EXPECT_TRUE(st.ok() || st.code() == StatusCode::kCorruption ||
                st.code() == StatusCode::kUnsupported)
        << st.ToString();
    failed += !st.ok();
  }
  EXPECT_GT(failed, 0);
}

// Decode + crop + resize against Pillow (full decode, then resize(LANCZOS, box=window)) on real
// photos, for whole images, FFCV's centre crop, random-resized crops, enlargements and crops
// decoded at a reduced DCT scale. Tolerances, in 8-bit levels:
//   raw path (our resize of Pillow's decoded pixels) and JPEG at scale 8/8: mean abs difference
//     below 0.5 and 99% of values within 2: the same decoder (Debian's libjpeg-turbo under
//     both; the JPEG path at 8/8 gives exactly the raw path's bytes, checked) and the same
//     Lanczos weights, but the passes run in another order (we resize rows first, Pillow
//     columns first), so the intermediate rounding and the clamp of the filter's overshoot to
//     0..255 differ: up to ~16 levels at a few saturated edges, 0.25 on average;
//   JPEG at scale < 8/8: the IDCT's own reduction replaces part of the Lanczos low-pass; mean
//     abs difference below 3 and 97.5% of values within 12 (measured on these photos at 2/8 to
//     7/8: mean 1.0..2.6, 97.9..99.99% within 12, worst at 4/8 on a sharp-edged photo; see the
//     printed figures).
TEST(CropResize, MatchesPillowOnRealPhotos) {
  TempDir tmp("mm_transforms");
  const std::vector<Photo> photos = WritePhotos(tmp, 4);
  struct Case {
    int k;
    CropWindow c;
    int ow, oh;
  };
  std::vector<Case> cases;
  for (int k = 0; k < static_cast<int>(photos.size()); ++k) {
    const Photo& p = photos[k];
    cases.push_back({k, {0, 0, p.w, p.h}, 224, 224});
    cases.push_back({k, CenterCrop(p.w, p.h, 224, 224, 224.0 / 256), 224, 224});
    cases.push_back({k, CenterCrop(p.w, p.h, 112, 112, 1.0), 112, 112});   // scale 3..4/8
    cases.push_back({k, {p.w / 5, p.h / 7, p.w / 9, p.h / 8}, 224, 224});  // enlargement
    cases.push_back({k, {1, 3, p.w - 2, p.h - 5}, 64, 48});                // scale 2/8
    CounterRng rng(100 + k);
    for (int r = 0; r < 3; ++r)
      cases.push_back({k, RandomResizedCrop(p.w, p.h, {}, &rng), 96, 160});
  }
  {
    std::ofstream w(tmp / "windows.txt");
    for (const Case& c : cases) {
      w << c.k << " " << c.c.x << " " << c.c.y << " " << c.c.w << " " << c.c.h << " " << c.ow << " "
        << c.oh << "\n";
    }
  }
  RunScript("pillow_crops.py", "- '" + tmp.path() + "' 0 0 crops");
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    const Photo& p = photos[c.k];
    const std::string ref = ReadFile(tmp / ("ref-" + std::to_string(n) + ".rgb"));
    const size_t bytes = static_cast<size_t>(c.ow) * c.oh * 3;
    ASSERT_EQ(ref.size(), bytes);
    std::vector<uint8_t> raw(bytes), jpeg(bytes);
    CropResizePixels(reinterpret_cast<const uint8_t*>(p.rgb.data()), p.w, p.h, c.c, c.ow, c.oh,
                     false, raw.data());
    Status st = CropResizeJpeg(reinterpret_cast<const uint8_t*>(p.jpeg.data()), p.jpeg.size(), p.w,
                               p.h, c.c, c.ow, c.oh, false, jpeg.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    // Max, mean, and the fractions within 2 and 12 levels of Pillow's.
    auto compare = [&](const std::vector<uint8_t>& got, int* max_diff, double* mean, double* in2,
                       double* in12) {
      *max_diff = 0;
      double sum = 0, ok2 = 0, ok12 = 0;
      for (size_t i = 0; i < bytes; ++i) {
        const int d = std::abs(int{got[i]} - int{static_cast<uint8_t>(ref[i])});
        *max_diff = std::max(*max_diff, d);
        sum += d;
        ok2 += d <= 2;
        ok12 += d <= 12;
      }
      *mean = sum / bytes;
      *in2 = ok2 / bytes;
      *in12 = ok12 / bytes;
    };
    int max_raw, max_jpeg;
    double mean_raw, mean_jpeg, in2_raw, in2_jpeg, in12_raw, in_jpeg;
    compare(raw, &max_raw, &mean_raw, &in2_raw, &in12_raw);
    compare(jpeg, &max_jpeg, &mean_jpeg, &in2_jpeg, &in_jpeg);
    const int num = JpegScaleFor(c.c, c.ow, c.oh);
    const std::string what = "photo " + std::to_string(c.k) + " window " + std::to_string(c.c.x) +
                             "," + std::to_string(c.c.y) + " " + std::to_string(c.c.w) + "x" +
                             std::to_string(c.c.h) + " -> " + std::to_string(c.ow) + "x" +
                             std::to_string(c.oh) + " scale " + std::to_string(num) + "/8";
    std::printf("%s: raw max %d mean %.3f within-2 %.4f; jpeg max %d mean %.3f within-12 %.4f\n",
                what.c_str(), max_raw, mean_raw, in2_raw, max_jpeg, mean_jpeg, in_jpeg);
    EXPECT_GE(in2_raw, 0.99) << what;
    EXPECT_LT(mean_raw, 0.5) << what;
    if (num == 8) {
      EXPECT_EQ(jpeg, raw) << what;  // region decode == Pillow's full decode
    } else {
      EXPECT_LT(mean_jpeg, 3.0) << what;
      EXPECT_GE(in_jpeg, 0.975) << what;
    }
  }
}

}  // namespace
}  // namespace mm::reader::internal
