// shard_set_impl.h: the implementation behind mm::reader::ShardSet (its pimpl): one set (local
// or remote) or a mixture of sets, each a Part with its own index.json. Private to mm_reader
// (and its tests and benchmarks, which reach the stored chunk bytes through ShardSet::impl()).
//
// A local part's shards are opened at Open and stay open; a remote part's shards are resident
// only while pinned (remote/remote_shards.h). Global sample i is found by binary search over
// the prefix sums of the shards' samples, then its shard by one table lookup: a local shard
// is a pointer, a remote one an atomic load (nullptr while unpinned: a programmer error that
// aborts naming the sample, see reader.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "remote/location.h"
#include "shard/shard.h"

namespace mm::reader::internal {

class CacheDir;      // remote/cache.h
class RemoteShards;  // remote/remote_shards.h

class ShardSetImpl final {
 public:
  /// One set of the ShardSet (a single set: the only part).
  struct Part {
    Location location;
    SetInfo info;  // its own index.json (root: its location)
    size_t first_shard = 0, end_shard = 0;
    double weight = 0;                     // > 0 in a weighted mixture
    std::shared_ptr<RemoteShards> remote;  // null: a local set
  };

  /// ShardSet::Open's work: the set (or every set of a mixture) opened and checked.
  static Result<std::unique_ptr<const ShardSetImpl>> Open(const std::string& location,
                                                          const OpenOptions& options);

  // What ShardSet's methods of the same names return (mm/reader.h).
  const SetInfo& info() const { return info_; }
  int64_t num_samples() const { return info_.num_samples; }
  size_t num_shards() const { return info_.shards.size(); }
  const std::vector<MixtureSet>& sets() const { return sets_; }
  bool remote() const { return remote_; }
  size_t ShardOfSample(int64_t i) const;
  Result<ShardPin> PinShard(size_t k) const;
  CacheStats cache_stats() const;
  int NumCaptions(int64_t i) const;
  Span<const int32_t> Tokens(int64_t i, int c) const;
  std::string_view Key(int64_t i) const;
  std::string Locate(int64_t i) const;
  int64_t StoredImageBytes(int64_t i) const;
  void ImageSize(int64_t i, int* width, int* height) const;
  Status ReadImage(int64_t i, uint8_t* dst) const;
  /// The sample's shard's Shard::CheckIntact.
  Status CheckIntact(int64_t i) const;

  /// The shard holding global sample `i` and `i`'s index in it (resident: see the file comment).
  const Shard& ShardOf(int64_t i, int64_t* local) const;
  /// Shard k, which must be resident.
  const Shard& shard(size_t k) const;
  /// First global sample and caption of shard k.
  int64_t first_sample(size_t k) const { return first_sample_[k]; }
  int64_t first_caption(size_t k) const { return first_caption_[k]; }
  const std::vector<Part>& parts() const { return parts_; }
  /// The part whose image size (info().image_width x image_height: the Loader's default output)
  /// differs from the first part's, or -1 when all share it.
  int PartOfOtherImageSize() const;
  /// A weighted mixture (the order draws each part's quota; epoch_order.h).
  bool weighted() const { return weighted_; }
  int64_t epoch_size() const { return epoch_size_; }
  /// 16 hex digits naming what an epoch order is drawn from (LoaderState::set): the XXH3-64 of
  /// every part's shard table, its weight and the mixture's epoch_size; not its location.
  const std::string& identity() const { return identity_; }
  /// RemoteOptions::cache_limit of the remote parts (0: none, or no remote part).
  int64_t cache_limit() const { return cache_limit_; }
  /// The remote parts' RemoteOptions (nullptr: no remote part).
  const RemoteOptions* remote_options() const;
  /// The remote parts' cache directory (they share OpenOptions; nullptr: no remote part).
  std::shared_ptr<CacheDir> cache_dir() const;
  /// The cached file of shard k while pinned ("" for a local shard or an unpinned one); a
  /// local shard's path is info().root + "/" + its file.
  std::string LocalPath(size_t k) const;

 private:
  // Where shard k lives: opened locally, or in a remote part (index within that part).
  struct ShardRef {
    const Shard* local = nullptr;
    RemoteShards* remote = nullptr;
    size_t remote_index = 0;
  };
  static Result<Part> OpenPart(const std::string& location, const OpenOptions& options,
                               std::vector<std::unique_ptr<Shard>>* opened);
  Status AddPart(Part part, std::vector<std::unique_ptr<Shard>> opened);
  static std::string Identity(const ShardSetImpl& set);
  void DescribeSets();
  const Shard* Resident(size_t k) const;
  [[noreturn]] void NotPinned(size_t k, int64_t i) const;

  SetInfo info_;  // a mixture: the first part's, with every part's shards and totals
  std::vector<MixtureSet> sets_;  // [parts] what sets() says of each part
  std::vector<Part> parts_;
  std::vector<std::unique_ptr<Shard>> local_shards_;
  std::vector<ShardRef> refs_;          // [shards]
  std::vector<int64_t> first_sample_;   // [shards + 1] prefix sums of samples
  std::vector<int64_t> first_caption_;  // [shards + 1] prefix sums of captions
  bool remote_ = false;
  bool weighted_ = false;
  int64_t epoch_size_ = 0;
  int64_t cache_limit_ = 0;
  std::string identity_;
};

}  // namespace mm::reader::internal
