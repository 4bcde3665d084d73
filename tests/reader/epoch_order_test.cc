// EpochOrder (reader/src/order/epoch_order.h): the block shuffle is a permutation of the epoch,
// deterministic per (seed, epoch), local to W shards per window; and its shuffle quality
// measured against the global permutation (the figures reader/README.md quotes, printed here).
#include "order/epoch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

namespace mm::reader::internal {
namespace {

std::shared_ptr<const OrderShape> Shape(std::vector<int64_t> shard_items) {
  auto s = std::make_shared<OrderShape>();
  s->shard_items = std::move(shard_items);
  s->parts.push_back({0, s->shard_items.size(), 1.0});
  return s;
}

// Global item index of a draw: the shard's first item plus its local index.
std::vector<int64_t> Flatten(const OrderShape& shape, const EpochOrder& order) {
  std::vector<int64_t> first(shape.shard_items.size() + 1, 0);
  for (size_t k = 0; k < shape.shard_items.size(); ++k)
    first[k + 1] = first[k] + shape.shard_items[k];
  std::vector<int64_t> out;
  for (int64_t p = 0; p < order.size(); ++p) {
    const Draw d = order.At(p);
    out.push_back(first[d.shard] + d.local);
  }
  return out;
}

TEST(BlockShuffle, EveryItemOncePerEpochWithUnevenShards) {
  auto shape = Shape({7, 1, 30, 12, 12, 5, 0, 19});  // an empty shard too
  for (int window : {1, 2, 3, 8, 100}) {
    EpochOrder order(shape, Arrangement::kBlock, window, /*seed=*/3, /*epoch=*/1);
    ASSERT_EQ(order.size(), 86);
    std::vector<int64_t> items = Flatten(*shape, order);
    std::sort(items.begin(), items.end());
    std::vector<int64_t> want(86);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(items, want) << "window " << window;
  }
}

TEST(BlockShuffle, DeterministicPerSeedAndEpochAndDifferentAcrossThem) {
  auto shape = Shape(std::vector<int64_t>(10, 20));
  auto at = [&](uint64_t seed, int64_t epoch) {
    return Flatten(*shape, EpochOrder(shape, Arrangement::kBlock, 3, seed, epoch));
  };
  EXPECT_EQ(at(5, 2), at(5, 2));
  EXPECT_NE(at(5, 2), at(5, 3));
  EXPECT_NE(at(5, 2), at(6, 2));
}

TEST(BlockShuffle, EachWindowReadsAtMostWShards) {
  auto shape = Shape(std::vector<int64_t>(23, 10));
  const int window = 4;
  EpochOrder order(shape, Arrangement::kBlock, window, 9, 0);
  const std::vector<OrderWindow> windows = order.Windows();
  ASSERT_EQ(windows.size(), 6u);  // ceil(23 / 4)
  int64_t next = 0;
  for (const OrderWindow& w : windows) {
    EXPECT_EQ(w.begin, next);
    EXPECT_LE(w.shards.size(), static_cast<size_t>(window));
    const std::set<uint32_t> allowed(w.shards.begin(), w.shards.end());
    for (int64_t p = w.begin; p < w.end; ++p) EXPECT_TRUE(allowed.count(order.At(p).shard)) << p;
    next = w.end;
  }
  EXPECT_EQ(next, order.size());
}

// Shuffle quality of an order over S equal shards, batches of B positions:
//   distinct: mean number of distinct shards in a batch (how many sources a batch mixes);
//   adjacent: share of neighbouring positions that hold items of the same shard;
//   rho:      Spearman correlation between an item's file position and its epoch position.
struct Quality {
  double distinct = 0, adjacent = 0, rho = 0;
};

Quality Measure(const OrderShape& shape, const EpochOrder& order, int64_t batch) {
  Quality q;
  const int64_t n = order.size();
  std::vector<int64_t> items = Flatten(shape, order);
  int64_t batches = 0, same = 0;
  for (int64_t b = 0; b + batch <= n; b += batch, ++batches) {
    std::set<uint32_t> shards;
    for (int64_t p = b; p < b + batch; ++p) shards.insert(order.At(p).shard);
    q.distinct += static_cast<double>(shards.size());
  }
  q.distinct /= static_cast<double>(batches);
  for (int64_t p = 1; p < n; ++p) same += order.At(p).shard == order.At(p - 1).shard ? 1 : 0;
  q.adjacent = static_cast<double>(same) / static_cast<double>(n - 1);
  double d2 = 0;  // ranks are the positions themselves: rho = 1 - 6 sum d^2 / (n (n^2 - 1))
  for (int64_t p = 0; p < n; ++p) {
    const double d = static_cast<double>(items[p] - p);
    d2 += d * d;
  }
  const double nn = static_cast<double>(n);
  q.rho = 1.0 - 6.0 * d2 / (nn * (nn * nn - 1.0));
  return q;
}

// The figures of reader/README.md ("Block shuffle"): 64 shards of 500 items, batches of 256.
// Expected values follow from sampling theory, not from this output: a batch of B items drawn
// uniformly from S equal shards covers S (1 - (1 - 1/S)^B) of them (62.9 for S = 64); from a
// window of W shards at most W (W (1 - (1 - 1/W)^B) on average, about W here), W + W more when
// the batch straddles two windows. Neighbours share a shard with probability about 1/S
// (global) or 1/W (block). The global order is uncorrelated with file order (rho near 0).
TEST(BlockShuffle, QualityAgainstTheGlobalPermutation) {
  const int shards = 64;
  const int64_t per_shard = 500, batch = 256;
  auto shape = Shape(std::vector<int64_t>(shards, per_shard));
  std::printf("shuffle quality: %d shards x %lld items, batch %lld, seed 1, epoch 0\n", shards,
              static_cast<long long>(per_shard), static_cast<long long>(batch));
  std::printf("  %-10s %18s %18s %12s\n", "order", "shards per batch", "same-shard pairs",
              "spearman");
  const Quality global = Measure(*shape, EpochOrder(shape, Arrangement::kGlobal, 0, 1, 0), batch);
  std::printf("  %-10s %18.2f %18.4f %12.4f\n", "global", global.distinct, global.adjacent,
              global.rho);
  const double s = shards;
  EXPECT_NEAR(global.distinct, s * (1 - std::pow(1 - 1 / s, static_cast<double>(batch))), 1.0);
  EXPECT_NEAR(global.adjacent, 1 / s, 0.01);
  EXPECT_NEAR(global.rho, 0, 0.05);
  for (int w : {1, 2, 4, 8, 16}) {
    const Quality q = Measure(*shape, EpochOrder(shape, Arrangement::kBlock, w, 1, 0), batch);
    std::printf("  block W=%-2d %18.2f %18.4f %12.4f\n", w, q.distinct, q.adjacent, q.rho);
    EXPECT_LE(q.distinct, 2.0 * w);
    EXPECT_GE(q.distinct, 0.9 * w * (1 - std::pow(1 - 1.0 / w, static_cast<double>(batch))));
    EXPECT_NEAR(q.adjacent, 1.0 / w, 0.05 + 0.2 / w);
    // rho is printed, not checked: with 64 / W windows it is the rank correlation of a random
    // permutation of that many blocks, whose spread is about 1 / sqrt(64 / W - 1).
  }
}

}  // namespace
}  // namespace mm::reader::internal
