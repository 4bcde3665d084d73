// order.cc: see order.h; also the public GlobalItem and the ShuffleMode names.
#include "set/order.h"

#include <algorithm>

#include "order/sampler.h"

namespace mm::reader {

const char* ToString(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::kAuto:
      return "auto";
    case ShuffleMode::kGlobal:
      return "global";
    case ShuffleMode::kBlock:
      return "block";
  }
  return "?";
}

Result<ShuffleMode> ParseShuffleMode(std::string_view name) {
  for (ShuffleMode m : {ShuffleMode::kAuto, ShuffleMode::kGlobal, ShuffleMode::kBlock}) {
    if (name == ToString(m)) return m;
  }
  return Status::InvalidArgument("shuffle mode '" + std::string(name) +
                                 "' is not auto, global or block");
}

namespace internal {
namespace {

struct RemoteBytes {
  int64_t total = 0;
  int64_t largest_shard = 0;
  // Bytes of remote shards small enough to lie wholly inside one batch (the fewest items first,
  // while their items add up to less than a batch), plus for a weighted mixture one largest
  // remote shard per set (its cut visit may hold a single item): with two windows, what one
  // batch may need resident at once.
  int64_t inside_one_batch = 0;
};

RemoteBytes CountRemote(const ShardSetImpl& set, const LoaderOptions& options) {
  RemoteBytes r;
  std::vector<std::pair<int64_t, int64_t>> small;  // (items, bytes)
  for (const auto& part : set.parts()) {
    if (!part.remote) continue;
    int64_t largest_here = 0;
    for (const ShardEntry& e : part.info.shards) {
      r.total += e.bytes;
      r.largest_shard = std::max(r.largest_shard, e.bytes);
      largest_here = std::max(largest_here, e.bytes);
      small.push_back(
          {options.caption_mode == CaptionMode::kAllCaptions ? e.captions : e.samples, e.bytes});
    }
    if (set.weighted()) r.inside_one_batch += largest_here;
  }
  std::sort(small.begin(), small.end());
  int64_t items = 0;
  for (const auto& [n, bytes] : small) {
    if (items + n >= options.batch_size - 1) break;
    items += n;
    r.inside_one_batch += bytes;
  }
  return r;
}

}  // namespace

const char* OrderName(Arrangement arrangement) {
  switch (arrangement) {
    case Arrangement::kFileOrder:
      return "none";
    case Arrangement::kGlobal:
      return "global";
    case Arrangement::kBlock:
      return "block";
  }
  return "?";
}

Result<ResolvedOrder> ResolveOrder(const ShardSetImpl& set, const LoaderOptions& options) {
  ResolvedOrder out;
  if (options.shuffle_window < 0) {
    return Status::InvalidArgument("shuffle_window " + std::to_string(options.shuffle_window) +
                                   " < 0");
  }
  const RemoteBytes remote = CountRemote(set, options);
  const int64_t limit = set.cache_limit();
  const bool bounded = remote.total > 0 && limit > 0;
  const int64_t least = 2 * remote.largest_shard + remote.inside_one_batch;
  if (!options.shuffle) {  // file order: windows of one shard
    out.arrangement = Arrangement::kFileOrder;
    if (bounded && least > limit) {
      return Status::InvalidArgument("the cache limit of " + std::to_string(limit) +
                                     " bytes cannot hold what one batch may read at once: raise "
                                     "it to at least " +
                                     std::to_string(least) + " bytes");
    }
    return out;
  }
  const bool fits = !bounded || remote.total <= limit;
  const std::string size_text = "the remote set's " + std::to_string(remote.total) +
                                " bytes do not fit the cache limit of " + std::to_string(limit) +
                                " bytes";
  if (options.shuffle_mode == ShuffleMode::kGlobal && !fits) {
    return Status::InvalidArgument("global shuffle reads any shard at any time, but " + size_text +
                                   ": use block shuffle or raise the limit");
  }
  if (options.shuffle_mode == ShuffleMode::kGlobal ||
      (options.shuffle_mode == ShuffleMode::kAuto && fits)) {
    return out;  // kGlobal
  }
  out.arrangement = Arrangement::kBlock;
  out.window = options.shuffle_window > 0 ? options.shuffle_window : kDefaultShuffleWindow;
  if (bounded) {
    // One batch may read two windows (and the small shards between them) at once.
    const int64_t room = limit - remote.inside_one_batch;
    const int64_t most = room > 0 ? room / (2 * remote.largest_shard) : 0;
    if (most < 1) {
      return Status::InvalidArgument(
          "the cache limit of " + std::to_string(limit) + " bytes cannot hold what one batch of " +
          std::to_string(options.batch_size) + " may read at once (two windows of one shard of " +
          "up to " + std::to_string(remote.largest_shard) + " bytes" +
          (remote.inside_one_batch > 0
               ? ", and " + std::to_string(remote.inside_one_batch) + " bytes of smaller shards"
               : std::string()) +
          "): raise the limit to at least " + std::to_string(least) + " bytes");
    }
    if (options.shuffle_window == 0) {
      out.window = static_cast<int>(std::min<int64_t>(most, 1 << 20));
    } else if (options.shuffle_window > most) {
      return Status::InvalidArgument(
          "a shuffle window of " + std::to_string(options.shuffle_window) + " shards needs " +
          std::to_string(2 * options.shuffle_window * remote.largest_shard +
                         remote.inside_one_batch) +
          " bytes of cache (the window read and the next), over the limit of " +
          std::to_string(limit) + " bytes: at most " + std::to_string(most) + " shards fit");
    }
  }
  if (options.shuffle_mode == ShuffleMode::kAuto) {
    out.notice =
        size_text + ": block shuffle over windows of " + std::to_string(out.window) + " shards";
  }
  return out;
}

std::shared_ptr<const OrderShape> MakeOrderShape(const ShardSetImpl& set, CaptionMode mode) {
  auto shape = std::make_shared<OrderShape>();
  for (const ShardEntry& e : set.info().shards) {
    shape->shard_items.push_back(mode == CaptionMode::kAllCaptions ? e.captions : e.samples);
  }
  for (const auto& part : set.parts()) {
    shape->parts.push_back({part.first_shard, part.end_shard, part.weight});
  }
  shape->mixture = set.weighted();
  shape->epoch_size = set.epoch_size();
  return shape;
}

Item ResolveDraw(const ShardSetImpl& set, const LoaderOptions& options, int64_t epoch,
                 const Draw& draw) {
  const Shard& shard = set.shard(draw.shard);
  const int64_t first = set.first_sample(draw.shard);
  if (options.caption_mode == CaptionMode::kAllCaptions) {
    const int64_t s = shard.SampleOfCaption(draw.local);
    int64_t caption = draw.local - shard.CaptionBegin(s);
    if (caption < 0 || caption >= shard.NumCaptions(s)) {  // the mapping changed (shard.h)
      shard.MarkInconsistent();
      caption = 0;
    }
    return Item{first + s, static_cast<int32_t>(caption)};
  }
  const int64_t sample = first + draw.local;
  const uint64_t key = static_cast<uint64_t>(sample) +
                       static_cast<uint64_t>(draw.pass) * static_cast<uint64_t>(set.num_samples());
  const uint64_t h = SampleHash(options.seed, epoch, static_cast<int64_t>(key), kCaptionSalt);
  return Item{sample,
              static_cast<int32_t>(h % static_cast<uint64_t>(shard.NumCaptions(draw.local)))};
}

}  // namespace internal

Item GlobalItem(const ShardSet& set, const LoaderOptions& options, int64_t epoch, int64_t pos) {
  const internal::ShardSetImpl& impl = set.impl();
  Result<internal::ResolvedOrder> resolved = internal::ResolveOrder(impl, options);
  if (!resolved.ok()) return Item{-1, -1};
  auto shape = internal::MakeOrderShape(impl, options.caption_mode);
  if (!internal::CheckOrderSize(*shape).ok()) return Item{-1, -1};
  const internal::EpochOrder order(std::move(shape), resolved->arrangement, resolved->window,
                                   options.seed, epoch);
  return internal::ResolveDraw(impl, options, epoch, order.At(pos));
}

}  // namespace mm::reader
