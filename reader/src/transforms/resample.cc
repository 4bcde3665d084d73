// resample.cc: see mm/internal/resample.h.
#include "mm/internal/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// The two passes are plain loops over bytes; -O3's vectoriser makes them several times
// faster (the project builds -O2), and on x86-64 an AVX2 clone is picked at run time. Integer
// arithmetic only: every clone gives the same bytes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define MM_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MM_VECTOR_CLONES
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MM_RESAMPLE_AVX2 1
#else
#define MM_RESAMPLE_AVX2 0
#endif

namespace mm::image {
namespace {

constexpr int kPrecisionBits = 14;
constexpr double kSupport = 3.0;  // Lanczos-3

// The kernel's support at scale 1: 3 for Lanczos-3, 1 for the triangle (bilinear).
double SupportOf(Filter filter) { return filter == Filter::kBilinear ? 1.0 : kSupport; }

// For each output coordinate of a window [out0, out0 + n) of an axis of out_size pixels: the
// first source index and fixed-point weights, as Pillow's precompute_coeffs (centre sampling:
// out pixel i covers source [in0 + i*scale, in0 + (i+1)*scale) with scale = (in1 - in0) /
// out_size). Only the window's pixels are computed, so the cost follows what is kept, not the
// virtual size: a 1x1,000,000 source fitted to 224x224 is resized to 224 x 224,000,000 and
// cropped (the whole axis would be 8 GB of coefficients). Indices are relative to out0.
struct Coeffs {
  int taps = 0;                 // weights per output pixel (max)
  std::vector<int> first;       // [n] first source index
  std::vector<int> count;       // [n] weights used
  std::vector<int32_t> weight;  // [n, taps]
};

Coeffs Precompute(int in_size, double in0, double in1, int64_t out_size, int64_t out0, int n_out,
                  Filter filter) {
  const double scale = (in1 - in0) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = SupportOf(filter) * filter_scale;
  Coeffs c;
  c.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(n_out);
  c.count.resize(n_out);
  c.weight.assign(static_cast<size_t>(n_out) * c.taps, 0);
  std::vector<double> w(c.taps);
  const double step = 1.0 / filter_scale;  // x between neighbouring taps
  const double cos_a = std::cos(M_PI * step), sin_a = std::sin(M_PI * step);
  const double cos_b = std::cos(M_PI * step / kSupport), sin_b = std::sin(M_PI * step / kSupport);
  for (int i = 0; i < n_out; ++i) {
    // (out0 + i) is exact in a double (< 2^53): the same centres as the whole axis would have.
    const double centre = in0 + (static_cast<double>(out0 + i) + 0.5) * scale;
    int lo = static_cast<int>(centre - support + 0.5);
    int hi = static_cast<int>(centre + support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    int n = std::min(hi - lo, c.taps);
    // lanczos3(x) = sin(pi x) sin(pi x / 3) / (pi^2 x^2 / 3) at x = x0 + k * step: the two
    // sines advance by rotation (angle addition), four trigonometric calls per output pixel
    // instead of two per tap (they were the largest part of the coefficient cost).
    const double x0 = (lo - centre + 0.5) / filter_scale;
    double sa = std::sin(M_PI * x0), ca = std::cos(M_PI * x0);
    double sb = std::sin(M_PI * x0 / kSupport), cb = std::cos(M_PI * x0 / kSupport);
    double total = 0;
    for (int k = 0; k < n; ++k) {
      const double x = x0 + k * step;
      if (filter == Filter::kBilinear) {  // Pillow's bilinear_filter: the triangle 1 - |x|
        w[k] = std::abs(x) < 1.0 ? 1.0 - std::abs(x) : 0.0;
        total += w[k];
        continue;
      }
      if (std::abs(x) < 1e-9) {
        w[k] = 1.0;
      } else if (std::abs(x) >= kSupport) {
        w[k] = 0.0;
      } else {
        w[k] = sa * sb * kSupport / (M_PI * M_PI * x * x);
      }
      total += w[k];
      const double sa1 = sa * cos_a + ca * sin_a, sb1 = sb * cos_b + cb * sin_b;
      ca = ca * cos_a - sa * sin_a;
      cb = cb * cos_b - sb * sin_b;
      sa = sa1;
      sb = sb1;
    }
    c.first[i] = lo;
    c.count[i] = n;
    int32_t* out = &c.weight[static_cast<size_t>(i) * c.taps];
    for (int k = 0; k < n; ++k) {
      double v = total != 0.0 ? w[k] / total : (k == 0 ? 1.0 : 0.0);
      out[k] = static_cast<int32_t>(std::floor(v * (1 << kPrecisionBits) + 0.5));
    }
  }
  return c;
}

// Coefficients depend only on (in_size, box, out_size): datasets repeat sizes, so each thread
// keeps the last few per axis (random crops miss; their coefficients cost little next to the
// passes).
// The window [out0, out0 + n_out) of the axis; the whole axis by default.
const Coeffs& CachedCoeffs(int in_size, double in0, double in1, int64_t out_size, int axis,
                           int64_t out0 = 0, int n_out = -1, Filter filter = Filter::kLanczos3) {
  struct Entry {
    Filter filter = Filter::kLanczos3;
    int in = -1, n = -1;
    int64_t out = -1, out0 = -1;
    double in0 = 0, in1 = 0;
    Coeffs coeffs;
  };
  constexpr int kEntries = 4;
  thread_local Entry cache[2][kEntries];
  thread_local int next[2] = {0, 0};
  if (n_out < 0) n_out = static_cast<int>(out_size);
  for (Entry& e : cache[axis]) {
    if (e.in == in_size && e.out == out_size && e.in0 == in0 && e.in1 == in1 && e.out0 == out0 &&
        e.n == n_out && e.filter == filter) {
      return e.coeffs;
    }
  }
  Entry& e = cache[axis][next[axis]];
  next[axis] = (next[axis] + 1) % kEntries;
  e.in = in_size;
  e.out = out_size;
  e.out0 = out0;
  e.n = n_out;
  e.in0 = in0;
  e.in1 = in1;
  e.filter = filter;
  e.coeffs = Precompute(in_size, in0, in1, out_size, out0, n_out, filter);
  return e.coeffs;
}

// One pass along columns: output rows [y0, y0 + rows) from the source rows each one
// covers, all `row_bytes` bytes of a row at once. The inner loop runs over contiguous bytes,
// which the compiler vectorises (AVX2 where the CPU has it, chosen at run time).
MM_VECTOR_CLONES void Pass(const uint8_t* src, int src_stride, int row_bytes, const Coeffs& c,
                           int src_row0, int y0, int rows, uint8_t* dst) {
  thread_local std::vector<int32_t> acc;  // scratch, reused: no page faults per image
  acc.resize(row_bytes);
  for (int y = 0; y < rows; ++y) {
    const int oy = y0 + y;
    int32_t* a = acc.data();
    for (int i = 0; i < row_bytes; ++i) a[i] = 1 << (kPrecisionBits - 1);
    const int32_t* w = &c.weight[static_cast<size_t>(oy) * c.taps];
    // Weights fit int16 (|w| <= 1 << kPrecisionBits): 16x16->32 multiplies, which the
    // vectoriser turns into pmaddwd-style code, about twice as fast as 32-bit multiplies.
    for (int k = 0, n = c.count[oy]; k < n; ++k) {
      const uint8_t* in = src + static_cast<size_t>(c.first[oy] + k - src_row0) * src_stride;
      const int16_t wk = static_cast<int16_t>(w[k]);
      for (int i = 0; i < row_bytes; ++i) {
        a[i] += static_cast<int32_t>(static_cast<int16_t>(in[i]) * wk);
      }
    }
    uint8_t* out = dst + static_cast<size_t>(y) * row_bytes;
    for (int i = 0; i < row_bytes; ++i) {
      int32_t v = a[i] >> kPrecisionBits;
      out[i] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
    }
  }
}

#if MM_RESAMPLE_AVX2
// Pass with AVX2 intrinsics, the same integer arithmetic as Pass (identical bytes): two taps
// at a time through vpmaddwd, which multiplies interleaved 16-bit (row k, row k+1) byte
// pairs by (w[k], w[k+1]) and adds each pair into one 32-bit lane, so one instruction does 16
// multiply-adds; 32 bytes of the row per step in four accumulators kept in registers over
// all taps. What the vectoriser makes of Pass does 8 with 32-bit multiplies and keeps the
// accumulators in memory.
__attribute__((target("avx2"))) void PassAvx2(const uint8_t* src, int src_stride, int row_bytes,
                                              const Coeffs& c, int src_row0, int y0, int rows,
                                              uint8_t* dst) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  for (int y = 0; y < rows; ++y) {
    const int oy = y0 + y;
    const int32_t* w = &c.weight[static_cast<size_t>(oy) * c.taps];
    const int n = c.count[oy];
    const uint8_t* in0 = src + static_cast<size_t>(c.first[oy] - src_row0) * src_stride;
    uint8_t* out = dst + static_cast<size_t>(y) * row_bytes;
    int i = 0;
    for (; i + 32 <= row_bytes; i += 32) {
      __m256i a0 = half, a1 = half, a2 = half, a3 = half;
      for (int k = 0; k < n; k += 2) {
        const uint8_t* r0 = in0 + static_cast<size_t>(k) * src_stride + i;
        // An odd last tap pairs with itself at weight 0 (reads only rows it may read).
        const bool pair = k + 1 < n;
        const uint8_t* r1 = pair ? r0 + src_stride : r0;
        const int32_t w0 = static_cast<uint16_t>(static_cast<int16_t>(w[k]));
        const int32_t w1 = pair ? static_cast<uint16_t>(static_cast<int16_t>(w[k + 1])) : 0;
        const __m256i wp = _mm256_set1_epi32(w0 | (w1 << 16));
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1));
        const __m256i zero = _mm256_setzero_si256();
        // Bytes -> 16-bit (row k, row k+1) pairs: unpack interleaves within 128-bit lanes.
        const __m256i lo = _mm256_unpacklo_epi8(x0, x1);  // bytes 0-7 | 16-23, paired
        const __m256i hi = _mm256_unpackhi_epi8(x0, x1);  // bytes 8-15 | 24-31, paired
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wp));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wp));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wp));
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wp));
      }
      // a0: bytes 0-3 | 16-19, a1: 4-7 | 20-23, a2: 8-11 | 24-27, a3: 12-15 | 28-31.
      a0 = _mm256_srai_epi32(a0, kPrecisionBits);
      a1 = _mm256_srai_epi32(a1, kPrecisionBits);
      a2 = _mm256_srai_epi32(a2, kPrecisionBits);
      a3 = _mm256_srai_epi32(a3, kPrecisionBits);
      const __m256i s01 = _mm256_packs_epi32(a0, a1);   // 0-7 | 16-23, saturated to int16
      const __m256i s23 = _mm256_packs_epi32(a2, a3);   // 8-15 | 24-31
      const __m256i b = _mm256_packus_epi16(s01, s23);  // 0-15 | 16-31, clamped to 0..255
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), b);
    }
    for (; i < row_bytes; ++i) {  // the last < 32 bytes, as Pass
      int32_t a = 1 << (kPrecisionBits - 1);
      const uint8_t* in = in0 + i;
      for (int k = 0; k < n; ++k, in += src_stride) {
        a += static_cast<int32_t>(static_cast<int16_t>(*in) * static_cast<int16_t>(w[k]));
      }
      const int32_t v = a >> kPrecisionBits;
      out[i] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
    }
  }
}

