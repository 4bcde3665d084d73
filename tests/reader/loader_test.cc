// Sampler and Loader: the epoch order, the rank split, batches, resume, errors.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "mm/reader.h"
#include "order/sampler.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::FixtureOptions;

std::shared_ptr<const ShardSet> Coco() {
  static std::shared_ptr<const ShardSet> set = [] {
    FixtureOptions o;
    o.samples_per_shard = 20;
    auto r = ShardSet::Open(CocoSet(o));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::shared_ptr<const ShardSet>(r.value());
  }();
  return set;
}

std::unique_ptr<Loader> MakeLoader(const LoaderOptions& o,
                                   std::shared_ptr<const ShardSet> set = Coco()) {
  auto r = Loader::Create(std::move(set), o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::vector<BatchPtr> Drain(Loader& loader) {
  std::vector<BatchPtr> out;
  for (;;) {
    auto r = loader.Next();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !r.value()) break;
    out.push_back(r.value());
  }
  return out;
}

TEST(Sampler, PermutationIsABijectionForAnySize) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 64ull, 1000ull, 4097ull, 100003ull}) {
    internal::Permutation p(n, /*seed=*/42, /*epoch=*/3);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t v = p(i);
      ASSERT_LT(v, n);
      ASSERT_FALSE(seen[v]) << "n=" << n << " repeats " << v;
      seen[v] = true;
    }
  }
}

TEST(Sampler, OrderDependsOnSeedAndEpochOnly) {
  const ShardSet& set = *Coco();
  LoaderOptions a;
  a.seed = 7;
  auto order = [&](const LoaderOptions& o, int64_t epoch) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < set.num_samples(); ++i)
      v.push_back(GlobalItem(set, o, epoch, i).sample);
    return v;
  };
  EXPECT_EQ(order(a, 0), order(a, 0));
  EXPECT_NE(order(a, 0), order(a, 1));
  LoaderOptions b = a;
  b.seed = 8;
  EXPECT_NE(order(a, 0), order(b, 0));
  LoaderOptions file_order = a;
  file_order.shuffle = false;
  std::vector<int64_t> iota(set.num_samples());
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(order(file_order, 5), iota);
  // The random caption changes with the epoch for some samples, and is always valid.
  int changed = 0;
  for (int64_t i = 0; i < set.num_samples(); ++i) {
    Item e0 = GlobalItem(set, file_order, 0, i), e1 = GlobalItem(set, file_order, 1, i);
    ASSERT_LT(e0.caption, set.NumCaptions(i));
    changed += e0.caption != e1.caption;
  }
  EXPECT_GT(changed, 10);
}

// The guarantees of the global permutation hold for the block shuffle too (shards permuted,
// items permuted within windows of 2 of the 3 shards).
class LoaderOrder : public ::testing::TestWithParam<ShuffleMode> {};
INSTANTIATE_TEST_SUITE_P(Modes, LoaderOrder,
                         ::testing::Values(ShuffleMode::kGlobal, ShuffleMode::kBlock),
                         [](const auto& info) { return std::string(ToString(info.param)); });

