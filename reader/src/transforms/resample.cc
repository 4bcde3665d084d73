// resample.cc: see mm/internal/resample.h.
#include "mm/internal/resample.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

// The two passes are plain loops over bytes; -O3's vectoriser makes them several times
// faster (the project builds -O2), and on x86-64 an AVX2 clone is picked at run time. Integer
// arithmetic only: every clone gives the same bytes. no-trapping-math lets it vectorise the
// kernel's taps too (a division whose result a select may drop; nothing here traps on floating
// point exceptions); values are IEEE's either way.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-trapping-math")
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
// Taps whose fixed-point weight is 0 at either end are dropped (first and count shrink): they
// add nothing, and a pass then reads fewer rows.
struct Coeffs {
  uint64_t id = 0;              // new for every Precompute on this thread (PairPlan's key)
  int taps = 0;                 // weights per output pixel (max)
  std::vector<int> first;       // [n] first source index
  std::vector<int> count;       // [n] weights used
  std::vector<int32_t> weight;  // [n, taps]
};

// |x|. Not std::abs: under this file's optimize pragma the compiler does not inline library
// functions compiled without it, and a call in a loop keeps it from being vectorised.
inline double Abs(double x) { return __builtin_fabs(x); }

// Fills *c (reusing its memory) for the window [out0, out0 + n_out) of the axis.
//
// Output pixel i's taps start at source index lo_i (clipped to the image) and tap k is at
// x = x0_i + k * step (x0_i = (lo_i - centre_i + 0.5) / filter_scale, step = 1 / filter_scale),
// its weight the kernel there divided by the sum over the pixel's taps. For Lanczos-3,
// lanczos3(x) = sin(pi x) sin(pi x / 3) / (pi^2 x^2 / 3), and the sines at tap k are those at
// x0 rotated by k * step (angle addition with per-tap tables: no recurrence from one tap to
// the next); sin and cos of pi x0 / 3 come from one sincos every kReseed pixels, the pixels
// between rotated from the one before by the step of their x0 (the rotations' rounding, a few
// ulps, is far below the 14-bit weights' resolution), sin and cos of pi x0 from the
// triple-angle formulas. The loops run over the output pixels, tap by tap ([tap][pixel]
// scratch), so that the compiler vectorises them (divisions included; the AVX2 clone four at a
// time, without FMA, so both clones give the same doubles); each pixel's sum adds its taps in
// order. The trigonometric calls and the per-tap recurrence were most of a crop's coefficient
// cost before (issue 30). Fixed point: floor(w / sum * 2^14 + 0.5); zero weights at either end
// are then dropped (first and count shrink: they add nothing).
MM_VECTOR_CLONES void Precompute(int in_size, double in0, double in1, int64_t out_size,
                                 int64_t out0, int n_out, Filter filter, Coeffs* c) {
  thread_local uint64_t next_id = 0;
  c->id = ++next_id;
  const double scale = (in1 - in0) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = SupportOf(filter) * filter_scale;
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  const bool lanczos = filter == Filter::kLanczos3;
  c->taps = taps;
  c->first.resize(n_out);
  c->count.resize(n_out);
  c->weight.resize(static_cast<size_t>(n_out) * taps);  // every entry is written below
  // Per pixel: x0, sin/cos of pi x0 / 3, taps used, sum; per tap and pixel: the kernel.
  thread_local std::vector<double> x0s, sbs, cbs, totals, units, kern;
  thread_local std::vector<int> ns;
  x0s.resize(n_out);
  sbs.resize(n_out);
  cbs.resize(n_out);
  totals.resize(n_out);
  units.resize(n_out);
  ns.resize(n_out);
  kern.resize(static_cast<size_t>(taps) * n_out);
  // 1. Each pixel's first tap and x0 (and the angle's sine and cosine), in order.
  constexpr int kReseed = 16, kSteps = 4;
  const int d_min = static_cast<int>(std::floor(scale)) - 1;
  double rot_cos[kSteps], rot_sin[kSteps];
  bool rot_have[kSteps] = {};
  double sb0 = 0, cb0 = 1;
  int prev_lo = 0, since_exact = kReseed;
  for (int i = 0; i < n_out; ++i) {
    // (out0 + i) is exact in a double (< 2^53): the same centres as the whole axis would have.
    const double centre = in0 + (static_cast<double>(out0 + i) + 0.5) * scale;
    int lo = static_cast<int>(centre - support + 0.5);
    int hi = static_cast<int>(centre + support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    ns[i] = std::min(hi - lo, taps);
    c->first[i] = lo;
    x0s[i] = (lo - centre + 0.5) / filter_scale;
    if (lanczos) {
      const int d = lo - prev_lo - d_min;
      if (since_exact < kReseed && d >= 0 && d < kSteps) {
        if (!rot_have[d]) {
          const double a = M_PI * ((d + d_min) - scale) / (kSupport * filter_scale);
          rot_cos[d] = std::cos(a);
          rot_sin[d] = std::sin(a);
          rot_have[d] = true;
        }
        const double s1 = sb0 * rot_cos[d] + cb0 * rot_sin[d];
        cb0 = cb0 * rot_cos[d] - sb0 * rot_sin[d];
        sb0 = s1;
        ++since_exact;
      } else {
        const double t = M_PI * x0s[i] / kSupport;
        sb0 = std::sin(t);  // one sincos call
        cb0 = std::cos(t);
        since_exact = 1;
      }
      prev_lo = lo;
      sbs[i] = sb0;
      cbs[i] = cb0;
    }
  }
  // 2. The kernel at every tap of every pixel (0 past a pixel's last tap), tap by tap.
  const double step = 1.0 / filter_scale;
  double* x0p = x0s.data();
  double* sbp = sbs.data();
  double* cbp = cbs.data();
  int* np = ns.data();
  for (int k = 0; k < taps; ++k) {
    double* w = &kern[static_cast<size_t>(k) * n_out];
    const double ks = k * step;
    if (!lanczos) {  // Pillow's bilinear_filter: the triangle 1 - |x|
      for (int i = 0; i < n_out; ++i) {
        const double ax = Abs(x0p[i] + ks);
        const double v = ax < 1.0 ? 1.0 - ax : 0.0;
        w[i] = k < np[i] ? v : 0.0;
      }
      continue;
    }
    const double ka = std::cos(M_PI * ks), sa = std::sin(M_PI * ks);
    const double kb = std::cos(M_PI * ks / kSupport), sb = std::sin(M_PI * ks / kSupport);
    for (int i = 0; i < n_out; ++i) {
      // Each lane divides whatever x is (x = 0 gives a NaN that the select drops): branches
      // would keep the loop scalar.
      const double sb0i = sbp[i], cb0i = cbp[i];
      const double sa0 = sb0i * (3.0 - 4.0 * sb0i * sb0i), ca0 = cb0i * (4.0 * cb0i * cb0i - 3.0);
      const double x = x0p[i] + ks;
      const double s_a = sa0 * ka + ca0 * sa, s_b = sb0i * kb + cb0i * sb;
      const double v = s_a * s_b * kSupport / (M_PI * M_PI * x * x), ax = Abs(x);
      const double inside = ax >= kSupport ? 0.0 : v;
      const double value = ax < 1e-9 ? 1.0 : inside;
      w[i] = k < np[i] ? value : 0.0;
    }
  }
  // 3. Each pixel's sum, its taps added in order, and 2^14 over it.
  double* tot = totals.data();
  double* unit = units.data();
  for (int i = 0; i < n_out; ++i) tot[i] = 0.0;
  for (int k = 0; k < taps; ++k) {
    const double* w = &kern[static_cast<size_t>(k) * n_out];
    for (int i = 0; i < n_out; ++i) tot[i] += w[i];
  }
  for (int i = 0; i < n_out; ++i) unit[i] = tot[i] != 0.0 ? (1 << kPrecisionBits) / tot[i] : 0.0;
  // 4. Fixed point, floor(w * unit + 0.5) without a libm call (x86-64's baseline has no
  // roundsd): truncate, then step down where truncation went up (y < 0).
  int32_t* weight = c->weight.data();
  for (int k = 0; k < taps; ++k) {
    const double* w = &kern[static_cast<size_t>(k) * n_out];
    for (int i = 0; i < n_out; ++i) {
      const double y = w[i] * unit[i] + 0.5;
      const int32_t f = static_cast<int32_t>(y);
      weight[static_cast<size_t>(i) * taps + k] = f - (f > y);
    }
  }
  // 5. Zero weights at either end dropped; a pixel without any weight takes the first tap.
  for (int i = 0; i < n_out; ++i) {
    int32_t* out = &weight[static_cast<size_t>(i) * taps];
    const int n = ns[i];
    if (tot[i] == 0.0) out[0] = 1 << kPrecisionBits;
    int a = 0, b = n;
    while (b - a > 1 && out[b - 1] == 0) --b;
    while (b - a > 1 && out[a] == 0) ++a;
    if (a > 0) std::memmove(out, out + a, sizeof(int32_t) * (b - a));
    std::fill(out + (b - a), out + taps, 0);
    c->first[i] += a;
    c->count[i] = b - a;
  }
}

// Coefficients depend only on (in_size, box, out_size, window, filter): datasets repeat
// sizes, so each thread keeps the last few (one cache for both axes: ResampleSupport's
// answer is the ResizeBox that follows it; random crops miss, and cost little next to the
// passes).
// The window [out0, out0 + n_out) of the axis; the whole axis by default.
const Coeffs& CachedCoeffs(int in_size, double in0, double in1, int64_t out_size, int64_t out0 = 0,
                           int n_out = -1, Filter filter = Filter::kLanczos3) {
  struct Entry {
    Filter filter = Filter::kLanczos3;
    int in = -1, n = -1;
    int64_t out = -1, out0 = -1;
    double in0 = 0, in1 = 0;
    Coeffs coeffs;
  };
  constexpr int kEntries = 8;
  thread_local Entry cache[kEntries];
  thread_local int next = 0;
  if (n_out < 0) n_out = static_cast<int>(out_size);
  for (int j = 0; j < kEntries; ++j) {
    Entry& e = cache[j];
    if (e.in == in_size && e.out == out_size && e.in0 == in0 && e.in1 == in1 && e.out0 == out0 &&
        e.n == n_out && e.filter == filter) {
      // The next miss must not overwrite what this returns: a caller holds one axis's
      // coefficients while it asks for the other's.
      if (next == j) next = (next + 1) % kEntries;
      return e.coeffs;
    }
  }
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  e.in = in_size;
  e.out = out_size;
  e.out0 = out0;
  e.n = n_out;
  e.in0 = in0;
  e.in1 = in1;
  e.filter = filter;
  Precompute(in_size, in0, in1, out_size, out0, n_out, filter, &e.coeffs);
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
// Pass with AVX2 intrinsics for few taps (the triangle when enlarging: two): each (row k,
// row k+1) pair turned into 16-bit pairs where an output row needs it, then vpmaddwd as in
// PassPairsAvx2 below. With two taps a source row feeds about two output rows, too few for
// PassPairsAvx2's conversion ahead to pay. Same integer sums as Pass (identical bytes).
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

// The row-pair pass (PassPairs below) in two widths: 32-byte blocks with AVX2, 64-byte blocks
// with AVX-512 (BW for the shuffles, VNNI's vpdpwssd for the multiply-add of 16-bit pairs into
// 32-bit lanes, one instruction where AVX2 takes two). Each block of source bytes of a row pair
// (a, b) is kept as 16-bit (a[i], b[i]) pairs, in the order the unpack instructions give
// (within each 128-bit lane: bytes 0-3, 4-7, 8-11, 12-15 of the lane after the two unpack
// steps), which the packs at the end undo. Both give Pass's integer sums (identical bytes).
struct Avx2Blocks {
  static constexpr int kBytes = 32;

  // Widens rows a and b at each block offset into `out` ([blocks, 4 vectors]).
  __attribute__((target("avx2"))) static void Prep(const uint8_t* a, const uint8_t* b,
                                                   const int* at, int blocks, int16_t* out) {
    const __m256i zero = _mm256_setzero_si256();
    for (int k = 0; k < blocks; ++k) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + at[k]));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + at[k]));
      const __m256i lo = _mm256_unpacklo_epi8(x0, x1);
      const __m256i hi = _mm256_unpackhi_epi8(x0, x1);
      auto* v = reinterpret_cast<__m256i*>(out + 64 * k);
      _mm256_storeu_si256(v, _mm256_unpacklo_epi8(lo, zero));
      _mm256_storeu_si256(v + 1, _mm256_unpackhi_epi8(lo, zero));
      _mm256_storeu_si256(v + 2, _mm256_unpacklo_epi8(hi, zero));
      _mm256_storeu_si256(v + 3, _mm256_unpackhi_epi8(hi, zero));
    }
  }

  // One output row: for each block, the sum over its np tap pairs (pairs `p`, `step` int16
  // apart from one tap pair to the next) of the pairs times wp[t], rounded, shifted, clamped.
  __attribute__((target("avx2"))) static void Row(const int16_t* p, size_t step, const int32_t* wp,
                                                  int np, const int* at, int blocks, uint8_t* out) {
    const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < blocks; ++k) {
      __m256i a0 = half, a1 = half, a2 = half, a3 = half;
      const int16_t* q = p + 64 * k;
      for (int t = 0; t < np; ++t, q += step) {
        const __m256i wv = _mm256_set1_epi32(wp[t]);
        const auto* v = reinterpret_cast<const __m256i*>(q);
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_loadu_si256(v), wv));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_loadu_si256(v + 1), wv));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_loadu_si256(v + 2), wv));
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_loadu_si256(v + 3), wv));
      }
      a0 = _mm256_srai_epi32(a0, kPrecisionBits);
      a1 = _mm256_srai_epi32(a1, kPrecisionBits);
      a2 = _mm256_srai_epi32(a2, kPrecisionBits);
      a3 = _mm256_srai_epi32(a3, kPrecisionBits);
      const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + at[k]), b);
    }
  }
};

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which -Wmaybe-uninitialized
// reports as used uninitialised (GCC bug 105593, fixed in 13): silenced for these kernels only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define MM_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
struct Avx512Blocks {
  static constexpr int kBytes = 64;

