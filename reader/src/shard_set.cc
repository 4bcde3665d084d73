#include <algorithm>

#include "mm/internal/index_json.h"
#include "mm/internal/set_rules.h"
#include "shard_set_impl.h"

namespace mm::reader {

Result<std::shared_ptr<ShardSet>> ShardSet::Open(const std::string& dir,
                                                 const OpenOptions& options) {
  return internal::ShardSetImpl::Open(dir, options);
}

namespace internal {

Result<std::shared_ptr<ShardSet>> ShardSetImpl::Open(const std::string& dir,
                                                     const OpenOptions& options) {
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndexText(dir));  // never blocks on a FIFO
  auto set = std::make_shared<ShardSetImpl>();
  MM_ASSIGN_OR_RETURN(set->info_, ParseIndex(text, dir));
  MM_RETURN_NOT_OK(CheckSetRules(set->info_));
  set->first_sample_.push_back(0);
  set->first_caption_.push_back(0);
  for (const ShardEntry& e : set->info_.shards) {
    MM_ASSIGN_OR_RETURN(auto shard, Shard::Open(dir + "/" + e.file, e, set->info_, options));
    set->shards_.push_back(std::move(shard));
    set->first_sample_.push_back(set->first_sample_.back() + e.samples);
    set->first_caption_.push_back(set->first_caption_.back() + e.captions);
  }
  return std::shared_ptr<ShardSet>(std::move(set));
}

const Shard& ShardSetImpl::ShardOf(int64_t i, int64_t* local) const {
  // Last shard whose first sample is <= i (empty shards are skipped by upper_bound).
  auto it = std::upper_bound(first_sample_.begin(), first_sample_.end(), i);
  size_t k = static_cast<size_t>(it - first_sample_.begin()) - 1;
  *local = i - first_sample_[k];
  return *shards_[k];
}

Item ShardSetImpl::CaptionPair(int64_t p) const {
  auto it = std::upper_bound(first_caption_.begin(), first_caption_.end(), p);
  size_t k = static_cast<size_t>(it - first_caption_.begin()) - 1;
  int64_t c = p - first_caption_[k];
  const Shard& s = *shards_[k];
  int64_t local = s.SampleOfCaption(c);
  return Item{first_sample_[k] + local, static_cast<int32_t>(c - s.CaptionBegin(local))};
}

int ShardSetImpl::NumCaptions(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).NumCaptions(local);
}

Span<const int32_t> ShardSetImpl::Tokens(int64_t i, int c) const {
  int64_t local = 0;
  const Shard& s = ShardOf(i, &local);
  return s.CaptionTokens(s.CaptionBegin(local) + c);
}

std::string_view ShardSetImpl::Key(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).Key(local);
}

std::string ShardSetImpl::Locate(int64_t i) const {
  if (i < 0 || i >= info_.num_samples) return "sample " + std::to_string(i) + " (out of range)";
  int64_t local = 0;
  const Shard& s = ShardOf(i, &local);
  return s.name() + " sample " + std::to_string(local);
}

int64_t ShardSetImpl::StoredImageBytes(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).StoredBytes(local);
}

Status ShardSetImpl::ReadImage(int64_t i, uint8_t* dst) const {
  if (i < 0 || i >= info_.num_samples) {
    return Status::OutOfRange("sample " + std::to_string(i) + " of " +
                              std::to_string(info_.num_samples));
  }
  int64_t local = 0;
  return ShardOf(i, &local).ReadImage(local, dst);
}

}  // namespace internal
}  // namespace mm::reader