TEST_P(LoaderOrder, EverySampleExactlyOncePerEpochAcrossRanks) {
  const ShardSet& set = *Coco();
  const int64_t n = set.num_samples();  // 51
  for (int world : {1, 2, 3}) {
    for (bool drop_last : {true, false}) {
      SCOPED_TRACE("world " + std::to_string(world) + " drop_last " + std::to_string(drop_last));
      const int B = 4, G = world * B;
      std::map<int64_t, int> count;
      std::vector<int64_t> batches;
      for (int rank = 0; rank < world; ++rank) {
        LoaderOptions o;
        o.batch_size = B;
        o.seed = 11;
        o.rank = rank;
        o.world_size = world;
        o.drop_last = drop_last;
        o.num_threads = 2;
        o.prefetch_batches = 3;
        o.shuffle_mode = GetParam();
        o.shuffle_window = 2;
        auto loader = MakeLoader(o);
        ASSERT_TRUE(loader);
        loader->StartEpoch(2);
        auto got = Drain(*loader);
        batches.push_back(static_cast<int64_t>(got.size()));
        EXPECT_EQ(static_cast<int64_t>(got.size()), loader->batches_per_epoch());
        for (size_t k = 0; k < got.size(); ++k) {
          const Batch& b = *got[k];
          ASSERT_EQ(b.size, B);
          EXPECT_EQ(b.epoch, 2);
          EXPECT_EQ(b.step_in_epoch, static_cast<int64_t>(k));
          for (int j = 0; j < B; ++j) {
            // The loader follows GlobalItem exactly.
            int64_t pos = static_cast<int64_t>(k) * G + rank * B + j;
            Item want = GlobalItem(set, o, 2, pos % n);
            EXPECT_EQ(b.indices[j], want.sample);
            EXPECT_EQ(b.caption[j], want.caption);
            ++count[b.indices[j]];
          }
        }
      }
      // Equal batch counts on every rank.
      EXPECT_EQ(std::set<int64_t>(batches.begin(), batches.end()).size(), 1u);
      int64_t per_rank = drop_last ? n / G : (n + G - 1) / G;
      EXPECT_EQ(batches[0], per_rank);
      if (drop_last) {
        EXPECT_EQ(static_cast<int64_t>(count.size()), per_rank * G);
        for (auto& [s, c] : count) EXPECT_EQ(c, 1) << "sample " << s;
      } else {
        EXPECT_EQ(static_cast<int64_t>(count.size()), n);  // every sample, padding repeats some
        int64_t repeats = 0;
        for (auto& [s, c] : count) repeats += c - 1;
        EXPECT_EQ(repeats, per_rank * G - n);
      }
    }
  }
}

TEST(Loader, BatchesHoldTheSamplesPixelsTokensAndKeys) {
  const ShardSet& set = *Coco();
  LoaderOptions o;
  o.batch_size = 8;
  o.seed = 3;
  o.num_threads = 3;
  auto loader = MakeLoader(o);
  auto batches = Drain(*loader);
  ASSERT_EQ(batches.size(), 6u);
  std::vector<uint8_t> img(set.image_bytes());
  for (const BatchPtr& b : batches) {
    ASSERT_EQ(b->images.size(), set.image_bytes() * 8);
    int longest = 0;
    for (int j = 0; j < b->size; ++j) longest = std::max(longest, b->lengths[j]);
    EXPECT_EQ(b->max_length, std::max(longest, 1));
    ASSERT_EQ(b->tokens.size(), static_cast<size_t>(b->size) * b->max_length);
    for (int j = 0; j < b->size; ++j) {
      ASSERT_TRUE(set.ReadImage(b->indices[j], img.data()).ok());
      EXPECT_TRUE(std::equal(img.begin(), img.end(), b->images.begin() + j * img.size()));
      EXPECT_EQ(b->keys[j], set.Key(b->indices[j]));
      auto t = set.Tokens(b->indices[j], b->caption[j]);
      ASSERT_EQ(b->lengths[j], static_cast<int32_t>(t.size()));
      for (int l = 0; l < b->max_length; ++l) {
        int32_t want = l < b->lengths[j] ? t[l] : set.info().pad_id;
        EXPECT_EQ(b->tokens[j * b->max_length + l], want);
      }
    }
  }
}

