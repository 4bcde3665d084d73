// Tests of curate/: the filters' rules, the perceptual hash (against duplicates made from a
// real photo), the duplicate index's first-kept order, and the build statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "curate/dedup.h"
#include "curate/filters.h"
#include "curate/stats.h"
#include "image/image_pipeline.h"
#include "ingest/ingest.h"
#include "mm/internal/file.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

TEST(Filters, ParsesMinScore) {
  FilterOptions o;
  ASSERT_TRUE(ParseMinScore("clip_score=0.28", &o).ok());
  EXPECT_EQ(o.min_score_field, "clip_score");
  EXPECT_DOUBLE_EQ(o.min_score, 0.28);
  EXPECT_FALSE(ParseMinScore("clip_score", &o).ok());
  EXPECT_FALSE(ParseMinScore("=3", &o).ok());
  EXPECT_FALSE(ParseMinScore("a=b", &o).ok());
  EXPECT_FALSE(ParseMinScore("a=", &o).ok());
}

TEST(Filters, SourceSizeAndAspect) {
  FilterOptions o;
  std::string why;
  EXPECT_EQ(CheckSourceSize(10, 10, o, &why), nullptr);  // off
  o.min_size = 256;
  EXPECT_STREQ(CheckSourceSize(640, 255, o, &why), "image_too_small");
  EXPECT_EQ(CheckSourceSize(640, 256, o, &why), nullptr);
  o.max_aspect = 2.0;
  EXPECT_STREQ(CheckSourceSize(1025, 512, o, &why), "aspect_ratio_too_large");
  EXPECT_EQ(CheckSourceSize(1024, 512, o, &why), nullptr);
  EXPECT_STREQ(CheckSourceSize(300, 700, o, &why), "aspect_ratio_too_large");
}

TEST(Filters, CaptionLength) {
  FilterOptions o;
  EXPECT_EQ(CheckCaptionLength(1, true, o), nullptr);
  o.min_tokens = 3;
  o.drop_long_captions = true;
  EXPECT_STREQ(CheckCaptionLength(2, false, o), "too_few_tokens");
  EXPECT_EQ(CheckCaptionLength(3, false, o), nullptr);
  EXPECT_STREQ(CheckCaptionLength(90, true, o), "caption_too_long");
}

TEST(Filters, ScoreKeepsOrderAndNamesReasons) {
  FilterOptions o;
  o.min_score_field = "s";
  o.min_score = 0.5;
  std::vector<RawSample> samples(4);
  const char* values[] = {"0.9", "0.1", "", "0.5"};
  for (int i = 0; i < 4; ++i) {
    samples[i].key = "k" + std::to_string(i);
    samples[i].fields.push_back(FieldValue::FromText(values[i]));
  }
  std::vector<RawSample> kept;
  std::vector<IngestIssue> dropped;
  for (const RawSample& s : samples) {
    IngestIssue issue;
    if (DropsForScore(o, 0, s, &issue)) {
      dropped.push_back(issue);
    } else {
      kept.push_back(s);
    }
  }
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].key, "k0");
  EXPECT_EQ(kept[1].key, "k3");
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0].reason, "score_below_min");
  EXPECT_EQ(dropped[1].reason, "score_missing");
}

// The stored pixels of a real COCO photo at 224x224 (center-crop), from `bytes`.
std::vector<uint8_t> Fit(const std::string& bytes) {
  ImageOptions options;
  ProcessedImage image;
  ImageFailure failure;
  EXPECT_TRUE(ProcessImage(bytes, options, &image, &failure)) << failure.detail;
  return image.pixels;
}

TEST(Dedup, PerceptualHashSeparatesPhotosAndToleratesShifts) {
  const auto dir = DataDir() / "coco-cc" / "images";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 20u);
  std::vector<uint64_t> hashes;
  for (size_t i = 0; i < 20; ++i) {
    std::string bytes;
    ASSERT_TRUE(ReadRegularFile(files[i], &bytes).ok());
    auto px = Fit(bytes);
    hashes.push_back(PerceptualHash(px.data(), 224, 224));
    // The same pixels shifted right by 3 columns (a small crop) stay within the threshold.
    std::vector<uint8_t> shifted(px.size());
    for (int y = 0; y < 224; ++y) {
      for (int x = 0; x < 224; ++x) {
        const int sx = std::max(0, x - 3);
        for (int c = 0; c < 3; ++c) shifted[(y * 224 + x) * 3 + c] = px[(y * 224 + sx) * 3 + c];
      }
    }
    EXPECT_LE(HammingDistance(hashes.back(), PerceptualHash(shifted.data(), 224, 224)),
              kDefaultNearThreshold)
        << files[i];
  }
  for (size_t i = 0; i < hashes.size(); ++i) {
    for (size_t j = i + 1; j < hashes.size(); ++j) {
      EXPECT_GT(HammingDistance(hashes[i], hashes[j]), kDefaultNearThreshold)
          << files[i] << " vs " << files[j];
    }
  }
}

