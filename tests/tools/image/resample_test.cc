// Tests of resample.h: exactness where the answer is known, Pillow's LANCZOS as the reference
// elsewhere, and windows that equal the same part of the full result.
#include "mm/internal/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pack_test_util.h"

namespace mm::pack {
namespace {

using mm::image::Box;
using mm::image::Filter;
using mm::image::ResampleHasAvx2;
using mm::image::ResizeLanczos3;

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
  // On a CPU with AVX-512 the best kernel is that one: here, AVX2's.
  mm::image::SetResampleSimdLevelForTesting(mm::image::SimdLevel::kAvx2);
  struct Restore {
    ~Restore() { mm::image::SetResampleSimdLevelForTesting(mm::image::SimdLevel::kBest); }
  } restore;
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

// The AVX-512 kernel (BW, VNNI) likewise, where the CPU has it: the same cases, and both filters
// through ResizeBox on random windows, against the portable loops.
TEST(ResizeLanczos3, Avx512KernelGivesThePortableBytes) {
  if (!mm::image::ResampleHasAvx512()) GTEST_SKIP() << "this CPU has no AVX-512 BW/VNNI";
  struct Case {
    int sw, sh, c, dw, dh;
  };
  const Case cases[] = {{640, 427, 3, 336, 224}, {320, 240, 3, 299, 224}, {77, 51, 3, 224, 160},
                        {433, 300, 1, 323, 224}, {97, 65, 4, 31, 29},     {500, 375, 2, 64, 48},
                        {33, 1000, 3, 16, 500},  {1000, 7, 3, 40, 3},     {256, 256, 3, 224, 224}};
  unsigned seed = 50;
  for (const Case& k : cases) {
    const std::vector<uint8_t> src = Noise(k.sw, k.sh, k.c, ++seed);
    for (Filter f : {Filter::kLanczos3, Filter::kBilinear}) {
      for (int w = 0; w < 3; ++w) {
        const Box box{w * k.sw / 7.0, w * k.sh / 9.0, k.sw - w * k.sw / 5.0, k.sh - w * 0.375};
        std::vector<uint8_t> fast(static_cast<size_t>(k.dw) * k.dh * k.c), portable(fast.size());
        mm::image::ResizeBox(src.data(), 0, 0, k.sw * k.c, k.sw, k.sh, k.c, box, k.dw, k.dh,
                             fast.data(), f, /*simd=*/true);
        mm::image::ResizeBox(src.data(), 0, 0, k.sw * k.c, k.sw, k.sh, k.c, box, k.dw, k.dh,
                             portable.data(), f, /*simd=*/false);
        EXPECT_EQ(fast, portable) << k.sw << "x" << k.sh << "x" << k.c << " -> " << k.dw << "x"
                                  << k.dh << " window " << w << " bilinear "
                                  << (f == Filter::kBilinear);
      }
    }
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

// The resampler written plainly, as an oracle: Pillow's precompute_coeffs with each tap's
// kernel value computed on its own (std::sin per tap: no rotation, no triple angle, no dropped
// zero taps), then the same passes in the same order (columns of the window, then rows) with
// 14-bit fixed point, rounding and clamping, one scalar loop per output byte. This is what the
// resampler computed before issue 30 made it faster, term by term.
struct RefAxis {
  std::vector<int> first, count;
  std::vector<std::vector<int32_t>> w;
};

RefAxis ReferenceAxis(int in_size, double in0, double in1, int out_size, Filter filter) {
  const double scale = (in1 - in0) / out_size, fs = std::max(scale, 1.0);
  const double support = (filter == Filter::kBilinear ? 1.0 : 3.0) * fs;
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  RefAxis a;
  for (int i = 0; i < out_size; ++i) {
    const double centre = in0 + (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(centre - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(centre + support + 0.5), in_size);
    const int n = std::min(hi - lo, taps);
    std::vector<double> k(n);
    double total = 0;
    for (int j = 0; j < n; ++j) {
      const double x = (lo + j - centre + 0.5) / fs;
      if (filter == Filter::kBilinear) {
        k[j] = std::abs(x) < 1.0 ? 1.0 - std::abs(x) : 0.0;
      } else if (std::abs(x) < 1e-9) {
        k[j] = 1.0;
      } else if (std::abs(x) >= 3.0) {
        k[j] = 0.0;
      } else {
        k[j] = std::sin(M_PI * x) * std::sin(M_PI * x / 3.0) * 3.0 / (M_PI * M_PI * x * x);
      }
      total += k[j];
    }
    std::vector<int32_t> w(n);
    for (int j = 0; j < n; ++j) {
      w[j] = static_cast<int32_t>(std::floor((total != 0 ? k[j] / total : j == 0) * 16384 + 0.5));
    }
    a.first.push_back(lo);
    a.count.push_back(n);
    a.w.push_back(w);
  }
  return a;
}

uint8_t Clamp14(int32_t acc) {
  const int32_t v = acc >> 14;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

std::vector<uint8_t> ReferenceResize(const std::vector<uint8_t>& src, int w, int h, int ch,
                                     const Box& box, int ow, int oh, Filter filter) {
  const RefAxis ax = ReferenceAxis(w, box.x0, box.x1, ow, filter);
  const RefAxis ay = ReferenceAxis(h, box.y0, box.y1, oh, filter);
  std::vector<uint8_t> mid(static_cast<size_t>(oh) * w * ch),
      out(static_cast<size_t>(oh) * ow * ch);
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < w * ch; ++x) {
      int32_t acc = 1 << 13;
      for (int j = 0; j < ay.count[y]; ++j) acc += src[(ay.first[y] + j) * w * ch + x] * ay.w[y][j];
      mid[y * w * ch + x] = Clamp14(acc);
    }
  }
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      for (int c = 0; c < ch; ++c) {
        int32_t acc = 1 << 13;
        for (int j = 0; j < ax.count[x]; ++j) {
          acc += mid[(y * w + ax.first[x] + j) * ch + c] * ax.w[x][j];
        }
        out[(y * ow + x) * ch + c] = Clamp14(acc);
      }
    }
  }
  return out;
}

// Random windows (enlargements, shrinks, thin and wide; fractional box edges as a JPEG's DCT
// scale makes them), both filters, 1 and 3 channels, noise (the negative lobes hit the clamps)
// and smooth pictures, the AVX-512 and AVX2 kernels and the portable loops: every byte within 1
// level of the oracle above, and nearly all identical (the faster coefficients differ from it
// only in the last bits of a double; none of these 50 MB did when this was written).
TEST(ResizeBox, WithinOneLevelOfThePlainResamplerOnRandomWindows) {
  std::mt19937 rng(30);
  int64_t bytes = 0, differ = 0;
  for (int round = 0; round < 400; ++round) {
    const int ch = round % 4 == 3 ? 1 : 3;
    const int w = std::uniform_int_distribution<int>(8, 300)(rng);
    const int h = std::uniform_int_distribution<int>(8, 300)(rng);
    std::vector<uint8_t> src = Noise(w, h, ch, round + 1);
    if (round % 2 == 1) {  // smooth
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w * ch; ++x) {
          src[y * w * ch + x] =
              static_cast<uint8_t>(127 + 120 * std::sin(x * 0.05) * std::cos(y * 0.07));
        }
      }
    }
    std::uniform_real_distribution<double> u(0.0, 1.0);
    Box box;
    box.x0 = std::floor(u(rng) * (w - 1) * 4) / 4;
    box.y0 = std::floor(u(rng) * (h - 1) * 4) / 4;
    box.x1 = std::min<double>(w, box.x0 + 0.25 + std::floor(u(rng) * (w - box.x0) * 4) / 4);
    box.y1 = std::min<double>(h, box.y0 + 0.25 + std::floor(u(rng) * (h - box.y0) * 4) / 4);
    const int ow = std::uniform_int_distribution<int>(1, 260)(rng);
    const int oh = std::uniform_int_distribution<int>(1, 260)(rng);
    const Filter filter = round % 3 == 2 ? Filter::kBilinear : Filter::kLanczos3;
    const std::vector<uint8_t> want = ReferenceResize(src, w, h, ch, box, ow, oh, filter);
    // The best kernel (AVX-512 where the CPU has it), AVX2's, and the portable loops.
    for (int kernel = 0; kernel < 3; ++kernel) {
      const bool simd = kernel < 2;
      mm::image::SetResampleSimdLevelForTesting(kernel == 1 ? mm::image::SimdLevel::kAvx2
                                                            : mm::image::SimdLevel::kBest);
      std::vector<uint8_t> got(want.size());
      mm::image::ResizeBox(src.data(), 0, 0, w * ch, w, h, ch, box, ow, oh, got.data(), filter,
                           simd);
      mm::image::SetResampleSimdLevelForTesting(mm::image::SimdLevel::kBest);
      for (size_t i = 0; i < got.size(); ++i) {
        const int d = std::abs(int{got[i]} - int{want[i]});
        ASSERT_LE(d, 1) << w << "x" << h << "x" << ch << " box " << box.x0 << "," << box.y0 << "-"
                        << box.x1 << "," << box.y1 << " -> " << ow << "x" << oh << " simd " << simd
                        << " byte " << i;
        differ += d != 0;
      }
      bytes += static_cast<int64_t>(got.size());
    }
  }
  std::printf("%lld of %lld bytes differ from the plain resampler (by 1)\n",
              static_cast<long long>(differ), static_cast<long long>(bytes));
  EXPECT_LE(differ, bytes / 100000);
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
