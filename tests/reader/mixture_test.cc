// Several sets drawn by weight ("A:3,B:1", mm/internal/mixture.h): each set's share of the
// epoch, upsampling, and the refusals.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::FixtureOptions;
using mm::testing::TempDir;

FixtureOptions Shards20() {
  FixtureOptions o;
  o.samples_per_shard = 20;  // coco: 51 samples in 3 shards
  return o;
}

TEST(Mixture, EachSetGetsItsWeightedShareOfTheEpoch) {
  const std::string a = CocoSet(Shards20());
  FixtureOptions ob = Shards20();
  ob.samples_per_shard = 17;  // another set (same images, same tokenizer), 3 shards of 17
  const std::string b = CocoSet(ob);
  auto set = ShardSet::Open(a + ":3," + b + ":1");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ((*set)->num_samples(), 102);
  ASSERT_EQ((*set)->num_shards(), 6u);
  LoaderOptions o;
  o.seed = 4;
  for (ShuffleMode mode : {ShuffleMode::kGlobal, ShuffleMode::kBlock}) {
    o.shuffle_mode = mode;
    o.shuffle_window = 2;
    // An epoch of 102 items (the sets' sizes summed), 3:1: A 76.5 -> 77 (the tie of
    // remainders goes to the earlier set), B 25. A: every sample once, 26 of them twice.
    std::map<int64_t, int> count;
    int from_a = 0;
    for (int64_t pos = 0; pos < 102; ++pos) {
      const Item item = GlobalItem(**set, o, /*epoch=*/1, pos);
      ++count[item.sample];
      from_a += item.sample < 51 ? 1 : 0;
    }
    EXPECT_EQ(from_a, 77) << ToString(mode);
    int a_twice = 0, b_seen = 0;
    for (int64_t s = 0; s < 102; ++s) {
      if (s < 51) {
        EXPECT_GE(count[s], 1) << "set A sample " << s << " never drawn";
        EXPECT_LE(count[s], 2);
        a_twice += count[s] == 2 ? 1 : 0;
      } else {
        EXPECT_LE(count[s], 1) << "set B sample " << s << " drawn twice";
        b_seen += count[s];
      }
    }
    EXPECT_EQ(a_twice, 26);
    EXPECT_EQ(b_seen, 25);
    // What sets() says of each set: where it starts, its weight, its share of the epoch.
    const std::vector<MixtureSet>& sets = (*set)->sets();
    ASSERT_EQ(sets.size(), 2u);
    EXPECT_EQ(sets[0].location, a);
    EXPECT_EQ(sets[1].location, b);
    EXPECT_EQ(sets[0].weight, 3);
    EXPECT_EQ(sets[1].first_sample, 51);
    EXPECT_EQ(sets[0].epoch_samples, 77);
    EXPECT_EQ(sets[1].epoch_samples, 25);
    EXPECT_EQ(sets[1].info.num_samples, 51);
    EXPECT_EQ((*set)->SetOfSample(50), 0);
    EXPECT_EQ((*set)->SetOfSample(51), 1);
    EXPECT_EQ((*set)->SetOfSample(101), 1);
    // Deterministic per (seed, epoch).
    EXPECT_EQ(GlobalItem(**set, o, 1, 50).sample, GlobalItem(**set, o, 1, 50).sample);
  }
}

