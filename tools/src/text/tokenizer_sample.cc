// tokenizer_sample.cc: see tokenizer_sample.h.
#include "text/tokenizer_sample.h"

#include <algorithm>
#include <utility>

namespace mm::pack {

CaptionReservoir::CaptionReservoir(int64_t capacity, uint64_t seed)
    : capacity_(std::max<int64_t>(1, capacity)), state_(seed) {}

uint64_t CaptionReservoir::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void CaptionReservoir::Add(std::string caption) {
  const int64_t i = seen_++;
  if (i < capacity_) {
    kept_.emplace_back(i, std::move(caption));
    return;
  }
  // j uniform in [0, i]: Lemire's multiply-shift with rejection (no modulo bias).
  const uint64_t range = static_cast<uint64_t>(i) + 1;
  unsigned __int128 m = static_cast<unsigned __int128>(Next()) * range;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < range) {
    const uint64_t threshold = -range % range;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next()) * range;
      low = static_cast<uint64_t>(m);
    }
  }
  const auto j = static_cast<int64_t>(m >> 64);
  if (j < capacity_) kept_[j] = {i, std::move(caption)};
}

std::vector<std::string> CaptionReservoir::Take() {
  std::sort(kept_.begin(), kept_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(kept_.size());
  for (auto& [at, caption] : kept_) out.push_back(std::move(caption));
  kept_.clear();
  kept_.shrink_to_fit();
  return out;
}

}  // namespace mm::pack
