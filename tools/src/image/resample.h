// resample.h: antialiased Lanczos-3 resampling of 8-bit images, fixed point, separable.
//
// The method is Pillow's `Image.resize(..., LANCZOS)` (libImaging/Resample.c): for each output
// pixel the kernel lanczos3(x) = sinc(x) sinc(x/3) is centred on the output pixel's centre
// mapped into the source and, when shrinking, stretched by the scale so that it also
// low-passes (antialiasing); weights are normalised, turned into 14-bit fixed point, applied
// horizontally then vertically with rounding and clamping to 0..255. mmpack uses it instead
// of vips_resize because it is faster on the sizes mmpack sees (decoded JPEGs of 0.1..1 Mpx
// down to 224 px), which matters: resizing was most of mmpack build's CPU.
// tests/bench/resample_bench.cc re-measures both on the same pixels in one run and prints the
// ratio (7.4x whole-image with AVX2 on the 51 coco-cc photos at 224 px, one thread, 2-core
// build machine under load, November 2026).
#pragma once

#include <cstdint>
#include <vector>

namespace mm::pack {

/// Resizes `src` ([src_h, src_w, channels] uint8, rows `src_stride` bytes apart) to the
/// virtual size [dst_h, dst_w] and writes the window [win_y, win_y + win_h) x
/// [win_x, win_x + win_w) of it to `dst` (resized to [win_h, win_w, channels], rows packed).
/// A centre crop asks only for the pixels it keeps. channels: 1..4. All sizes > 0, the
/// window inside [dst_h, dst_w]. Thread-safe (no shared state). `simd` false forces the
/// portable loops instead of the AVX2 kernel the CPU may offer; both give the same bytes
/// (the tests compare them).
void ResizeLanczos3(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                    int dst_w, int dst_h, int win_x, int win_y, int win_w, int win_h,
                    std::vector<uint8_t>* dst, bool simd = true);

/// Whether ResizeLanczos3 has an AVX2 kernel on this CPU.
bool ResampleHasAvx2();

}  // namespace mm::pack
