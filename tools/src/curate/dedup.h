// dedup.h: duplicate images for `mmpack build --dedup exact|near` (filters.h).
//
// Both hashes are taken from the image as it is stored (the decoded, oriented, colour-managed
// and fitted [H, W, 3] uint8 pixels), so the same photo saved twice, or re-saved as PNG, is
// an exact duplicate whatever its file bytes, and the cost is one pass over 224x224 pixels.
//   exact  XXH3-64 of the stored pixels (xxHash, https://github.com/Cyan4973/xxHash).
//   near   a 64-bit DCT perceptual hash ("pHash", after Zauner, "Implementation and
//          Benchmarking of Perceptual Image Hash Functions", 2010, as the imagehash library
//          computes it): luma, box-averaged to 32x32, 2-D DCT-II, the 8x8 lowest frequencies,
//          one bit per coefficient above their median. Two images whose hashes differ in at
//          most FilterOptions::near_threshold bits (default 10 of 64) are near duplicates.
//          Measured on coco-cc's photos at 224 px center-crop (tests/e2e/curate_test.py):
//          JPEG re-encodes at q95, 75, 50, 30 are 0 bits from the original (the 224-px stored
//          image hides the difference), a crop of 2% a side 6 bits, of 5% a side 14 bits; the
//          closest two distinct photos (1,275 pairs) are 20 bits apart. 10 leaves margin on
//          both sides; --dedup-threshold 14 also takes 5% crops, at more risk on large sets.
// The first sample in input order is kept; DuplicateIndex is fed in that order by the build's
// serial sink, so the result is the same at any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace mm::pack {

/// XXH3-64 (seed 0) of `size` bytes of pixels.
uint64_t PixelHash(const uint8_t* pixels, size_t size);

/// The 64-bit DCT perceptual hash of `pixels`, [height, width, 3] uint8 RGB (see above).
/// Bit 8*u + v is coefficient (u, v) (u vertical frequency) > median of the 64.
uint64_t PerceptualHash(const uint8_t* pixels, int width, int height);

/// Number of differing bits.
inline int HammingDistance(uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); }

/// The hashes of the samples kept so far. Not thread-safe (the build's serial sink owns it).
class DuplicateIndex {
 public:
  /// `near_threshold` < 0: exact duplicates only.
  explicit DuplicateIndex(int near_threshold) : near_threshold_(near_threshold) {}

  /// The position (in Add order) of a kept sample this one duplicates, or -1; `exact` is set
  /// when its pixels are identical, else it is a near duplicate.
  int64_t Find(uint64_t pixel_hash, uint64_t perceptual_hash, bool* exact) const;
  /// Records a kept sample.
  void Add(uint64_t pixel_hash, uint64_t perceptual_hash);

 private:
  int near_threshold_;
  std::unordered_map<uint64_t, int64_t> exact_;
  // Linear scan: about 1 ns a kept sample (one popcount), so 10^5 samples cost 10^-4 s each;
  // a set of millions would want a multi-index hash (Norouzi et al., 2012).
  std::vector<uint64_t> perceptual_;
};

}  // namespace mm::pack