// The decode threads share each batch's rows: whatever the thread count and however
// many batches may be in flight, every batch is the one the reference functions describe:
// GlobalItem's order (padded, rank 1 of 2), LoadSampleImage's pixels (random-resized crop and
// flip of (seed, epoch, sample)), the sample's tokens padded to the batch's longest, its key.
TEST(Loader, EveryScheduleGivesTheReferenceBatches) {
  const ShardSet& set = *Coco();
  const int64_t n = set.num_samples();
  const int64_t epoch = 3;
  LoaderOptions o;
  o.batch_size = 7;
  o.seed = 9;
  o.rank = 1;
  o.world_size = 2;
  o.drop_last = false;
  o.crop = ImageCrop::kRandomResized;
  o.horizontal_flip = true;
  o.output_height = 24;
  o.output_width = 40;
  std::map<int64_t, std::vector<uint8_t>> pixels;  // sample -> LoadSampleImage's
  for (auto [threads, prefetch] : {std::pair{1, 1}, {2, 1}, {3, 2}, {8, 1}, {5, 9}}) {
    SCOPED_TRACE("num_threads " + std::to_string(threads) + " prefetch " +
                 std::to_string(prefetch));
    o.num_threads = threads;
    o.prefetch_batches = prefetch;
    auto loader = MakeLoader(o);
    ASSERT_TRUE(loader);
    loader->StartEpoch(epoch);
    auto got = Drain(*loader);
    ASSERT_EQ(static_cast<int64_t>(got.size()), (n + 13) / 14);
    for (size_t k = 0; k < got.size(); ++k) {
      const Batch& b = *got[k];
      EXPECT_EQ(b.step_in_epoch, static_cast<int64_t>(k));
      int longest = 1;
      for (int j = 0; j < b.size; ++j) longest = std::max(longest, b.lengths[j]);
      ASSERT_EQ(b.max_length, longest);
      const size_t image_bytes = 24 * 40 * 3;
      for (int j = 0; j < b.size; ++j) {
        const Item want = GlobalItem(set, o, epoch, (static_cast<int64_t>(k) * 14 + 7 + j) % n);
        ASSERT_EQ(b.indices[j], want.sample);
        ASSERT_EQ(b.caption[j], want.caption);
        EXPECT_EQ(b.keys[j], set.Key(want.sample));
        std::vector<uint8_t>& ref = pixels[want.sample];
        if (ref.empty()) {
          int h = 0, w = 0;
          ASSERT_TRUE(LoadSampleImage(set, o, epoch, want.sample, &ref, &h, &w).ok());
          ASSERT_EQ(ref.size(), image_bytes);
        }
        EXPECT_TRUE(std::equal(ref.begin(), ref.end(), b.images.begin() + j * image_bytes))
            << "batch " << k << " row " << j;
        const Span<const int32_t> t = set.Tokens(want.sample, want.caption);
        ASSERT_EQ(b.lengths[j], static_cast<int32_t>(t.size()));
        for (int l = 0; l < b.max_length; ++l) {
          EXPECT_EQ(b.tokens[j * b.max_length + l], l < b.lengths[j] ? t[l] : set.info().pad_id);
        }
      }
    }
  }
}

// num_threads 0 (the default) starts DefaultLoaderThreads(): one thread per CPU of this process's
// affinity mask, shared among the node's ranks when a launcher says how many there are and the
// process is not bound to a share of the machine.
TEST(LoaderDeathTest, DefaultThreadsAreTheCpusAvailableSharedAmongLocalRanks) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  const bool bound = cpus < sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EXIT(
      {
        unsetenv("LOCAL_WORLD_SIZE");
        unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        LoaderOptions o;
        auto loader = Loader::Create(Coco(), o);
        if (!loader.ok() || loader.value()->options().num_threads != std::min(cpus, 256)) _exit(1);
        if (DefaultLoaderThreads() != std::min(cpus, 256)) _exit(2);
        const int shared = bound ? cpus : std::max(1, cpus / 2);
        setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
        if (DefaultLoaderThreads() != std::min(shared, 256)) _exit(3);
        setenv("LOCAL_WORLD_SIZE", "1", 1);  // torchrun's, before mpirun's
        if (DefaultLoaderThreads() != std::min(cpus, 256)) _exit(4);
        setenv("LOCAL_WORLD_SIZE", "two", 1);  // not a count: ignored, mpirun's then
        if (DefaultLoaderThreads() != std::min(shared, 256)) _exit(5);
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Loader, AllCaptionsEnumeratesEveryPairOnce) {
  const ShardSet& set = *Coco();
  for (int world : {1, 2}) {
    std::set<std::pair<int64_t, int>> pairs;
    int64_t total = 0;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o;
      o.batch_size = 5;
      o.caption_mode = CaptionMode::kAllCaptions;
      o.drop_last = false;
      o.rank = rank;
      o.world_size = world;
      auto loader = MakeLoader(o);
      EXPECT_EQ(loader->items_per_epoch(), 255);
      for (const BatchPtr& b : Drain(*loader)) {
        for (int j = 0; j < b->size; ++j) {
          pairs.insert({b->indices[j], b->caption[j]});
          ++total;
        }
      }
    }
    EXPECT_EQ(pairs.size(), 255u);
    EXPECT_EQ(total, world == 1 ? 255 : 260);  // 2 ranks x 5: 26 global batches, 5 padded
    for (int64_t s = 0; s < set.num_samples(); ++s) {
      for (int c = 0; c < set.NumCaptions(s); ++c) EXPECT_TRUE(pairs.count({s, c}));
    }
  }
}

