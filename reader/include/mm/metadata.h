// mm/metadata.h: one value of a manifest field kept per sample (`mmpack build --keep-fields`),
// as the writer takes it and SampleText::Metadata returns it. How each type is stored is in
// schemas/FORMAT.md ("Kept fields"): a shard's column metadata/<name> is int64 when all its
// values are integers, uint64 when they are integers >= 0 and one is 2^63 or more, float64 when
// they are numbers a double holds exactly (a missing one stored as NaN), else UTF-8 strings
// (numbers written as text, a missing value as "").
#pragma once

#include <cstdint>
#include <string>

namespace mm::reader {

struct MetadataValue {
  enum class Type { kMissing, kInt, kFloat, kString, kUint };
  Type type = Type::kMissing;
  int64_t i = 0;   // kInt
  double f = 0;    // kFloat
  std::string s;   // kString: UTF-8
  uint64_t u = 0;  // kUint
};

}  // namespace mm::reader
