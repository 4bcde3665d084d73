// resample_transpose.h: [h, w, C] -> [w, h, C] for the resampler's second pass (columns done as
// rows of the transposed image), in blocks, with AVX2 or AVX-512 VBMI for three-byte pixels
// where the CPU has them. Internal to resample*.cc.
#pragma once

#include <cstdint>

namespace mm::image::internal {

/// `src` [h, w, channels] bytes -> `dst` [w, h, channels]; `simd`: AVX2 / AVX-512 allowed.
void TransposeAny(const uint8_t* src, int w, int h, int channels, uint8_t* dst, bool simd);

}  // namespace mm::image::internal
