// resample_pass.h: one resampling pass along columns (output rows from the source rows each
// covers, with a window's coefficients), in plain loops the compiler vectorises and with AVX2 or
// AVX-512 where the CPU has them: the same integer sums, identical bytes. Internal to
// resample*.cc.
#pragma once

#include <cstdint>

#include "transforms/resample_coeffs.h"

namespace mm::image::internal {

/// Output rows per group of the row-pair pass's plan, and so the granularity of the first row of
/// a band that PassBest is given: fewer for more taps, so that a group's source rows stay few.
int PassRowAlign(const Coeffs& c);

/// The pass, on AVX2 or AVX-512 where the CPU has it and `simd` allows. Output rows [r0, r1) of
/// the `rows` from y0 into dst (row r0's output first); r0 a multiple of PassRowAlign(c).
/// `src`: source row `src_row0`, rows `src_stride` bytes apart, `row_bytes` bytes each.
void PassBest(bool simd, const uint8_t* src, int src_stride, int row_bytes, const Coeffs& c,
              int src_row0, int y0, int rows, int r0, int r1, uint8_t* dst);

}  // namespace mm::image::internal