std::vector<int64_t> Indices(const std::vector<BatchPtr>& batches) {
  std::vector<int64_t> v;
  for (const auto& b : batches) v.insert(v.end(), b->indices.begin(), b->indices.end());
  return v;
}

TEST(Loader, ResumesMidEpochExactly) {
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 99;
  o.world_size = 2;
  o.rank = 1;
  o.drop_last = false;
  auto full = MakeLoader(o);
  full->StartEpoch(1);
  auto all = Indices(Drain(*full));

  auto first = MakeLoader(o);
  first->StartEpoch(1);
  std::vector<BatchPtr> head;
  for (int k = 0; k < 3; ++k) head.push_back(first->Next().value());
  std::string saved = first->state().ToJson();
  first.reset();  // the batches outlive their loader
  EXPECT_EQ(head[2]->indices.size(), 4u);

  auto state = LoaderState::FromJson(saved);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->epoch, 1);
  EXPECT_EQ(state->consumed, 3 * 8);
  EXPECT_EQ(state->seed, 99u);
  LoaderOptions other_seed = o;
  other_seed.seed = 5;  // the state's seed wins
  auto resumed = MakeLoader(other_seed);
  ASSERT_TRUE(resumed->Restore(state.value()).ok());
  auto rest = Indices(Drain(*resumed));
  auto joined = Indices(head);
  joined.insert(joined.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, all);
}

TEST_P(LoaderOrder, ResumesUnderAnotherWorldSizeInTheSameGlobalOrder) {
  const ShardSet& set = *Coco();
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 5;
  o.world_size = 2;
  o.drop_last = false;
  o.shuffle_mode = GetParam();
  o.shuffle_window = 2;
  // Two ranks take 3 global batches each: 24 items consumed.
  LoaderState saved;
  std::vector<int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    auto l = MakeLoader(o);
    for (int k = 0; k < 3; ++k) {
      auto b = l->Next().value();
      seen.insert(seen.end(), b->indices.begin(), b->indices.end());
    }
    saved = l->state();
  }
  EXPECT_EQ(saved.consumed, 24);
  // Three ranks continue from item 24 of the same global order.
  LoaderOptions o3 = o;
  o3.world_size = 3;
  std::map<int64_t, int> count;
  for (int64_t s : seen) ++count[s];
  for (int rank = 0; rank < 3; ++rank) {
    o3.rank = rank;
    auto l = MakeLoader(o3);
    ASSERT_TRUE(l->Restore(saved).ok());
    auto got = Drain(*l);
    EXPECT_EQ(got.size(), 3u);  // 27 items left, 12 per global batch, padded: 3 batches
    for (size_t k = 0; k < got.size(); ++k) {
      for (int j = 0; j < 4; ++j) {
        int64_t pos = 24 + static_cast<int64_t>(k) * 12 + rank * 4 + j;
        EXPECT_EQ(got[k]->indices[j], GlobalItem(set, o3, 0, pos % 51).sample);
        if (pos < 51) ++count[got[k]->indices[j]];
      }
    }
  }
  // Before and after the change of world size, every sample exactly once.
  EXPECT_EQ(count.size(), 51u);
  for (auto& [s, c] : count) EXPECT_EQ(c, 1) << s;
}