  MM_AVX512_TARGET static void Prep(const uint8_t* a, const uint8_t* b, const int* at, int blocks,
                                    int16_t* out) {
    const __m512i zero = _mm512_setzero_si512();
    for (int k = 0; k < blocks; ++k) {
      const __m512i x0 = _mm512_loadu_si512(a + at[k]);
      const __m512i x1 = _mm512_loadu_si512(b + at[k]);
      const __m512i lo = _mm512_unpacklo_epi8(x0, x1);
      const __m512i hi = _mm512_unpackhi_epi8(x0, x1);
      int16_t* v = out + 128 * k;
      _mm512_storeu_si512(v, _mm512_unpacklo_epi8(lo, zero));
      _mm512_storeu_si512(v + 32, _mm512_unpackhi_epi8(lo, zero));
      _mm512_storeu_si512(v + 64, _mm512_unpacklo_epi8(hi, zero));
      _mm512_storeu_si512(v + 96, _mm512_unpackhi_epi8(hi, zero));
    }
  }

  MM_AVX512_TARGET static void Row(const int16_t* p, size_t step, const int32_t* wp, int np,
                                   const int* at, int blocks, uint8_t* out) {
    const __m512i half = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < blocks; ++k) {
      __m512i a0 = half, a1 = half, a2 = half, a3 = half;
      const int16_t* q = p + 128 * k;
      for (int t = 0; t < np; ++t, q += step) {
        const __m512i wv = _mm512_set1_epi32(wp[t]);
        a0 = _mm512_dpwssd_epi32(a0, _mm512_loadu_si512(q), wv);
        a1 = _mm512_dpwssd_epi32(a1, _mm512_loadu_si512(q + 32), wv);
        a2 = _mm512_dpwssd_epi32(a2, _mm512_loadu_si512(q + 64), wv);
        a3 = _mm512_dpwssd_epi32(a3, _mm512_loadu_si512(q + 96), wv);
      }
      a0 = _mm512_srai_epi32(a0, kPrecisionBits);
      a1 = _mm512_srai_epi32(a1, kPrecisionBits);
      a2 = _mm512_srai_epi32(a2, kPrecisionBits);
      a3 = _mm512_srai_epi32(a3, kPrecisionBits);
      const __m512i b = _mm512_packus_epi16(_mm512_packs_epi32(a0, a1), _mm512_packs_epi32(a2, a3));
      _mm512_storeu_si512(out + at[k], b);
    }
  }
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Pass with SIMD, the same integer arithmetic as Pass (identical bytes): two taps at a time
// through a 16-bit multiply-add of interleaved (row k, row k+1) pairs by (w[k], w[k+1]) into
// 32-bit lanes, a block of the row per step, accumulators in registers over all taps. Turning
// two rows of bytes into those pairs takes six shuffles per block, and a source row feeds about
// six output rows for Lanczos-3: done per output row (PassAvx2, the kernel before issue 30),
// the shuffles bound the speed. So each pair of source rows (lo+2j, lo+2j+1; lo the first row
// a block of output rows reads) is converted once into scratch, and each output row is then
// only loads and multiply-adds; an output row whose first tap is an odd row from lo starts one
// row early with a weight of 0. Rows in strips of kStripBlocks blocks, output rows in groups,
// so that the scratch stays small. A row that is not a whole number of blocks ends with a block
// that overlaps the one before it (those bytes are computed twice, the same both times); a row
// shorter than one block goes to Pass.
// Output rows per group of PassPairs' plan (below), and so the granularity of the first row of
// a band that PassBest is given: fewer for more taps, so that a group's source rows stay few.
int PassRowAlign(const Coeffs& c) { return std::clamp(256 / c.taps, 4, 32); }