// Asked on first use, not in a static initialiser that could run before libgcc has read the
// CPU's features.
bool HaveAvx2() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  return have;
}
#endif

// Pass, on AVX2 where the CPU has it and `simd` allows.
void PassBest(bool simd, const uint8_t* src, int src_stride, int row_bytes, const Coeffs& c,
              int src_row0, int y0, int rows, uint8_t* dst) {
#if MM_RESAMPLE_AVX2
  if (simd && HaveAvx2()) return PassAvx2(src, src_stride, row_bytes, c, src_row0, y0, rows, dst);
#endif
  Pass(src, src_stride, row_bytes, c, src_row0, y0, rows, dst);
}

// [h, w, C] -> [w, h, C], in 32x32 blocks. Three-byte pixels move as one 4-byte word (not a
// 2- and a 1-byte move): the extra byte lands on the next pixel down the destination row,
// which that pixel's own move (the next y, done later) overwrites; the image's last row has
// no next pixel there (its spill would hit the next destination row), so it moves bytewise.
template <int C>
void Transpose(const uint8_t* src, int w, int h, uint8_t* dst) {
  constexpr int kBlock = 32;
  for (int by = 0; by < h; by += kBlock) {
    for (int bx = 0; bx < w; bx += kBlock) {
      const int ey = std::min(h, by + kBlock), ex = std::min(w, bx + kBlock);
      for (int y = by; y < ey; ++y) {
        const bool word_move = C == 3 && y + 1 < h;
        for (int x = bx; x < ex; ++x) {
          const uint8_t* p = src + (static_cast<size_t>(y) * w + x) * C;
          uint8_t* q = dst + (static_cast<size_t>(x) * h + y) * C;
          if (word_move) {
            uint32_t v;
            std::memcpy(&v, p, 4);  // p[3] exists: src has a row after this one
            std::memcpy(q, &v, 4);
          } else {
            for (int ch = 0; ch < C; ++ch) q[ch] = p[ch];
          }
        }
      }
    }
  }
}

