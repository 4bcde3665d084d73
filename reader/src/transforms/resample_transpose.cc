// resample_transpose.cc: see resample_transpose.h.
#include "transforms/resample_transpose.h"

#include <algorithm>
#include <cstring>

// Last: its pragma applies to what follows.
#include "transforms/resample_simd.h"

namespace mm::image::internal {
namespace {

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
      const __m256i o[8] = {
          _mm256_permute2x128_si256(u0, u4, 0x20), _mm256_permute2x128_si256(u1, u5, 0x20),
          _mm256_permute2x128_si256(u2, u6, 0x20), _mm256_permute2x128_si256(u3, u7, 0x20),
          _mm256_permute2x128_si256(u0, u4, 0x31), _mm256_permute2x128_si256(u1, u5, 0x31),
          _mm256_permute2x128_si256(u2, u6, 0x31), _mm256_permute2x128_si256(u3, u7, 0x31)};
      for (int j = 0; j < 8; ++j) {
        uint8_t* q = dst + (static_cast<size_t>(bx + j) * h + by) * 3;
        const __m256i packed = _mm256_shuffle_epi8(o[j], pack);  // 12 bytes in each lane
        const __m128i lo = _mm256_castsi256_si128(packed);
        const __m128i hi = _mm256_extracti128_si256(packed, 1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q), lo);       // bytes 0..11 (+4 rewritten)
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
#endif  // MM_RESAMPLE_AVX2

}  // namespace

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

}  // namespace mm::image::internal
