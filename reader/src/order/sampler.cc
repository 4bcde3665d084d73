#include "order/sampler.h"

namespace mm::reader {
namespace internal {

Permutation::Permutation(uint64_t n, uint64_t seed, int64_t epoch) : n_(n) {
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = Mix64(seed ^ Mix64(static_cast<uint64_t>(epoch) ^ 0x5065726d75746521ull));
  for (uint64_t& key : keys_) key = k = Mix64(k);
}

uint64_t Permutation::Feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & mask_;
  for (uint64_t key : keys_) {
    uint64_t next = left ^ (Mix64(right ^ key) & mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::operator()(uint64_t i) const {
  uint64_t x = Feistel(i);
  while (x >= n_) x = Feistel(x);  // cycle-walk: i's cycle returns to [0, n)
  return x;
}

}  // namespace internal

}  // namespace mm::reader
