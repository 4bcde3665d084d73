// resample_simd.h: what every resampling file (resample*.cc) shares to be compiled alike: -O3
// with no-trapping-math by pragma, the AVX2 clones, the intrinsics, and the CPU's features
// (defined in resample.cc). Include it after every other header: the pragma applies to what
// follows it.
#pragma once

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

namespace mm::image::internal {

#if MM_RESAMPLE_AVX2
/// Whether the CPU has AVX2 (asked on first use).
bool HaveAvx2();
/// AVX-512 BW + VNNI, unless SetResampleSimdLevelForTesting turned AVX-512 off.
bool HaveAvx512();
/// AVX-512 BW + VBMI, unless SetResampleSimdLevelForTesting turned AVX-512 off.
bool HaveAvx512Vbmi();
#endif

}  // namespace mm::image::internal