// The size rule checks what the loader hands out: sets stored at 64x48 and
// 32x48 open as one mixture; a Loader without an output size is refused naming both sizes (its
// batches would have no one shape), one with an output size gives every batch that shape, each
// row from the set that set_index names.
TEST(Mixture, SetsOfAnotherStoredSizeLoadAtOneOutputSize) {
  const std::string a = CocoSet(Shards20());
  FixtureOptions other = Shards20();
  other.width = 32;
  const std::string b = CocoSet(other);
  auto mixed = ShardSet::Open(a + ":1," + b + ":1");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  int w = 0, h = 0;
  (*mixed)->ImageSize(60, &w, &h);  // a sample of b
  EXPECT_EQ(w, 32);
  EXPECT_EQ(h, 48);
  LoaderOptions o;
  o.batch_size = 8;
  auto refused = Loader::Create(*mixed, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("32x48"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("output size"), std::string::npos);
  o.output_height = o.output_width = 40;
  o.crop = ImageCrop::kRandomResized;
  auto loader = Loader::Create(*mixed, o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  std::map<int32_t, int> rows_of;
  for (;;) {
    auto batch = (*loader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (!*batch) break;
    const Batch& bt = **batch;
    ASSERT_EQ(bt.height, 40);
    ASSERT_EQ(bt.width, 40);
    ASSERT_EQ(bt.set_index.size(), static_cast<size_t>(bt.size));
    for (int j = 0; j < bt.size; ++j) {
      EXPECT_EQ(bt.set_index[j], bt.indices[j] < 51 ? 0 : 1) << "sample " << bt.indices[j];
      ++rows_of[bt.set_index[j]];
    }
  }
  EXPECT_GT(rows_of[0], 0);
  EXPECT_GT(rows_of[1], 0);
}

TEST(Mixture, RefusesSetsOfAnotherTokenizerAndMalformedWeights) {
  const std::string a = CocoSet(Shards20());
  FixtureOptions other = Shards20();
  other.pad_id = 1;  // another tokenizer's padding id
  const std::string b = CocoSet(other);
  auto mixed = ShardSet::Open(a + ":1," + b + ":1");
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(mixed.status().code() == StatusCode::kInvalidArgument) << mixed.status().ToString();
  EXPECT_NE(mixed.status().message().find("tokenizer"), std::string::npos)
      << mixed.status().ToString();
  for (const std::string& bad : {a + ":0," + a + ":1", a + ":-1," + a + ":1", a + ":x," + a}) {
    auto r = ShardSet::Open(bad);
    EXPECT_TRUE(!r.ok() && r.status().code() == StatusCode::kInvalidArgument)
        << bad << ": " << r.status().ToString();
  }
}

// Weights and epoch sizes at the ends of their ranges: A:1e308,B:1 overflowed int64 in the
// quotas and spun at 100% CPU before the first batch.
TEST(Mixture, ExtremeWeightsGiveBoundedQuotasAndABatchAtOnce) {
  const std::string a = CocoSet(Shards20());
  FixtureOptions ob = Shards20();
  ob.samples_per_shard = 17;
  const std::string b = CocoSet(ob);
  for (const std::string& spec : {a + ":1e308," + b + ":1", a + ":1e-300," + b + ":1e300",
                                  a + ":1.7976931348623157e308," + b + ":1.7976931348623157e308"}) {
    auto set = ShardSet::Open(spec);
    ASSERT_TRUE(set.ok()) << spec << ": " << set.status().ToString();
    LoaderOptions o;
    o.batch_size = 6;
    auto loader = Loader::Create(*set, o);
    ASSERT_TRUE(loader.ok()) << spec << ": " << loader.status().ToString();
    EXPECT_EQ((*loader)->items_per_epoch(), 102);
    int64_t from_a = 0, n = 0;
    for (;;) {
      auto batch = (*loader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      if (!*batch) break;
      for (int64_t i : (*batch)->indices) from_a += i < 51 ? 1 : 0;
      n += (*batch)->size;
    }
    EXPECT_EQ(n, 102 / 6 * 6);
    const int64_t want = spec.find(":1e308,") != std::string::npos    ? n
                         : spec.find(":1e-300,") != std::string::npos ? 0
                                                                      : n / 2;
    EXPECT_EQ(from_a, want) << spec;
  }
}

// An epoch_size of 2^63 - 1 spun in the quotas; 1e10 over a small set planned one visit per
// shard per pass (bad_alloc, or tens of GB). Refused at once, naming the bound.
TEST(Mixture, HugeEpochSizesAreRefusedBeforeAnythingIsAllocated) {
  TempDir tmp("mm_mixture");
  const std::string a = CocoSet(Shards20());
  auto spec = [&](const std::string& epoch_size) {
    const std::string path = tmp / ("mix-" + epoch_size + ".json");
    testing::WriteFile(path, "{\"sets\": [{\"path\": \"" + a + "\", \"weight\": 1}], " +
                                 "\"epoch_size\": " + epoch_size + "}");
    return path;
  };
  for (const char* huge :
       {"9223372036854775807", "18446744073709551615", "9007199254740993", "0", "-5"}) {
    auto set = ShardSet::Open(spec(huge));
    ASSERT_FALSE(set.ok()) << huge;
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument) << set.status().ToString();
    EXPECT_NE(set.status().message().find("epoch_size"), std::string::npos)
        << set.status().ToString();
  }
  for (const char* big : {"10000000000", "9007199254740992"}) {
    auto set = ShardSet::Open(spec(big));
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    auto loader = Loader::Create(*set, LoaderOptions{});
    ASSERT_FALSE(loader.ok()) << big;
    EXPECT_EQ(loader.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(loader.status().message().find("at most 1048576 shard visits"), std::string::npos)
        << loader.status().ToString();
  }
  // Upsampling within the bound still works: 5000 passes over 3 shards.
  auto set = ShardSet::Open(spec("255000"));
  ASSERT_TRUE(set.ok());
  auto loader = Loader::Create(*set, LoaderOptions{});
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ((*loader)->items_per_epoch(), 255000);
  auto first = (*loader)->Next();
  ASSERT_TRUE(first.ok() && *first);
}

}  // namespace
}  // namespace mm::reader