// Which source row pairs each output row of PassPairs reads, and their weights as 16-bit
// pairs: output rows in groups of block_rows (so that the scratch of converted pairs stays
// small), group g reading source rows [lo[g], hi[g]). Depends only on the coefficients and the
// output rows, so the horizontal pass, which runs once per band of rows, plans once.
struct PairPlan {
  uint64_t id = 0;  // Coeffs::id
  int y0 = -1, rows = -1, block_rows = 0, max_pairs = 0;
  std::vector<int> lo, hi;         // [groups]
  std::vector<int> pair0, npairs;  // [rows] first pair (from the group's lo), pairs used
  std::vector<int32_t> wpair;      // [rows, max_pairs] (w[2t - lead], w[2t + 1 - lead])
};

const PairPlan& PlanPairs(const Coeffs& c, int y0, int rows) {
  thread_local PairPlan plans[2];  // the two passes of TwoPasses alternate
  thread_local int next = 0;
  for (PairPlan& q : plans) {
    if (q.id == c.id && q.y0 == y0 && q.rows == rows) return q;
  }
  PairPlan& p = plans[next];
  next ^= 1;
  p.id = c.id;
  p.y0 = y0;
  p.rows = rows;
  p.block_rows = PassRowAlign(c);
  p.max_pairs = (c.taps + 2) / 2;
  const int groups = (rows + p.block_rows - 1) / p.block_rows;
  p.lo.resize(groups);
  p.hi.resize(groups);
  p.pair0.resize(rows);
  p.npairs.resize(rows);
  p.wpair.resize(static_cast<size_t>(rows) * p.max_pairs);
  for (int g = 0; g < groups; ++g) {
    const int b0 = g * p.block_rows, nb = std::min(p.block_rows, rows - b0);
    int lo = c.first[y0 + b0], hi = lo;
    for (int y = b0; y < b0 + nb; ++y) {
      lo = std::min(lo, c.first[y0 + y]);
      hi = std::max(hi, c.first[y0 + y] + c.count[y0 + y]);
    }
    p.lo[g] = lo;
    p.hi[g] = hi;
    for (int y = b0; y < b0 + nb; ++y) {
      const int oy = y0 + y, lead = (c.first[oy] - lo) & 1, n = c.count[oy];
      const int32_t* w = &c.weight[static_cast<size_t>(oy) * c.taps];
      p.pair0[y] = (c.first[oy] - lo) >> 1;
      p.npairs[y] = (lead + n + 1) >> 1;
      for (int t = 0; t < p.npairs[y]; ++t) {
        const int k0 = 2 * t - lead, k1 = k0 + 1;
        const int32_t w0 = k0 >= 0 ? static_cast<uint16_t>(static_cast<int16_t>(w[k0])) : 0;
        const int32_t w1 = k1 < n ? static_cast<uint16_t>(static_cast<int16_t>(w[k1])) : 0;
        p.wpair[static_cast<size_t>(y) * p.max_pairs + t] = w0 | (w1 << 16);
      }
    }
  }
  return p;
}

