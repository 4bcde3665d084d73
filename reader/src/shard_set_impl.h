// shard_set_impl.h: the one implementation of mm::reader::ShardSet. Private to mm_reader (and
// its tests and benchmarks, which reach the stored chunk bytes through it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "shard.h"

namespace mm::reader::internal {

class ShardSetImpl final : public ShardSet {
 public:
  static Result<std::shared_ptr<ShardSet>> Open(const std::string& dir, const OpenOptions& options);

  const SetInfo& info() const override { return info_; }
  int NumCaptions(int64_t i) const override;
  Span<const int32_t> Tokens(int64_t i, int c) const override;
  std::string_view Key(int64_t i) const override;
  std::string Locate(int64_t i) const override;
  int64_t StoredImageBytes(int64_t i) const override;
  Status ReadImage(int64_t i, uint8_t* dst) const override;

  /// The shard holding global sample `i` and `i`'s index in it.
  const Shard& ShardOf(int64_t i, int64_t* local) const;
  /// The (sample, caption) of global caption index `p` in [0, num_captions): binary search
  /// over the shards' caption counts, then over the shard's mapped caption_offsets.
  Item CaptionPair(int64_t p) const;
  size_t num_shards() const { return shards_.size(); }
  const Shard& shard(size_t k) const { return *shards_[k]; }

 private:
  SetInfo info_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<int64_t> first_sample_;   // [shards + 1] prefix sums of samples
  std::vector<int64_t> first_caption_;  // [shards + 1] prefix sums of captions
};

}  // namespace mm::reader::internal
