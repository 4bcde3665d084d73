// Several sets drawn by weight ("A:3,B:1", reader/src/mixture.h): each set's share of the
// epoch, upsampling, and the refusals.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mm/reader.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::FixtureOptions;

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
    // Deterministic per (seed, epoch).
    EXPECT_EQ(GlobalItem(**set, o, 1, 50).sample, GlobalItem(**set, o, 1, 50).sample);
  }
}

TEST(Mixture, RefusesSetsOfAnotherImageSizeAndMalformedWeights) {
  const std::string a = CocoSet(Shards20());
  FixtureOptions other = Shards20();
  other.width = 32;
  const std::string b = CocoSet(other);
  auto mixed = ShardSet::Open(a + ":1," + b + ":1");
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(mixed.status().code() == StatusCode::kInvalidArgument) << mixed.status().ToString();
  EXPECT_NE(mixed.status().message().find("image size"), std::string::npos)
      << mixed.status().ToString();
  for (const std::string& bad : {a + ":0," + a + ":1", a + ":-1," + a + ":1", a + ":x," + a}) {
    auto r = ShardSet::Open(bad);
    EXPECT_TRUE(!r.ok() && r.status().code() == StatusCode::kInvalidArgument)
        << bad << ": " << r.status().ToString();
  }
}

}  // namespace
}  // namespace mm::reader