// Output rows [r0, r1) of the `rows` from y0 (dst: row r0's output), planned for all `rows`
// (r0 a multiple of the plan's block_rows): a caller that runs the rows in bands plans once.
template <class K>
void PassPairs(const uint8_t* src, int src_stride, int row_bytes, const Coeffs& c, int src_row0,
               int y0, int rows, int r0, int r1, uint8_t* dst) {
  constexpr int kStripBlocks = 512 / K::kBytes;
  constexpr int kPairInts = K::kBytes * 2;  // int16 per block of a row pair
  if (row_bytes < K::kBytes) {
    return Pass(src, src_stride, row_bytes, c, src_row0, y0 + r0, r1 - r0, dst);
  }
  const int row_blocks = (row_bytes + K::kBytes - 1) / K::kBytes;
  const PairPlan& plan = PlanPairs(c, y0, rows);
  dst -= static_cast<size_t>(r0) * row_bytes;  // indexed by row from y0 below
  thread_local std::vector<int16_t> pairs;     // [pair, strip block, kPairInts]
  thread_local std::vector<int> at;            // [row_blocks] byte offset of each block
  at.resize(row_blocks);
  for (int k = 0; k < row_blocks; ++k) at[k] = std::min(K::kBytes * k, row_bytes - K::kBytes);
  for (int g = r0 / plan.block_rows, b0 = g * plan.block_rows; b0 < r1;
       ++g, b0 += plan.block_rows) {
    const int nb = std::min(plan.block_rows, r1 - b0), lo = plan.lo[g], hi = plan.hi[g];
    const int n_pairs = (hi - lo + 1) / 2;
    for (int k0 = 0; k0 < row_blocks; k0 += kStripBlocks) {
      const int blocks = std::min(kStripBlocks, row_blocks - k0);
      const size_t step = static_cast<size_t>(blocks) * kPairInts;      // one pair to the next
      if (pairs.size() < n_pairs * step) pairs.resize(n_pairs * step);  // grown, never shrunk
      for (int j = 0; j < n_pairs; ++j) {
        // A last row past hi pairs with itself (its weight is 0): no row outside [lo, hi).
        const int ra = lo + 2 * j, rb = std::min(ra + 1, hi - 1);
        K::Prep(src + static_cast<size_t>(ra - src_row0) * src_stride,
                src + static_cast<size_t>(rb - src_row0) * src_stride, &at[k0], blocks,
                &pairs[j * step]);
      }
      for (int y = b0; y < b0 + nb; ++y) {
        K::Row(&pairs[plan.pair0[y] * step], step,
               &plan.wpair[static_cast<size_t>(y) * plan.max_pairs], plan.npairs[y], &at[k0],
               blocks, dst + static_cast<size_t>(y) * row_bytes);
      }
    }
  }
}