// Exact evaluation: drop_last false with even_batches false hands out each
// of the 51 samples exactly once over all ranks, no wrap-around padding; rank r's last batch
// holds min(B, max(0, rem - r * B)) rows (rem = 51 mod G), and a rank past rem gets one batch
// fewer, as batches_per_epoch says. With even_batches (the default) 2 ranks of 32 would give 64.
TEST_P(LoaderOrder, UnevenBatchesHandOutEverySampleOnceAcrossRanks) {
  const ShardSet& set = *Coco();
  const int64_t n = set.num_samples();  // 51
  ASSERT_EQ(n, 51);
  for (int world : {1, 2, 3}) {
    for (int B : {4, 16, 32}) {
      SCOPED_TRACE("world " + std::to_string(world) + " batch " + std::to_string(B));
      const int64_t G = int64_t{world} * B, rem = n % G;
      std::map<int64_t, int> count;
      int64_t items = 0;
      for (int rank = 0; rank < world; ++rank) {
        LoaderOptions o;
        o.batch_size = B;
        o.seed = 3;
        o.rank = rank;
        o.world_size = world;
        o.drop_last = false;
        o.even_batches = false;
        o.num_threads = 2;
        o.shuffle_mode = GetParam();
        o.shuffle_window = 2;
        auto loader = MakeLoader(o);
        ASSERT_TRUE(loader);
        loader->StartEpoch(1);
        auto got = Drain(*loader);
        const int64_t full = n / G;
        const int64_t last =
            rem == 0 ? 0 : std::min<int64_t>(B, std::max<int64_t>(0, rem - rank * B));
        ASSERT_EQ(static_cast<int64_t>(got.size()), full + (last > 0 ? 1 : 0));
        EXPECT_EQ(static_cast<int64_t>(got.size()), loader->batches_per_epoch());
        for (size_t k = 0; k < got.size(); ++k) {
          const Batch& b = *got[k];
          ASSERT_EQ(b.size, static_cast<int64_t>(k) < full ? B : last);
          ASSERT_EQ(b.indices.size(), static_cast<size_t>(b.size));
          ASSERT_EQ(b.images.size(), static_cast<size_t>(b.size) * b.height * b.width * 3);
          ASSERT_EQ(b.tokens.size(), static_cast<size_t>(b.size) * b.max_length);
          EXPECT_EQ(b.step_in_epoch, static_cast<int64_t>(k));
          for (int j = 0; j < b.size; ++j) {
            const int64_t pos = static_cast<int64_t>(k) * G + rank * B + j;
            ASSERT_LT(pos, n);
            EXPECT_EQ(b.indices[j], GlobalItem(set, o, 1, pos).sample);
            EXPECT_EQ(b.set_index[j], 0);  // a single set
            ++count[b.indices[j]];
          }
          items += b.size;
        }
      }
      EXPECT_EQ(items, n);                               // no padding
      EXPECT_EQ(static_cast<int64_t>(count.size()), n);  // 51 distinct samples
      for (auto& [s, c] : count) EXPECT_EQ(c, 1) << "sample " << s;
    }
  }
}

// Saved mid-epoch by 2 ranks of 8 under even_batches false, restored by 3 ranks of 4: the rest
// of the same global order, each of the 51 samples still exactly once, and the state after a
// rank's last batch restores to an empty rest.
TEST(Loader, UnevenBatchesResumeUnderAnotherWorldSizeExactly) {
  const ShardSet& set = *Coco();
  LoaderOptions o;
  o.batch_size = 8;
  o.seed = 9;
  o.world_size = 2;
  o.drop_last = false;
  o.even_batches = false;
  std::map<int64_t, int> count;
  LoaderState saved;
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    auto l = MakeLoader(o);
    for (int k = 0; k < 2; ++k) {
      auto b = l->Next().value();
      for (int64_t s : b->indices) ++count[s];
    }
    saved = l->state();
  }
  EXPECT_EQ(saved.consumed, 32);
  LoaderOptions o3 = o;
  o3.world_size = 3;
  o3.batch_size = 4;
  const std::vector<size_t> want_sizes[3] = {{4, 4}, {4, 3}, {4}};  // 19 left: 12, then 4+3+0
  for (int rank = 0; rank < 3; ++rank) {
    o3.rank = rank;
    auto l = MakeLoader(o3);
    ASSERT_TRUE(l->Restore(saved).ok());
    auto got = Drain(*l);
    std::vector<size_t> sizes;
    for (size_t k = 0; k < got.size(); ++k) {
      sizes.push_back(static_cast<size_t>(got[k]->size));
      for (int j = 0; j < got[k]->size; ++j) {
        const int64_t pos = 32 + static_cast<int64_t>(k) * 12 + rank * 4 + j;
        EXPECT_EQ(got[k]->indices[j], GlobalItem(set, o3, 0, pos).sample);
        ++count[got[k]->indices[j]];
      }
    }
    EXPECT_EQ(sizes, want_sizes[rank]) << "rank " << rank;
    // After its last batch the rank's state counts the global batches it took part in.
    EXPECT_EQ(l->state().consumed, rank == 2 ? 44 : 51);
  }
  EXPECT_EQ(count.size(), 51u);
  for (auto& [s, c] : count) EXPECT_EQ(c, 1) << s;
}

