// resample_coeffs.cc: see resample_coeffs.h.
#include "transforms/resample_coeffs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// Last: its pragma applies to what follows.
#include "transforms/resample_simd.h"

namespace mm::image::internal {
namespace {

// The kernel's support at scale 1: 3 for Lanczos-3, 1 for the triangle (bilinear).
double SupportOf(Filter filter) { return filter == Filter::kBilinear ? 1.0 : kSupport; }

// |x|. Not std::abs: under this file's optimize pragma the compiler does not inline library
// functions compiled without it, and a call in a loop keeps it from being vectorised.
inline double Abs(double x) { return __builtin_fabs(x); }

// One window of one axis, as Precompute's stages see it.
struct AxisWindow {
  int in_size = 0;
  double in0 = 0, scale = 0, filter_scale = 0, support = 0;
  int taps = 0;
  bool lanczos = false;
  int64_t out0 = 0;
  int n_out = 0;
};

// Precompute's scratch, kept by each thread. Per pixel: x0, sin/cos of pi x0 / 3, taps used,
// sum, 2^14 over the sum; per tap and pixel ([tap][pixel]): the kernel.
struct PrecomputeScratch {
  std::vector<double> x0s, sbs, cbs, totals, units, kern;
  std::vector<int> ns;
};

// 1. Each pixel's first tap and x0 (and the angle's sine and cosine), in order.
MM_VECTOR_CLONES void FirstTaps(const AxisWindow& a, Coeffs* c, PrecomputeScratch* s) {
  constexpr int kReseed = 16, kSteps = 4;
  const int d_min = static_cast<int>(std::floor(a.scale)) - 1;
  double rot_cos[kSteps], rot_sin[kSteps];
  bool rot_have[kSteps] = {};
  double sb0 = 0, cb0 = 1;
  int prev_lo = 0, since_exact = kReseed;
  for (int i = 0; i < a.n_out; ++i) {
    // (out0 + i) is exact in a double (< 2^53): the same centres as the whole axis would have.
    const double centre = a.in0 + (static_cast<double>(a.out0 + i) + 0.5) * a.scale;
    int lo = static_cast<int>(centre - a.support + 0.5);
    int hi = static_cast<int>(centre + a.support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, a.in_size);
    s->ns[i] = std::min(hi - lo, a.taps);
    c->first[i] = lo;
    s->x0s[i] = (lo - centre + 0.5) / a.filter_scale;
    if (a.lanczos) {
      const int d = lo - prev_lo - d_min;
      if (since_exact < kReseed && d >= 0 && d < kSteps) {
        if (!rot_have[d]) {
          const double t = M_PI * ((d + d_min) - a.scale) / (kSupport * a.filter_scale);
          rot_cos[d] = std::cos(t);
          rot_sin[d] = std::sin(t);
          rot_have[d] = true;
        }
        const double s1 = sb0 * rot_cos[d] + cb0 * rot_sin[d];
        cb0 = cb0 * rot_cos[d] - sb0 * rot_sin[d];
        sb0 = s1;
        ++since_exact;
      } else {
        const double t = M_PI * s->x0s[i] / kSupport;
        sb0 = std::sin(t);  // one sincos call
        cb0 = std::cos(t);
        since_exact = 1;
      }
      prev_lo = lo;
      s->sbs[i] = sb0;
      s->cbs[i] = cb0;
    }
  }
}

// 2. The kernel at every tap of every pixel (0 past a pixel's last tap), tap by tap.
MM_VECTOR_CLONES void KernelAtTaps(const AxisWindow& a, PrecomputeScratch* s) {
  const int n_out = a.n_out;
  const double step = 1.0 / a.filter_scale;
  double* x0p = s->x0s.data();
  double* sbp = s->sbs.data();
  double* cbp = s->cbs.data();
  int* np = s->ns.data();
  for (int k = 0; k < a.taps; ++k) {
    double* w = &s->kern[static_cast<size_t>(k) * n_out];
    const double ks = k * step;
    if (!a.lanczos) {  // Pillow's bilinear_filter: the triangle 1 - |x|
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
}

// 3. Each pixel's sum, its taps added in order, and 2^14 over it; 4. fixed point,
// floor(w * unit + 0.5) without a libm call (x86-64's baseline has no roundsd): truncate, then
// step down where truncation went up (y < 0).
MM_VECTOR_CLONES void FixedPointWeights(const AxisWindow& a, PrecomputeScratch* s, Coeffs* c) {
  const int n_out = a.n_out, taps = a.taps;
  double* tot = s->totals.data();
  double* unit = s->units.data();
  for (int i = 0; i < n_out; ++i) tot[i] = 0.0;
  for (int k = 0; k < taps; ++k) {
    const double* w = &s->kern[static_cast<size_t>(k) * n_out];
    for (int i = 0; i < n_out; ++i) tot[i] += w[i];
  }
  for (int i = 0; i < n_out; ++i) unit[i] = tot[i] != 0.0 ? (1 << kPrecisionBits) / tot[i] : 0.0;
  int32_t* weight = c->weight.data();
  for (int k = 0; k < taps; ++k) {
    const double* w = &s->kern[static_cast<size_t>(k) * n_out];
    for (int i = 0; i < n_out; ++i) {
      const double y = w[i] * unit[i] + 0.5;
      const int32_t f = static_cast<int32_t>(y);
      weight[static_cast<size_t>(i) * taps + k] = f - (f > y);
    }
  }
}

// 5. Zero weights at either end dropped; a pixel without any weight takes the first tap.
MM_VECTOR_CLONES void DropZeroEnds(const AxisWindow& a, const PrecomputeScratch& s, Coeffs* c) {
  const int taps = a.taps;
  int32_t* weight = c->weight.data();
  for (int i = 0; i < a.n_out; ++i) {
    int32_t* out = &weight[static_cast<size_t>(i) * taps];
    const int n = s.ns[i];
    if (s.totals[i] == 0.0) out[0] = 1 << kPrecisionBits;
    int lo = 0, hi = n;
    while (hi - lo > 1 && out[hi - 1] == 0) --hi;
    while (hi - lo > 1 && out[lo] == 0) ++lo;
    if (lo > 0) std::memmove(out, out + lo, sizeof(int32_t) * (hi - lo));
    std::fill(out + (hi - lo), out + taps, 0);
    c->first[i] += lo;
    c->count[i] = hi - lo;
  }
}

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
// order. Computed per tap instead, the trigonometric calls and the recurrence are most of a
// crop's coefficient cost. Fixed point: floor(w / sum * 2^14 + 0.5); zero weights at either end
// are then dropped (first and count shrink: they add nothing).
void Precompute(int in_size, double in0, double in1, int64_t out_size, int64_t out0, int n_out,
                Filter filter, Coeffs* c) {
  thread_local uint64_t next_id = 0;
  c->id = ++next_id;
  AxisWindow a;
  a.in_size = in_size;
  a.in0 = in0;
  a.scale = (in1 - in0) / static_cast<double>(out_size);
  a.filter_scale = std::max(a.scale, 1.0);
  a.support = SupportOf(filter) * a.filter_scale;
  a.taps = static_cast<int>(std::ceil(a.support)) * 2 + 1;
  a.lanczos = filter == Filter::kLanczos3;
  a.out0 = out0;
  a.n_out = n_out;
  c->taps = a.taps;
  c->first.resize(n_out);
  c->count.resize(n_out);
  c->weight.resize(static_cast<size_t>(n_out) * a.taps);  // every entry is written below
  thread_local PrecomputeScratch s;
  for (auto* v : {&s.x0s, &s.sbs, &s.cbs, &s.totals, &s.units}) v->resize(n_out);
  s.ns.resize(n_out);
  s.kern.resize(static_cast<size_t>(a.taps) * n_out);
  FirstTaps(a, c, &s);
  KernelAtTaps(a, &s);
  FixedPointWeights(a, &s, c);
  DropZeroEnds(a, s, c);
}

}  // namespace

const Coeffs& CachedCoeffs(int in_size, double in0, double in1, int64_t out_size, int64_t out0,
                           int n_out, Filter filter) {
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

}  // namespace mm::image::internal
