// order.h: the bridge between a ShardSet, LoaderOptions and EpochOrder (epoch_order.h): which
// arrangement and window the options mean for this set (kAuto and window 0 resolved against
// the cache limit), the set's OrderShape, and the Item a Draw stands for. Private to mm_reader.
// Thread-safe: pure functions of immutable sets (ResolveDraw reads a resident shard).
#pragma once

#include <memory>
#include <string>

#include "mm/reader.h"
#include "order/epoch_order.h"
#include "set/shard_set_impl.h"

namespace mm::reader::internal {

struct ResolvedOrder {
  Arrangement arrangement = Arrangement::kGlobal;
  int window = 0;      // kBlock: visits per window
  std::string notice;  // set when kAuto chose kBlock for the user
};

/// What `options` mean for `set`:
///  - shuffle false: kFileOrder;
///  - kGlobal: refused for a remote set larger than its cache limit (every shard may be read
///    at any time, so all must be resident at once);
///  - kBlock: window shuffle_window, or when 0 the largest W with 2 * W * (largest remote shard)
///    <= cache limit (the window read and the next), kDefaultShuffleWindow without a limit;
///  - kAuto: kGlobal, or kBlock with the largest window (and a notice) when a remote set does
///    not fit its cache limit.
/// Errors: InvalidArgument (the cases refused above, a window < 0, a limit that holds fewer
/// than two shards: "cache limit of L bytes holds fewer than two shards of S bytes ...").
Result<ResolvedOrder> ResolveOrder(const ShardSetImpl& set, const LoaderOptions& options);

/// The set's shape for `mode`: items per shard (samples, or captions under kAllCaptions) and
/// its parts with their weights.
std::shared_ptr<const OrderShape> MakeOrderShape(const ShardSetImpl& set, CaptionMode mode);

/// The Item that `draw` stands for in `epoch`; its shard must be resident. Under
/// kRandomCaption the caption is drawn per (seed, epoch, sample, pass) (keyed by sample + pass
/// * samples, so pass 0 draws what (seed, epoch, sample) alone draws); under kAllCaptions
/// draw.local is the shard's caption index.
Item ResolveDraw(const ShardSetImpl& set, const LoaderOptions& options, int64_t epoch,
                 const Draw& draw);

/// "none", "global" or "block": the order's name in LoaderState.
const char* OrderName(Arrangement arrangement);

}  // namespace mm::reader::internal