TEST(Loader, RestoreRefusesStatePastTheEpoch) {
  LoaderOptions o;
  auto l = MakeLoader(o);
  LoaderState s;
  s.consumed = 52;
  EXPECT_EQ(l->Restore(s).code(), StatusCode::kInvalidArgument);
  s.consumed = 51;
  ASSERT_TRUE(l->Restore(s).ok());
  auto r = l->Next();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), nullptr);  // nothing left in this epoch
  EXPECT_FALSE(LoaderState::FromJson("{\"epoch\": 1}").ok());
  EXPECT_FALSE(LoaderState::FromJson("not json").ok());
}

TEST(Loader, CreateRefusesBadOptions) {
  auto bad = [](LoaderOptions o) { return Loader::Create(Coco(), o).status().code(); };
  LoaderOptions o;
  o.batch_size = 0;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o = {};
  o.rank = 2;
  o.world_size = 2;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o = {};
  o.batch_size = 30;
  o.world_size = 2;  // 60 > 51 items with drop_last
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o.drop_last = false;
  EXPECT_TRUE(Loader::Create(Coco(), o).ok());
  o = {};
  o.even_batches = false;  // with drop_last: nothing left to hand out unpadded
  auto uneven = Loader::Create(Coco(), o);
  EXPECT_EQ(uneven.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(uneven.status().message().find("drop_last=false"), std::string::npos);
  o.drop_last = false;
  EXPECT_TRUE(Loader::Create(Coco(), o).ok());
  o = {};
  o.num_threads = 3000;  // mmtrain --threads 3000: refused before any thread starts
  auto r = Loader::Create(Coco(), o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("num_threads 3000 outside [1, 256]"), std::string::npos)
      << r.status().ToString();
  o.num_threads = -1;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o.num_threads = kMaxLoaderThreads;
  EXPECT_TRUE(Loader::Create(Coco(), o).ok());
  o = {};
  o.prefetch_batches = 1 << 30;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o = {};
  o.output_height = 224;  // width missing
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o.output_width = kMaxOutputSide + 1;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o = {};
  o.center_crop_ratio = 0.0;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
  o.prefetch_batches = 0;
  EXPECT_EQ(bad(o), StatusCode::kInvalidArgument);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MM_SANITIZED 1
#endif
#endif

// Bytes of address space this process has mapped (VmSize), or -1.
int64_t MappedBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "VmSize: %lld kB", &kb) == 1) return kb * 1024;
  }
  return -1;
}

// A thread the system refuses is an error from Create, not an abort. In a
// child process whose address space is capped 256 MiB above what it maps, the 8 MiB stacks of
// 200 decode threads cannot all be had: std::thread throws std::system_error (EAGAIN). The
// real limit is used, not a mock. Before the fix the exception escaped the constructor with
// joinable threads alive and std::terminate aborted the process.
TEST(LoaderDeathTest, RefusedThreadIsAnErrorNotAnAbort) {
#ifdef MM_SANITIZED
  GTEST_SKIP() << "a sanitizer's shadow memory does not fit under RLIMIT_AS";
#endif
  std::shared_ptr<const ShardSet> set = Coco();
  ASSERT_TRUE(set);
  ASSERT_GT(MappedBytes(), 0);
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        rlimit cap{};
        cap.rlim_cur = cap.rlim_max = static_cast<rlim_t>(MappedBytes() + (int64_t{256} << 20));
        if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(10);
        LoaderOptions o;
        o.num_threads = 200;
        auto r = Loader::Create(set, o);
        if (r.ok()) _exit(11);  // every thread started: the cap did not bite
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        _exit(r.status().code() == StatusCode::kIOError ? 0 : 12);
      },
      ::testing::ExitedWithCode(0),
      "IOError: loader: the system refused decode thread [0-9]+ of 200");
}