#if MM_RESAMPLE_AVX2
// Transpose<3> in 8x8 blocks with AVX2: each block row's 8 pixels (24 bytes, read as 16 + 8 so
// nothing past them is touched) spread to 8 dwords (R, G, B, 0), the 8x8 dword matrix
// transposed with unpacks and lane permutes, each output row packed back to 24 bytes and
// stored as 16 + 8 bytes, the first 16 of which the second store partly rewrites (so nothing
// past the row's 24 bytes is written). The edges that do not fill a block: Transpose<3>'s
// bytewise copy. Same bytes as Transpose<3> (a copy), several times faster: the transposes
// were most of a load-time crop's resize.
__attribute__((target("avx2"))) void TransposeRgbAvx2(const uint8_t* src, int w, int h,
                                                      uint8_t* dst) {
  const __m256i spread = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,  //
                                          0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
  const __m256i pack = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const int h8 = h - h % 8, w8 = w - w % 8;
  for (int by = 0; by < h8; by += 8) {
    for (int bx = 0; bx < w8; bx += 8) {
      __m256i r[8];
      for (int i = 0; i < 8; ++i) {
        const uint8_t* p = src + (static_cast<size_t>(by + i) * w + bx) * 3;
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));       // 0..15
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 16));  // 16..23
        const __m128i hi = _mm_alignr_epi8(b, a, 12);                                 // 12..27
        r[i] = _mm256_shuffle_epi8(_mm256_set_m128i(hi, a), spread);
      }
      const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
      const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
      const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
      const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
      const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
      const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
      const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
      const __m256i o[8] = {_mm256_permute2x128_si256(u0, u4, 0x20),
                            _mm256_permute2x128_si256(u1, u5, 0x20),
                            _mm256_permute2x128_si256(u2, u6, 0x20),
                            _mm256_permute2x128_si256(u3, u7, 0x20),
                            _mm256_permute2x128_si256(u0, u4, 0x31),
                            _mm256_permute2x128_si256(u1, u5, 0x31),
                            _mm256_permute2x128_si256(u2, u6, 0x31),
                            _mm256_permute2x128_si256(u3, u7, 0x31)};
      for (int j = 0; j < 8; ++j) {
        uint8_t* q = dst + (static_cast<size_t>(bx + j) * h + by) * 3;
        const __m256i packed = _mm256_shuffle_epi8(o[j], pack);  // 12 bytes in each lane
        const __m128i lo = _mm256_castsi256_si128(packed);
        const __m128i hi = _mm256_extracti128_si256(packed, 1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q), lo);  // bytes 0..11 (+4 rewritten)
        _mm_storel_epi64(reinterpret_cast<__m128i*>(q + 12), hi);  // 12..19
        const int32_t tail = _mm_cvtsi128_si32(_mm_srli_si128(hi, 8));
        std::memcpy(q + 20, &tail, 4);  // 20..23
      }
    }
  }
  // The edges: rows past the last whole block, and the columns right of it.
  for (int y = 0; y < h; ++y) {
    for (int x = (y < h8 ? w8 : 0); x < w; ++x) {
      const uint8_t* p = src + (static_cast<size_t>(y) * w + x) * 3;
      uint8_t* q = dst + (static_cast<size_t>(x) * h + y) * 3;
      q[0] = p[0];
      q[1] = p[1];
      q[2] = p[2];
    }
  }
}
#endif

