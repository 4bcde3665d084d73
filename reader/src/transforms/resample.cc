// resample.cc: see mm/internal/resample.h. The coefficients are resample_coeffs.cc's, the
// passes resample_pass.cc's, the transposes resample_transpose.cc's; this file puts them
// together (TwoPasses) and answers which SIMD the CPU has.
#include "mm/internal/resample.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "transforms/resample_coeffs.h"
#include "transforms/resample_pass.h"
#include "transforms/resample_transpose.h"

// Last: its pragma applies to what follows.
#include "transforms/resample_simd.h"

namespace mm::image {
namespace internal {

#if MM_RESAMPLE_AVX2
// Asked on first use, not in a static initialiser that could run before libgcc has read the
// CPU's features.
bool HaveAvx2() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  return have;
}

namespace {
std::atomic<bool> g_allow_avx512{true};  // SetResampleSimdLevelForTesting
}  // namespace

// AVX-512 with BW (byte and word shuffles) and VNNI (vpdpwssd): Ice Lake, Sapphire Rapids and
// later Xeons, Zen 4 and later.
bool HaveAvx512() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                      __builtin_cpu_supports("avx512bw") &&
                                                      __builtin_cpu_supports("avx512vnni"));
  return have && g_allow_avx512.load(std::memory_order_relaxed);
}

bool HaveAvx512Vbmi() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                      __builtin_cpu_supports("avx512bw") &&
                                                      __builtin_cpu_supports("avx512vbmi"));
  return have && g_allow_avx512.load(std::memory_order_relaxed);
}
#endif

}  // namespace internal

namespace {

using internal::CachedCoeffs;
using internal::Coeffs;
using internal::PassBest;
using internal::PassRowAlign;
using internal::TransposeAny;
#if MM_RESAMPLE_AVX2
using internal::g_allow_avx512;
using internal::HaveAvx2;
using internal::HaveAvx512;
#endif

// The two passes over `box`: rows first (fewer output rows than source rows when shrinking),
// then columns as rows of the transposed image, so that the same vectorised pass does them.
// `cx`/`cy` map output columns/rows to source pixels of the full image; `src` points at full
// image pixel (src_x0, src_y0). Output: [win_h, win_w, C] where the window is
// [win_x, win_x + win_w) x [win_y, win_y + win_h) of the coefficient tables' outputs.
// In bands of kBandRows output rows, each through both passes and both transposes before the
// next: the scratch of a band (about 40 KB at 224 px) stays in the core's caches, where whole
// images' (4 x 150 KB) went out to memory between the passes, and the transposes, which only
// move bytes, paid for it (26% of a raw crop's CPU in the loader, against 16% alone).
void TwoPasses(const uint8_t* src, int src_x0, int src_y0, int src_stride, int channels,
               const Coeffs& cx, const Coeffs& cy, int win_x, int win_y, int win_w, int win_h,
               uint8_t* dst, bool simd) {
  constexpr int kBandRows = 64;
  // Scratch reused across calls on this thread (fresh large buffers cost page faults), grown
  // and never shrunk (a vector's resize zero-fills what it grows by).
  thread_local std::vector<uint8_t> mid, t, cols, out;
  const auto grow = [](std::vector<uint8_t>* v, size_t n) {
    if (v->size() < n) v->resize(n);
  };
  // Only the source columns the window's output columns read: [col0, col1).
  int col0 = cx.first[win_x], col1 = col0;
  for (int x = win_x; x < win_x + win_w; ++x) {
    col0 = std::min(col0, cx.first[x]);
    col1 = std::max(col1, cx.first[x] + cx.count[x]);
  }
  const int cw = col1 - col0;
  // Bands start at multiples of the vertical pass's plan groups (planned once for all bands).
  const int align = PassRowAlign(cy);
  const int band = std::min(std::max(align, kBandRows / align * align), win_h);
  grow(&mid, static_cast<size_t>(band) * cw * channels);
  grow(&t, static_cast<size_t>(band) * cw * channels);
  grow(&cols, static_cast<size_t>(win_w) * band * channels);
  grow(&out, static_cast<size_t>(win_w) * band * channels);
  for (int y = 0; y < win_h; y += band) {
    const int h = std::min(band, win_h - y);
    // Rows: [h, cw, C].
    PassBest(simd, src + static_cast<size_t>(col0 - src_x0) * channels, src_stride, cw * channels,
             cy, src_y0, win_y, win_h, y, y + h, mid.data());
    // Columns: [cw, h, C] -> [win_w, h, C] -> [h, win_w, C], rows y.. of dst.
    TransposeAny(mid.data(), cw, h, channels, t.data(), simd);
    PassBest(simd, t.data(), h * channels, h * channels, cx, col0, win_x, win_w, 0, win_w,
             cols.data());
    // Through a scratch band, then copied: the transpose writes each destination row 24 bytes
    // at a time, and into a batch buffer that is not in the cache (the loader's) those partial
    // lines each cost a read from memory first; a copy writes whole lines in order.
    uint8_t* band_dst = dst + static_cast<size_t>(y) * win_w * channels;
    TransposeAny(cols.data(), h, win_w, channels, out.data(), simd);
    std::memcpy(band_dst, out.data(), static_cast<size_t>(h) * win_w * channels);
  }
}

}  // namespace

void ResizeLanczos3(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                    int64_t dst_w, int64_t dst_h, int64_t win_x, int64_t win_y, int win_w,
                    int win_h, std::vector<uint8_t>* dst, bool simd) {
  dst->resize(static_cast<size_t>(win_w) * win_h * channels);
  const Coeffs& cx = CachedCoeffs(src_w, 0.0, src_w, dst_w, win_x, win_w, Filter::kLanczos3);
  const Coeffs& cy = CachedCoeffs(src_h, 0.0, src_h, dst_h, win_y, win_h, Filter::kLanczos3);
  TwoPasses(src, 0, 0, src_stride, channels, cx, cy, 0, 0, win_w, win_h, dst->data(), simd);
}

void ResampleSupport(int in_size, double box_lo, double box_hi, int out_size, int* first, int* last,
                     Filter filter) {
  const Coeffs& c = CachedCoeffs(in_size, box_lo, box_hi, out_size, 0, -1, filter);
  int lo = in_size, hi = 0;
  for (int i = 0; i < out_size; ++i) {
    lo = std::min(lo, c.first[i]);
    hi = std::max(hi, c.first[i] + c.count[i]);
  }
  *first = lo;
  *last = std::max(lo, hi);
}

void ResizeBox(const uint8_t* src, int src_x0, int src_y0, int src_stride, int full_w, int full_h,
               int channels, const Box& box, int out_w, int out_h, uint8_t* dst, Filter filter,
               bool simd) {
  const Coeffs& cx = CachedCoeffs(full_w, box.x0, box.x1, out_w, 0, -1, filter);
  const Coeffs& cy = CachedCoeffs(full_h, box.y0, box.y1, out_h, 0, -1, filter);
  TwoPasses(src, src_x0, src_y0, src_stride, channels, cx, cy, 0, 0, out_w, out_h, dst, simd);
}

void SetResampleSimdLevelForTesting(SimdLevel level) {
#if MM_RESAMPLE_AVX2
  g_allow_avx512.store(level == SimdLevel::kBest, std::memory_order_relaxed);
#else
  (void)level;
#endif
}

bool ResampleHasAvx512() {
#if MM_RESAMPLE_AVX2
  return HaveAvx512();
#else
  return false;
#endif
}

bool ResampleHasAvx2() {
#if MM_RESAMPLE_AVX2
  return HaveAvx2();
#else
  return false;
#endif
}

}  // namespace mm::image