TEST(Loader, AugmentationIsSeededPerSeedEpochSample) {
  const ShardSet& set = *Coco();
  LoaderOptions o;
  o.batch_size = 17;
  o.shuffle = false;
  o.horizontal_flip = true;
  auto a = Drain(*MakeLoader(o));
  auto b = Drain(*MakeLoader(o));
  ASSERT_EQ(a.size(), 3u);
  const int W = set.info().image_width, H = set.info().image_height;
  std::vector<uint8_t> img(set.image_bytes());
  int flipped = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k]->images, b[k]->images);
    for (int j = 0; j < a[k]->size; ++j) {
      ASSERT_TRUE(set.ReadImage(a[k]->indices[j], img.data()).ok());
      const uint8_t* got = a[k]->images.data() + j * img.size();
      bool same = std::equal(img.begin(), img.end(), got);
      bool mirror = true;
      for (int y = 0; y < H && mirror; ++y)
        for (int x = 0; x < W && mirror; ++x)
          mirror = std::equal(got + (y * W + x) * 3, got + (y * W + x) * 3 + 3,
                              img.data() + (y * W + (W - 1 - x)) * 3);
      EXPECT_TRUE(same || mirror);
      flipped += !same;
    }
  }
  EXPECT_GT(flipped, 10);
  EXPECT_LT(flipped, 41);
  o.crop = ImageCrop::kRandomResized;
  auto c = Drain(*MakeLoader(o));
  auto d = Drain(*MakeLoader(o));
  EXPECT_EQ(c[1]->images, d[1]->images);
  EXPECT_NE(c[1]->images, a[1]->images);
  o.num_threads = 1;  // another thread count: the same pixels
  auto e = Drain(*MakeLoader(o));
  EXPECT_EQ(c[1]->images, e[1]->images);
}

// Random-resized crops and flips depend on (seed, epoch, sample) only: a loader restored
// mid-epoch hands out the pixels the uninterrupted one did, and another epoch other pixels.
TEST(Loader, ResumesExactlyWithAugmentation) {
  LoaderOptions o;
  o.batch_size = 5;
  o.seed = 7;
  o.crop = ImageCrop::kRandomResized;
  o.horizontal_flip = true;
  o.output_height = 48;
  o.output_width = 64;
  auto full = MakeLoader(o);
  full->StartEpoch(2);
  auto all = Drain(*full);
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(all[0]->height, 48);
  EXPECT_EQ(all[0]->width, 64);
  EXPECT_EQ(all[0]->images.size(), 5u * 48 * 64 * 3);
  auto first = MakeLoader(o);
  first->StartEpoch(2);
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(first->Next().ok());
  const LoaderState saved = first->state();
  first.reset();
  auto resumed = MakeLoader(o);
  ASSERT_TRUE(resumed->Restore(saved).ok());
  auto rest = Drain(*resumed);
  ASSERT_EQ(rest.size(), 6u);
  for (size_t k = 0; k < rest.size(); ++k) {
    EXPECT_EQ(rest[k]->indices, all[k + 4]->indices);
    EXPECT_EQ(rest[k]->images, all[k + 4]->images) << "batch " << k + 4;
  }
  auto other = MakeLoader(o);
  other->StartEpoch(3);
  auto next_epoch = Drain(*other);
  // The same sample in another epoch: another window (the set has 51 samples, batches of 5).
  int same = 0, compared = 0;
  for (const auto& b2 : all) {
    for (const auto& b3 : next_epoch) {
      for (int j = 0; j < b2->size; ++j) {
        for (int m = 0; m < b3->size; ++m) {
          if (b2->indices[j] != b3->indices[m]) continue;
          const size_t n = 48 * 64 * 3;
          ++compared;
          same += std::equal(b2->images.begin() + j * n, b2->images.begin() + (j + 1) * n,
                             b3->images.begin() + m * n);
        }
      }
    }
  }
  EXPECT_GT(compared, 20);
  EXPECT_LE(same, 2);  // a window and flip drawn twice: rare, not impossible
}