void TransposeAny(const uint8_t* src, int w, int h, int channels, uint8_t* dst, bool simd) {
#if MM_RESAMPLE_AVX2
  if (simd && channels == 3 && HaveAvx2()) return TransposeRgbAvx2(src, w, h, dst);
#endif
  switch (channels) {
    case 1:
      Transpose<1>(src, w, h, dst);
      break;
    case 2:
      Transpose<2>(src, w, h, dst);
      break;
    case 3:
      Transpose<3>(src, w, h, dst);
      break;
    default:
      Transpose<4>(src, w, h, dst);
      break;
  }
}

// The two passes over `box`: rows first (fewer output rows than source rows when shrinking),
// then columns as rows of the transposed image, so that the same vectorised pass does them.
// `cx`/`cy` map output columns/rows to source pixels of the full image; `src` points at full
// image pixel (src_x0, src_y0). Output: [win_h, win_w, C] where the window is
// [win_x, win_x + win_w) x [win_y, win_y + win_h) of the coefficient tables' outputs.
void TwoPasses(const uint8_t* src, int src_x0, int src_y0, int src_stride, int channels,
               const Coeffs& cx, const Coeffs& cy, int win_x, int win_y, int win_w, int win_h,
               uint8_t* dst, bool simd) {
  // Scratch reused across calls on this thread (fresh large buffers cost page faults).
  thread_local std::vector<uint8_t> mid, t, cols;
  // Only the source columns the window's output columns read: [col0, col1).
  int col0 = cx.first[win_x], col1 = col0;
  for (int x = win_x; x < win_x + win_w; ++x) {
    col0 = std::min(col0, cx.first[x]);
    col1 = std::max(col1, cx.first[x] + cx.count[x]);
  }
  const int cw = col1 - col0;
  // Rows: [win_h, cw, C].
  mid.resize(static_cast<size_t>(win_h) * cw * channels);
  PassBest(simd, src + static_cast<size_t>(col0 - src_x0) * channels, src_stride, cw * channels, cy,
           src_y0, win_y, win_h, mid.data());
  // Columns: [cw, win_h, C] -> [win_w, win_h, C] -> [win_h, win_w, C].
  t.resize(mid.size());
  TransposeAny(mid.data(), cw, win_h, channels, t.data(), simd);
  cols.resize(static_cast<size_t>(win_w) * win_h * channels);
  PassBest(simd, t.data(), win_h * channels, win_h * channels, cx, col0, win_x, win_w, cols.data());
  TransposeAny(cols.data(), win_h, win_w, channels, dst, simd);
}

}  // namespace

