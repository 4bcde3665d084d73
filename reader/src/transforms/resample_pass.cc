// resample_pass.cc: see resample_pass.h.
#include "transforms/resample_pass.h"

#include <algorithm>
#include <cstring>
#include <vector>

// Last: its pragma applies to what follows.
#include "transforms/resample_simd.h"

namespace mm::image::internal {

int PassRowAlign(const Coeffs& c) { return std::clamp(256 / c.taps, 4, 32); }

namespace {

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
// six output rows for Lanczos-3: done per output row (as PassAvx2 does), the shuffles bound
// the speed. So each pair of source rows (lo+2j, lo+2j+1; lo the first row
// a block of output rows reads) is converted once into scratch, and each output row is then
// only loads and multiply-adds; an output row whose first tap is an odd row from lo starts one
// row early with a weight of 0. Rows in strips of kStripBlocks blocks, output rows in groups,
// so that the scratch stays small. A row that is not a whole number of blocks ends with a block
// that overlaps the one before it (those bytes are computed twice, the same both times); a row
// shorter than one block goes to Pass.
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
#endif  // MM_RESAMPLE_AVX2

}  // namespace

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

}  // namespace mm::image::internal
