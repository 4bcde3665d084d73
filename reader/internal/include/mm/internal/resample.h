// mm/internal/resample.h: antialiased Lanczos-3 (and triangle/bilinear) resampling of 8-bit
// images, fixed point, separable. Shared by mmpack build (tools/src/image) and the reader's load-time crops
// (reader/src/transforms).
//
// The method is Pillow's `Image.resize(..., LANCZOS, box=...)` (libImaging/Resample.c): for
// each output pixel the kernel lanczos3(x) = sinc(x) sinc(x/3) is centred on the output pixel's
// centre mapped into the source box and, when shrinking, stretched by the scale so that it
// also low-passes (antialiasing); taps are clipped to the image (not to the box), weights are
// normalised, turned into 14-bit fixed point, applied vertically then horizontally with
// rounding and clamping to 0..255. mmpack uses it instead of vips_resize because it is faster
// on the sizes mmpack sees (decoded JPEGs of 0.1..1 Mpx down to 224 px), which matters:
// resizing was most of mmpack build's CPU. tests/bench/resample_bench.cc re-measures both on
// the same pixels in one run and prints the ratio (7.4x whole-image with AVX2 on the 51
// coco-cc photos at 224 px, one thread, 2-core build machine under load, November 2026).
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/transforms/resample.cc). Thread-safe: per-thread scratch only.
#pragma once

#include <cstdint>
#include <vector>

namespace mm::image {

/// Resizes `src` ([src_h, src_w, channels] uint8, rows `src_stride` bytes apart) to the
/// virtual size [dst_h, dst_w] and writes the window [win_y, win_y + win_h) x
/// [win_x, win_x + win_w) of it to `dst` (resized to [win_h, win_w, channels], rows packed).
/// A centre crop asks only for the pixels it keeps: time and memory follow the window, not
/// the virtual size (which may exceed 2^31: a 1x10,000,000 source covering 224x224 is
/// 224 x 2,240,000,000). channels: 1..4. All sizes > 0 and below 2^53, the window inside
/// [dst_h, dst_w]. `simd` false forces the portable loops instead of the AVX2 kernel the CPU
/// may offer; both give the same bytes (the tests compare them).
void ResizeLanczos3(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                    int64_t dst_w, int64_t dst_h, int64_t win_x, int64_t win_y, int win_w,
                    int win_h, std::vector<uint8_t>* dst, bool simd = true);

/// The resampling kernel, as Pillow names them: Lanczos-3 (LANCZOS, support 3) or the triangle
/// (BILINEAR, support 1; torchvision's `antialias=True` bilinear is the same). Both are stretched
/// by the scale when shrinking, so both antialias; the triangle reads a third of the taps.
enum class Filter { kLanczos3, kBilinear };

/// A region of a source image in pixels, fractional: [x0, x1) x [y0, y1), as Pillow's `box`.
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// The source pixels [first, last) along one axis that resampling `box_lo..box_hi` of an axis
/// of `in_size` pixels to `out_size` pixels reads (the box widened by the kernel's support,
/// clipped to the image). A caller that decodes only part of an image decodes these.
void ResampleSupport(int in_size, double box_lo, double box_hi, int out_size, int* first,
                     int* last, Filter filter = Filter::kLanczos3);

/// Resamples `box` of an image of [full_h, full_w] pixels to `dst` ([out_h, out_w, channels]
/// uint8, rows packed; the caller allocates out_h * out_w * channels bytes), as Pillow's
/// `img.resize((out_w, out_h), Image.LANCZOS or Image.BILINEAR, box=(x0, y0, x1, y1))` with
/// `filter`. The loader's crops use it.
/// Only part of the image need be present: `src` points at pixel (src_x0, src_y0) of the full
/// image, rows `src_stride` bytes apart, and must hold at least the columns and rows
/// ResampleSupport names for the box. channels: 1..4; out sizes > 0; box non-empty inside
/// [0, full_w] x [0, full_h]. Thread-safe.
void ResizeBox(const uint8_t* src, int src_x0, int src_y0, int src_stride, int full_w, int full_h,
               int channels, const Box& box, int out_w, int out_h, uint8_t* dst, Filter filter,
               bool simd = true);

/// Whether ResizeLanczos3 has an AVX2 kernel on this CPU.
bool ResampleHasAvx2();

/// Whether it has the AVX-512 (BW, VNNI) kernel on this CPU, and it is allowed.
bool ResampleHasAvx512();

/// The widest kernels `simd` = true may use: the best this CPU has (the default), or at most
/// AVX2. For tests, which compare the kernels with each other and with the portable loops on a
/// CPU that has AVX-512; process-wide, not meant to change while resizes run.
enum class SimdLevel { kBest, kAvx2 };
void SetResampleSimdLevelForTesting(SimdLevel level);

}  // namespace mm::image
