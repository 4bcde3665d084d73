// Tests of resample.h: exactness where the answer is known, Pillow's LANCZOS as the reference
// elsewhere, and windows that equal the same part of the full result.
#include "image/resample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "pack_test_util.h"

namespace mm::pack {
namespace {

std::vector<uint8_t> Noise(int w, int h, int c, unsigned seed) {
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * c);
  for (auto& x : v) {
    seed = seed * 1103515245u + 12345u;
    x = static_cast<uint8_t>(seed >> 16);
  }
  return v;
}

TEST(ResizeLanczos3, SameSizeIsIdentityAndConstantStaysConstant) {
  std::vector<uint8_t> src = Noise(37, 23, 3, 1), dst;
  ResizeLanczos3(src.data(), 37, 23, 37 * 3, 3, 37, 23, 0, 0, 37, 23, &dst);
  EXPECT_EQ(dst, src);
  std::vector<uint8_t> flat(300 * 200, 77);
  ResizeLanczos3(flat.data(), 300, 200, 300, 1, 41, 97, 0, 0, 41, 97, &dst);
  ASSERT_EQ(dst.size(), 41u * 97);
  for (uint8_t v : dst) ASSERT_EQ(v, 77);
}

// The AVX2 kernel does the portable loops' integer arithmetic: same bytes, for shrinks and
// enlargements, odd and even tap counts, rows that are and are not a multiple of 32 bytes,
// 1..4 channels and windows; noise drives the negative lobes into the clamps at 0 and 255.
TEST(ResizeLanczos3, Avx2KernelGivesThePortableBytes) {
  if (!ResampleHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2";
  struct Case {
    int sw, sh, c, dw, dh;
  };
  const Case cases[] = {{640, 427, 3, 336, 224}, {320, 240, 3, 299, 224}, {77, 51, 3, 224, 160},
                        {433, 300, 1, 323, 224}, {97, 65, 4, 31, 29},     {500, 375, 2, 64, 48},
                        {33, 1000, 3, 16, 500},  {1000, 7, 3, 40, 3}};
  unsigned seed = 5;
  for (const Case& k : cases) {
    const std::vector<uint8_t> src = Noise(k.sw, k.sh, k.c, ++seed);
    std::vector<uint8_t> fast, portable;
    ResizeLanczos3(src.data(), k.sw, k.sh, k.sw * k.c, k.c, k.dw, k.dh, 0, 0, k.dw, k.dh, &fast,
                   /*simd=*/true);
    ResizeLanczos3(src.data(), k.sw, k.sh, k.sw * k.c, k.c, k.dw, k.dh, 0, 0, k.dw, k.dh, &portable,
                   /*simd=*/false);
    EXPECT_EQ(fast, portable) << k.sw << "x" << k.sh << "x" << k.c << " -> " << k.dw << "x" << k.dh;
    const int wx = k.dw / 5, wy = k.dh / 7, ww = k.dw - 2 * wx, wh = k.dh - 2 * wy;
    ResizeLanczos3(src.data(), k.sw, k.sh, k.sw * k.c, k.c, k.dw, k.dh, wx, wy, ww, wh, &fast,
                   /*simd=*/true);
    ResizeLanczos3(src.data(), k.sw, k.sh, k.sw * k.c, k.c, k.dw, k.dh, wx, wy, ww, wh, &portable,
                   /*simd=*/false);
    EXPECT_EQ(fast, portable) << "window of " << k.sw << "x" << k.sh << "x" << k.c;
  }
}

TEST(ResizeLanczos3, WindowEqualsThatPartOfTheWholeResult) {
  std::vector<uint8_t> src = Noise(640, 427, 3, 2), whole, part;
  ResizeLanczos3(src.data(), 640, 427, 640 * 3, 3, 336, 224, 0, 0, 336, 224, &whole);
  ResizeLanczos3(src.data(), 640, 427, 640 * 3, 3, 336, 224, 56, 0, 224, 224, &part);
  ASSERT_EQ(part.size(), 224u * 224 * 3);
  for (int y = 0; y < 224; ++y) {
    for (int x = 0; x < 224 * 3; ++x) {
      ASSERT_EQ(part[(y * 224) * 3 + x], whole[(y * 336 + 56) * 3 + x]) << y << "," << x;
    }
  }
}

TEST(ResizeLanczos3, MatchesPillowLanczosWithinRounding) {
  // Smooth content (noise would only measure rounding of ringing): a blurred pattern.
  const int w = 300, h = 200;
  std::vector<uint8_t> src(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        src[(y * w + x) * 3 + c] =
            static_cast<uint8_t>(127 + 120 * std::sin(x * 0.05 * (c + 1)) * std::cos(y * 0.07));
      }
    }
  }
  TempDir tmp;
  WriteBytes(tmp / "src.raw", std::string(src.begin(), src.end()));
  for (auto [ow, oh] : {std::pair{224, 150}, std::pair{97, 61}, std::pair{450, 320}}) {
    std::vector<uint8_t> got;
    ResizeLanczos3(src.data(), w, h, w * 3, 3, ow, oh, 0, 0, ow, oh, &got);
    WriteBytes(tmp / "got.raw", std::string(got.begin(), got.end()));
    int rc = 0;
    std::string out = RunPython(R"(
import numpy as np
from PIL import Image
src = np.fromfile()" + Py(tmp / "src.raw") +
                                    R"(, np.uint8).reshape(200, 300, 3)
ref = np.asarray(Image.fromarray(src).resize(()" +
                                    std::to_string(ow) + ", " + std::to_string(oh) +
                                    R"(), Image.LANCZOS)).astype(int)
got = np.fromfile()" + Py(tmp / "got.raw") +
                                    R"(, np.uint8).astype(int).reshape(ref.shape)
d = np.abs(ref - got)
print(d.max(), d.mean())
)",
                                &rc);
    ASSERT_EQ(rc, 0) << out;
    std::istringstream in(out);
    int max_diff = 0;
    double mean_diff = 0;
    in >> max_diff >> mean_diff;
    EXPECT_LE(max_diff, 2) << ow << "x" << oh;
    EXPECT_LT(mean_diff, 0.5) << ow << "x" << oh;
  }
}

}  // namespace
}  // namespace mm::pack
