#include "sampler.h"

#include "shard_set_impl.h"

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

int64_t ItemsPerEpoch(const ShardSet& set, const LoaderOptions& options) {
  return options.caption_mode == CaptionMode::kAllCaptions ? set.info().num_captions
                                                           : set.info().num_samples;
}

}  // namespace internal

Item GlobalItem(const ShardSet& set, const LoaderOptions& options, int64_t epoch, int64_t pos) {
  const int64_t n = internal::ItemsPerEpoch(set, options);
  int64_t k = options.shuffle
                  ? static_cast<int64_t>(internal::Permutation(n, options.seed, epoch)(pos))
                  : pos;
  if (options.caption_mode == CaptionMode::kAllCaptions) {
    if (auto* impl = dynamic_cast<const internal::ShardSetImpl*>(&set)) {
      return impl->CaptionPair(k);
    }
    // Another ShardSet implementation: walk the captions (linear; tests only).
    for (int64_t s = 0; s < set.num_samples(); ++s) {
      int nc = set.NumCaptions(s);
      if (k < nc) return Item{s, static_cast<int32_t>(k)};
      k -= nc;
    }
    return Item{-1, -1};
  }
  int nc = set.NumCaptions(k);
  int32_t c =
      static_cast<int32_t>(internal::SampleHash(options.seed, epoch, k, internal::kCaptionSalt) %
                           static_cast<uint64_t>(nc));
  return Item{k, c};
}

}  // namespace mm::reader
