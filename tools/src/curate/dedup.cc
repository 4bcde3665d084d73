// dedup.cc: see dedup.h.
#include "curate/dedup.h"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace mm::pack {
namespace {

constexpr int kSide = 32;  // the luma image the DCT sees
constexpr int kLow = 8;    // the kLow x kLow lowest frequencies make the hash

// [kSide, kSide] mean luma (BT.601 weights) of `pixels`, each cell the mean of its pixels.
std::array<double, kSide * kSide> BoxLuma(const uint8_t* pixels, int width, int height) {
  std::array<double, kSide * kSide> out{};
  for (int cy = 0; cy < kSide; ++cy) {
    const int y0 = cy * height / kSide, y1 = std::max(y0 + 1, (cy + 1) * height / kSide);
    for (int cx = 0; cx < kSide; ++cx) {
      const int x0 = cx * width / kSide, x1 = std::max(x0 + 1, (cx + 1) * width / kSide);
      double sum = 0;
      for (int y = y0; y < y1 && y < height; ++y) {
        const uint8_t* p = pixels + (static_cast<size_t>(y) * width + x0) * 3;
        for (int x = x0; x < x1 && x < width; ++x, p += 3) {
          sum += 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
        }
      }
      out[cy * kSide + cx] = sum / ((y1 - y0) * (x1 - x0));
    }
  }
  return out;
}

}  // namespace

uint64_t PixelHash(const uint8_t* pixels, size_t size) { return XXH3_64bits(pixels, size); }

uint64_t PerceptualHash(const uint8_t* pixels, int width, int height) {
  const auto luma = BoxLuma(pixels, width, height);
  // cosines[k][n] = cos(pi * (2n + 1) * k / (2 * kSide)), for the kLow lowest k.
  static const auto cosines = [] {
    std::array<std::array<double, kSide>, kLow> c{};
    for (int k = 0; k < kLow; ++k) {
      for (int n = 0; n < kSide; ++n) c[k][n] = std::cos(M_PI * (2 * n + 1) * k / (2.0 * kSide));
    }
    return c;
  }();
  // Rows first (only kLow frequencies kept), then columns: [kLow, kLow].
  std::array<double, kSide * kLow> rows{};
  for (int y = 0; y < kSide; ++y) {
    for (int v = 0; v < kLow; ++v) {
      double s = 0;
      for (int x = 0; x < kSide; ++x) s += luma[y * kSide + x] * cosines[v][x];
      rows[y * kLow + v] = s;
    }
  }
  std::array<double, kLow * kLow> dct{};
  for (int u = 0; u < kLow; ++u) {
    for (int v = 0; v < kLow; ++v) {
      double s = 0;
      for (int y = 0; y < kSide; ++y) s += rows[y * kLow + v] * cosines[u][y];
      dct[u * kLow + v] = s;
    }
  }
  auto sorted = dct;
  std::nth_element(sorted.begin(), sorted.begin() + 32, sorted.end());
  const double upper = sorted[32];
  const double lower = *std::max_element(sorted.begin(), sorted.begin() + 32);
  const double median = (lower + upper) / 2;
  uint64_t hash = 0;
  for (int i = 0; i < kLow * kLow; ++i) {
    if (dct[i] > median) hash |= uint64_t{1} << i;
  }
  return hash;
}

int64_t DuplicateIndex::Find(uint64_t pixel_hash, uint64_t perceptual_hash, bool* exact) const {
  auto it = exact_.find(pixel_hash);
  if (it != exact_.end()) {
    *exact = true;
    return it->second;
  }
  *exact = false;
  if (near_threshold_ < 0) return -1;
  for (size_t i = 0; i < perceptual_.size(); ++i) {
    if (HammingDistance(perceptual_[i], perceptual_hash) <= near_threshold_) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

void DuplicateIndex::Add(uint64_t pixel_hash, uint64_t perceptual_hash) {
  exact_.emplace(pixel_hash, static_cast<int64_t>(perceptual_.size()));
  perceptual_.push_back(perceptual_hash);
}

}  // namespace mm::pack