// The centre crop at the stored size and ratio 1 is the stored image; at another output size
// it is the stored image resized (the raw path's default bilinear, identical on every call).
TEST(Loader, CenterCropAndOutputSize) {
  const ShardSet& set = *Coco();
  LoaderOptions o;
  o.batch_size = 3;
  o.shuffle = false;
  o.crop = ImageCrop::kCenter;
  o.center_crop_ratio = 1.0;
  auto a = MakeLoader(o)->Next().value();
  std::vector<uint8_t> img(set.image_bytes());
  ASSERT_TRUE(set.ReadImage(a->indices[1], img.data()).ok());
  EXPECT_TRUE(std::equal(img.begin(), img.end(), a->images.begin() + img.size()));
  o.center_crop_ratio = 0.5;
  o.output_height = o.output_width = 32;
  auto b = MakeLoader(o)->Next().value();
  EXPECT_EQ(b->images.size(), 3u * 32 * 32 * 3);
  EXPECT_EQ(b->images, MakeLoader(o)->Next().value()->images);
}

// Issue 27 item 6: the default resize filter is bilinear (torchvision's RandomResizedCrop);
// Lanczos-3 is there on request and gives other pixels.
TEST(Loader, DefaultFilterIsBilinearAndLanczosIsOnRequest) {
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  o.crop = ImageCrop::kRandomResized;
  o.output_height = o.output_width = 40;
  auto by_default = MakeLoader(o)->Next().value();
  o.interpolation = Interpolation::kBilinear;
  auto bilinear = MakeLoader(o)->Next().value();
  o.interpolation = Interpolation::kLanczos;
  auto lanczos = MakeLoader(o)->Next().value();
  EXPECT_EQ(by_default->images, bilinear->images);
  EXPECT_NE(by_default->images, lanczos->images);
}

TEST(Loader, WorkerErrorsReachNextNamingShardAndSample) {
  mm::testing::TempDir tmp;
  FixtureOptions fo;
  fo.samples_per_shard = 20;
  mm::testing::CopySet(CocoSet(fo), tmp.path());
  // Break every chunk's zstd magic in shard 1 (positions from the mapping).
  {
    std::string path = tmp / "shard-000001.h5";
    std::string bytes = mm::testing::ReadFile(path);
    const char magic[4] = {'\x28', '\xb5', '\x2f', '\xfd'};
    for (size_t p = bytes.find(std::string(magic, 4)); p != std::string::npos;
         p = bytes.find(std::string(magic, 4), p + 1)) {
      bytes[p] = 0;
    }
    mm::testing::WriteFile(path, bytes);
    mm::testing::RefreshIndexEntry(tmp.path(), 1);
  }
  auto set = ShardSet::Open(tmp.path());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  o.prefetch_batches = 2;
  auto loader = MakeLoader(o, set.value());
  int ok = 0;
  Status error;
  for (int k = 0; k < 12; ++k) {
    auto r = loader->Next();
    if (!r.ok()) {
      error = r.status();
      break;
    }
    ++ok;
  }
  EXPECT_EQ(ok, 5);  // samples 0..19 are fine; batch 5 starts at sample 20 = shard 1 sample 0
  ASSERT_TRUE(error.IsCorruption()) << error.ToString();
  EXPECT_NE(error.message().find("shard-000001.h5 sample 0"), std::string::npos)
      << error.ToString();
  loader.reset();  // shuts down with work in flight, no hang
}

TEST(Loader, ConsumerHoldingEveryBatchNeverHangs) {
  LoaderOptions o;
  o.batch_size = 2;
  o.prefetch_batches = 1;
  o.num_threads = 2;
  auto loader = MakeLoader(o);
  auto all = Drain(*loader);  // holds 25 batches with a pool of 1
  EXPECT_EQ(all.size(), 25u);
  loader->StartEpoch(1);
  auto first = loader->Next();
  ASSERT_TRUE(first.ok());
  loader.reset();
  all.clear();
  EXPECT_EQ(first.value()->epoch, 1);
}

}  // namespace
}  // namespace mm::reader
