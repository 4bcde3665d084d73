// filename.cc: see mm/filename.h.
#include "mm/filename.h"

#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string_view>

namespace mm::format {
namespace {

constexpr std::string_view kShardPrefix = "shard-";
constexpr std::string_view kShardSuffix = ".h5";

}  // namespace

std::string ShardFileName(int64_t index) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%06" PRId64, index);
  return std::string(kShardPrefix) + digits + std::string(kShardSuffix);
}

std::string TempShardFileName(int64_t index) { return ShardFileName(index) + ".tmp"; }

bool ParseShardFileName(std::string_view name, int64_t* index) {
  if (name.size() <= kShardPrefix.size() + kShardSuffix.size() ||
      name.substr(0, kShardPrefix.size()) != kShardPrefix ||
      name.substr(name.size() - kShardSuffix.size()) != kShardSuffix) {
    return false;
  }
  const std::string_view digits =
      name.substr(kShardPrefix.size(), name.size() - kShardPrefix.size() - kShardSuffix.size());
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    if (value > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return false;
    value = value * 10 + (c - '0');
  }
  if (index != nullptr) *index = value;
  return true;
}

}  // namespace mm::format
