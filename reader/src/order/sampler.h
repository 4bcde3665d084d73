// sampler.h: the deterministic epoch order (a seeded bijection) and per-sample random draws.
// Private to mm_reader.
//
// The permutation of [0, n) for (seed, epoch) is a 4-round balanced Feistel network over the
// smallest even number of bits 2h with 2^(2h) >= n, its round function a splitmix64 finaliser
// keyed by (seed, epoch, round), restricted to [0, n) by cycle-walking (Black and Rogaway,
// "Ciphers with Arbitrary Finite Domains", CT-RSA 2002). Since 2^(2h) < 4n, a position takes
// fewer than 4 walks on average. O(1) memory and O(1) time per position: no stored
// permutation, so anonymous memory does not grow with the set.
#pragma once

#include <cstdint>

#include "mm/reader.h"

namespace mm::reader::internal {

/// splitmix64's finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a bijective 64-bit mix.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A 64-bit hash of (seed, epoch, sample, salt); salts keep independent draws apart.
inline uint64_t SampleHash(uint64_t seed, int64_t epoch, int64_t sample, uint64_t salt) {
  return Mix64(Mix64(Mix64(seed ^ salt) ^ static_cast<uint64_t>(epoch)) ^
               static_cast<uint64_t>(sample));
}

inline constexpr uint64_t kCaptionSalt = 0x63617074696f6e00ull;  // "caption"
inline constexpr uint64_t kCropSalt = 0x63726f7000000000ull;     // "crop"
inline constexpr uint64_t kFlipSalt = 0x666c697000000000ull;     // "flip"

/// A pseudorandom bijection of [0, n) fixed by (seed, epoch). Cheap to build and copy.
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t seed, int64_t epoch);
  /// The image of `i`, 0 <= i < n.
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t Feistel(uint64_t x) const;
  uint64_t n_;
  int half_bits_;
  uint64_t mask_;
  uint64_t keys_[4];
};

}  // namespace mm::reader::internal