void ResizeLanczos3(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                    int64_t dst_w, int64_t dst_h, int64_t win_x, int64_t win_y, int win_w,
                    int win_h, std::vector<uint8_t>* dst, bool simd) {
  dst->resize(static_cast<size_t>(win_w) * win_h * channels);
  const Coeffs& cx = CachedCoeffs(src_w, 0.0, src_w, dst_w, 0, win_x, win_w, Filter::kLanczos3);
  const Coeffs& cy = CachedCoeffs(src_h, 0.0, src_h, dst_h, 1, win_y, win_h, Filter::kLanczos3);
  TwoPasses(src, 0, 0, src_stride, channels, cx, cy, 0, 0, win_w, win_h, dst->data(), simd);
}

void ResampleSupport(int in_size, double box_lo, double box_hi, int out_size, int* first,
                     int* last, Filter filter) {
  const Coeffs& c = CachedCoeffs(in_size, box_lo, box_hi, out_size, 0, 0, -1, filter);
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
  const Coeffs& cx = CachedCoeffs(full_w, box.x0, box.x1, out_w, 0, 0, -1, filter);
  const Coeffs& cy = CachedCoeffs(full_h, box.y0, box.y1, out_h, 1, 0, -1, filter);
  TwoPasses(src, src_x0, src_y0, src_stride, channels, cx, cy, 0, 0, out_w, out_h, dst, simd);
}

bool ResampleHasAvx2() {
#if MM_RESAMPLE_AVX2
  return HaveAvx2();
#else
  return false;
#endif
}

}  // namespace mm::image
