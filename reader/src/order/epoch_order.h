// epoch_order.h: an epoch's global order as a function of (set shape, seed, epoch, mode): which
// shard and which item of it stands at each position. Private to mm_reader.
//
// An epoch is a list of visits: a visit takes `count` items of one shard (all of them, or a
// seeded subset). A single set visits each shard once, whole, in file order. A mixture of sets
// drawn by weight (reader/README.md, "Several sets by weight") gives set i a quota c_i of the
// epoch's E items: c_i / n_i whole passes over its n_i items (upsampling), then c_i mod n_i
// items more from whole shards taken in a seeded order per (seed, epoch), the last one cut to a
// seeded subset; visit `pass` numbers the copies so that the copies of a sample differ in
// caption and augmentation.
//
// The visits' items are then arranged:
//   kFileOrder: visits in order, items in order;
//   kGlobal:    a seeded Feistel permutation of [0, E) (sampler.h) over the visits' items in
//               order. For a single set this is exactly the order the reader had before visits
//               existed: position p holds global item Permutation(E, seed, epoch)(p);
//   kBlock:     the visits permuted per (seed, epoch), cut into windows of W visits, each
//               window's items permuted by its own Feistel permutation (MosaicML Streaming's
//               py1b; WebDataset's shard shuffle plus shuffle buffer). A window of W visits reads
//               at most W distinct shards, so a cache needs only the window read and the next.
// Every item of the plan appears exactly once per epoch in every arrangement.
//
// Cost: building is O(visits) time and memory (visits = shards for a single set; at most
// kMaxEpochVisits: Loader::Create refuses more, CheckOrderSize); At(pos) is
// one or two Feistel evaluations and one or two binary searches. Immutable after construction:
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mm/reader.h"
#include "mm/status.h"

namespace mm::reader::internal {

/// What the order needs to know of a set, all from index.json (no shard need be resident).
struct OrderShape {
  std::vector<int64_t> shard_items;  // items of each shard: samples, or captions (all captions)
  struct Part {
    size_t first_shard = 0, end_shard = 0;
    double weight = 1.0;
  };
  std::vector<Part> parts;  // one per set; a single set: one part
  int64_t epoch_size = 0;   // items per epoch of a mixture; 0: the sum of the parts' items
  bool mixture = false;     // weights apply (several sets, or a spec that gave weights)
};

/// Items each part gets per epoch: weight_i / sum(weights) * E, rounded down, the remainder
/// given one by one to the largest fractional parts (ties: the earlier part). Sums to E; each
/// in [0, E] whatever the weights (finite and positive: mm/internal/mixture.h): weights that
/// would overflow a double (1e308) are taken relative to the largest. O(parts).
std::vector<int64_t> PartQuotas(const OrderShape& shape);
/// E: shape.epoch_size, or the sum of shard_items.
int64_t EpochItems(const OrderShape& shape);

/// Most visits (shard reads) an epoch may plan: an EpochOrder holds 24 bytes per visit (and a
/// Loader's prefetcher a window per visit in file order), so an epoch that upsamples a small
/// set by a huge weight or epoch_size would need gigabytes (epoch_size 1e10 over a 4-shard set:
/// 8e8 visits). Refused instead, before anything is allocated.
inline constexpr int64_t kMaxEpochVisits = int64_t{1} << 20;
/// The visits `shape`'s epoch plans (at most kMaxEpochVisits + 1: counting stops there), in
/// O(shards) time and O(parts) memory.
int64_t PlannedVisits(const OrderShape& shape);
/// InvalidArgument, naming the epoch's size and the bound, when PlannedVisits exceeds it.
Status CheckOrderSize(const OrderShape& shape);

enum class Arrangement { kFileOrder, kGlobal, kBlock };

/// An item of the order: item `local` (sample, or caption under kAllCaptions) of `shard`, in
/// copy `pass` of its set (0 unless the set is upsampled).
struct Draw {
  uint32_t shard = 0;
  int32_t pass = 0;
  int64_t local = 0;
};

/// A range of positions and the distinct shards it reads, in first-read order.
struct OrderWindow {
  int64_t begin = 0, end = 0;
  std::vector<uint32_t> shards;
};

class EpochOrder {
 public:
  /// `window`: visits per window, for kBlock (>= 1).
  EpochOrder(std::shared_ptr<const OrderShape> shape, Arrangement arrangement, int window,
             uint64_t seed, int64_t epoch);

  int64_t size() const { return size_; }
  /// The item at position `pos`, 0 <= pos < size().
  Draw At(int64_t pos) const;
  /// The positions in order, cut where the set of shards read changes: kBlock one window per
  /// window of visits; kFileOrder one per visit; kGlobal a single window reading every shard.
  std::vector<OrderWindow> Windows() const;

 private:
  struct Visit {
    uint32_t shard;
    int32_t pass;
    int64_t count;  // < the shard's items: a seeded subset of them
  };
  void PlanVisits();
  Draw InVisit(size_t v, int64_t j) const;

  std::shared_ptr<const OrderShape> shape_;
  Arrangement arrangement_;
  int window_;
  uint64_t seed_;
  int64_t epoch_;
  int64_t size_ = 0;
  std::vector<Visit> visits_;   // kBlock: in permuted order
  std::vector<int64_t> first_;  // [visits + 1] prefix sums of counts
};

}  // namespace mm::reader::internal