// Asked on first use, not in a static initialiser that could run before libgcc has read the
// CPU's features.
bool HaveAvx2() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx2"));
  return have;
}

std::atomic<bool> g_allow_avx512{true};  // SetResampleSimdLevelForTesting

// AVX-512 with BW (byte and word shuffles) and VNNI (vpdpwssd): Ice Lake, Sapphire Rapids and
// later Xeons, Zen 4 and later.
bool HaveAvx512() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                      __builtin_cpu_supports("avx512bw") &&
                                                      __builtin_cpu_supports("avx512vnni"));
  return have && g_allow_avx512.load(std::memory_order_relaxed);
}
#endif

// Pass, on AVX2 where the CPU has it and `simd` allows.
// Output rows [r0, r1) of the `rows` from y0 into dst (row r0's output first); r0 a multiple of
// PassRowAlign(c).
void PassBest(bool simd, const uint8_t* src, int src_stride, int row_bytes, const Coeffs& c,
              int src_row0, int y0, int rows, int r0, int r1, uint8_t* dst) {
#if MM_RESAMPLE_AVX2
  if (simd && HaveAvx512()) {
    return PassPairs<Avx512Blocks>(src, src_stride, row_bytes, c, src_row0, y0, rows, r0, r1, dst);
  }
  if (simd && HaveAvx2() && c.taps > 3) {
    return PassPairs<Avx2Blocks>(src, src_stride, row_bytes, c, src_row0, y0, rows, r0, r1, dst);
  }
  if (simd && HaveAvx2()) {
    return PassAvx2(src, src_stride, row_bytes, c, src_row0, y0 + r0, r1 - r0, dst);
  }
#endif
  Pass(src, src_stride, row_bytes, c, src_row0, y0 + r0, r1 - r0, dst);
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

#if MM_RESAMPLE_AVX2
#define MM_AVX512_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593, as above
#endif

// Transpose<3> with AVX-512 (BW for the masked byte loads and stores, VBMI for vpermb), in
// 16x16 blocks: each block row's 16 pixels (48 bytes, a masked load: nothing past them is
// read) spread to 16 dwords (R, G, B, 0) by one vpermb, the 16x16 dword matrix transposed with
// unpacks and 128-bit lane shuffles, each output row packed back to 48 bytes by one vpermb and
// stored masked. Blocks at the edges load and store fewer rows and bytes (masks), so every
// pixel goes through the same code. About a third of TransposeRgbAvx2's shuffles a pixel (its
// shuffle port bounds it): the transposes were a fifth of a raw crop's CPU after the passes
// were made faster.
MM_AVX512_VBMI_TARGET void TransposeRgbAvx512(const uint8_t* src, int w, int h, uint8_t* dst) {
  alignas(64) uint8_t spread_idx[64], pack_idx[64];
  for (int j = 0; j < 16; ++j) {
    for (int ch = 0; ch < 4; ++ch)
      spread_idx[4 * j + ch] = static_cast<uint8_t>(3 * j + (ch < 3 ? ch : 0));
  }
  for (int j = 0; j < 64; ++j) pack_idx[j] = static_cast<uint8_t>(j < 48 ? 4 * (j / 3) + j % 3 : 0);
  const __m512i spread = _mm512_load_si512(spread_idx), pack = _mm512_load_si512(pack_idx);
  const __mmask64 keep_rgb = 0x7777777777777777ull;  // byte 3 of each dword: 0
  for (int by = 0; by < h; by += 16) {
    const int rows = std::min(16, h - by);
    for (int bx = 0; bx < w; bx += 16) {
      const int cols = std::min(16, w - bx);
      const __mmask64 load_mask = cols == 16 ? ~0ull >> 16 : (1ull << (3 * cols)) - 1;
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        if (i < rows) {
          const __m512i v =
              _mm512_maskz_loadu_epi8(load_mask, src + (static_cast<size_t>(by + i) * w + bx) * 3);
          r[i] = _mm512_maskz_permutexvar_epi8(keep_rgb, spread, v);
        } else {
          r[i] = _mm512_setzero_si512();
        }
      }
      // 16x16 dwords: 2x2 blocks (unpack 32), 4x4 (unpack 64), then 128-bit lanes twice.
      __m512i t[16], u[16];
      for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
      }
      for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
      }
      // u[4q + k], lane L, holds rows 4q..4q+3 at column 4L + k.
      for (int k = 0; k < 4; ++k) {
        // Lanes: (q0 L0, q0 L2, q1 L0, q1 L2) and (q0 L1, q0 L3, q1 L1, q1 L3), then likewise
        // for q2, q3; then pairs of those.
        t[k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xdd);
        t[8 + k] = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xdd);
      }
      for (int k = 0; k < 4; ++k) {
        // Column c = 4L + k: rows 0..15 = (q0 L, q1 L, q2 L, q3 L).
        r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88);            // L = 0
        r[4 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0x88);   // L = 1
        r[8 + k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd);        // L = 2
        r[12 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0xdd);  // L = 3
      }
      const __mmask64 store_mask = rows == 16 ? ~0ull >> 16 : (1ull << (3 * rows)) - 1;
      for (int j = 0; j < cols; ++j) {
        _mm512_mask_storeu_epi8(dst + (static_cast<size_t>(bx + j) * h + by) * 3, store_mask,
                                _mm512_permutexvar_epi8(pack, r[j]));
      }
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool HaveAvx512Vbmi() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                      __builtin_cpu_supports("avx512bw") &&
                                                      __builtin_cpu_supports("avx512vbmi"));
  return have && g_allow_avx512.load(std::memory_order_relaxed);
}
#endif

void TransposeAny(const uint8_t* src, int w, int h, int channels, uint8_t* dst, bool simd) {
#if MM_RESAMPLE_AVX2
  if (simd && channels == 3 && HaveAvx512Vbmi()) return TransposeRgbAvx512(src, w, h, dst);
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

void ResampleSupport(int in_size, double box_lo, double box_hi, int out_size, int* first,
                     int* last, Filter filter) {
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