TEST(Dedup, IndexKeepsFirst) {
  DuplicateIndex exact_only(-1);
  bool exact = false;
  EXPECT_EQ(exact_only.Find(1, 0xFF, &exact), -1);
  exact_only.Add(1, 0xFF);
  exact_only.Add(2, 0xFE);
  EXPECT_EQ(exact_only.Find(1, 0, &exact), 0);
  EXPECT_TRUE(exact);
  EXPECT_EQ(exact_only.Find(3, 0xFF, &exact), -1);  // near is off
  DuplicateIndex near(2);
  near.Add(10, 0b1111);
  near.Add(11, 0b0111);
  EXPECT_EQ(near.Find(12, 0b0011, &exact), 0);  // 2 bits from the first kept, 1 from the second
  EXPECT_FALSE(exact);
  EXPECT_EQ(near.Find(12, 0xF0F0, &exact), -1);
}

TEST(Stats, CountsAndHistograms) {
  SetStats s;
  s.AddCaption(10, 1, "h\xC3\xA9llo");  // 5 characters, 6 bytes
  s.AddCaption(20, 0, "abc");
  s.AddSample(2, 640, 480);
  const auto j = s.ToJson();
  EXPECT_EQ(j["samples"], 1);
  EXPECT_EQ(j["captions"], 2);
  EXPECT_DOUBLE_EQ(j["unk_rate"].get<double>(), 1.0 / 30);
  EXPECT_EQ(j["caption_chars"]["min"], 3);
  EXPECT_EQ(j["caption_chars"]["max"], 5);
  int64_t total = 0;
  for (const auto& bin : j["caption_tokens"]["histogram"]) total += bin["count"].get<int64_t>();
  EXPECT_EQ(total, 2);
  // Counted to 1/10000 (SetStats::Counts): 1.3333.
  EXPECT_NEAR(j["source_aspect"]["max"].get<double>(), 640.0 / 480, 0.5e-4);
}

// The figures come from counts of distinct values: p50/p95 are the values a sorted vector would
// give at rank floor(q * (n - 1)), and memory follows the distinct values, not the samples.
TEST(Stats, PercentilesFromCountsAreThoseOfTheSortedValues) {
  SetStats s;
  std::vector<int> tokens;
  for (int i = 0; i < 1000; ++i) {
    const int t = (i * 37) % 61 + 3;
    tokens.push_back(t);
    s.AddCaption(static_cast<size_t>(t), 0, "x");
  }
  std::sort(tokens.begin(), tokens.end());
  const auto j = s.ToJson()["caption_tokens"];
  EXPECT_EQ(j["count"], 1000);
  EXPECT_EQ(j["min"], tokens.front());
  EXPECT_EQ(j["max"], tokens.back());
  EXPECT_EQ(j["p50"], tokens[static_cast<size_t>(0.5 * 999)]);
  EXPECT_EQ(j["p95"], tokens[static_cast<size_t>(0.95 * 999)]);
  double sum = 0;
  for (int t : tokens) sum += t;
  EXPECT_DOUBLE_EQ(j["mean"].get<double>(), std::round(sum / 1000 * 1000) / 1000);
}

// A checkpoint's Tail, appended to the SetStats of the checkpoint before, gives the same figures
// (what `mmpack build --resume` relies on for identical report.json bytes); a damaged tail is
// refused whole.
TEST(Stats, TailAppendedGivesTheSameFigures) {
  SetStats whole, resumed;
  auto add = [](SetStats* s, int i) {
    s->AddCaption(static_cast<size_t>(i % 7 + 2), static_cast<size_t>(i % 3), "caption");
    s->AddSample(1, 300 + i, 200 + (i % 5));
    s->AddStoredImage(256, 171 + (i % 3), static_cast<size_t>(18000 + i));
  };
  for (int i = 0; i < 50; ++i) {
    add(&whole, i);
    add(&resumed, i);
  }
  const SetStats::Mark mark = whole.Position();
  for (int i = 50; i < 120; ++i) add(&whole, i);
  const nlohmann::json tail = whole.Tail(mark);
  nlohmann::json broken = tail;
  broken["stored_bytes"].erase(0);  // one figure counts fewer samples than the others
  EXPECT_FALSE(resumed.AppendTail(broken));
  EXPECT_TRUE(resumed.AppendTail(tail));
  EXPECT_EQ(resumed.ToJson().dump(), whole.ToJson().dump());
}

}  // namespace
}  // namespace mm::pack
