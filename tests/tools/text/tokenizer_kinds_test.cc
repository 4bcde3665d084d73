// Tests of the tokenizer kinds behind text/tokenizer.h (clip_bpe.h, tokenizer_json.h), of the
// pieces they share (bpe.h, clean_text.h) and of the training sample (tokenizer_sample.h).
// Id-for-id agreement with the reference implementations on real and hostile captions is
// tests/e2e/tokenizers/reference_test.py.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "pack_test_util.h"
#include "text/bpe.h"
#include "text/clean_text.h"
#include "text/clip_bpe.h"
#include "text/mojibake.h"
#include "text/tokenizer.h"
#include "text/tokenizer_json.h"
#include "text/tokenizer_sample.h"
#include "text/unicode_text.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

fs::path TokenizerData() { return fs::path(MM_SOURCE_DIR) / "tests" / "data" / "tokenizers"; }
std::string ClipVocab() { return (TokenizerData() / "bpe_simple_vocab_16e6.txt.gz").string(); }
std::string BertWiki() { return (TokenizerData() / "bert-wiki.json").string(); }

TEST(TokenizerKinds, FileContentChoosesTheKind) {
  auto clip = Tokenizer::FromFile(ClipVocab());
  ASSERT_TRUE(clip.ok()) << clip.status().ToString();
  EXPECT_EQ((*clip)->kind(), format::TokenizerKind::kClipBpe);
  EXPECT_EQ((*clip)->vocab_size(), 49408);
  EXPECT_EQ((*clip)->bos_id(), 49406);
  EXPECT_EQ((*clip)->eos_id(), 49407);
  EXPECT_EQ((*clip)->pad_id(), 0);
  EXPECT_EQ((*clip)->file_name(), "bpe_simple_vocab.txt.gz");

  auto bert = Tokenizer::FromFile(BertWiki());
  ASSERT_TRUE(bert.ok()) << bert.status().ToString();
  EXPECT_EQ((*bert)->kind(), format::TokenizerKind::kTokenizerJson);
  EXPECT_EQ((*bert)->vocab_size(), 30522);
  EXPECT_EQ((*bert)->bos_id(), 1);  // [CLS]
  EXPECT_EQ((*bert)->eos_id(), 2);  // [SEP]
  EXPECT_EQ((*bert)->unk_id(), 0);  // [UNK]
  EXPECT_EQ((*bert)->pad_id(), 3);  // [PAD]
  EXPECT_EQ((*bert)->file_name(), "tokenizer.json");

  auto sp = Tokenizer::FromFile(AlbertModel());
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_EQ((*sp)->kind(), format::TokenizerKind::kSentencePiece);
  EXPECT_EQ((*sp)->file_name(), "tokenizer.model");
}

TEST(TokenizerKinds, RefusesWhatIsNoTokenizerWithOneLine) {
  auto plain = Tokenizer::FromSerialized("#version: 0.2\na b\n");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("gzip"), std::string::npos) << plain.status().ToString();

  auto junk = Tokenizer::FromSerialized("\x01\x02 not a model");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(junk.status().message().find("not a tokenizer"), std::string::npos);

  const std::string gz = ReadBytes(ClipVocab());
  auto cut = Tokenizer::FromSerialized(gz.substr(0, gz.size() / 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("gzip"), std::string::npos) << cut.status().ToString();

  auto unigram = Tokenizer::FromSerialized(
      R"({"model": {"type": "Unigram", "vocab": {"a": 0}}, "normalizer": null})");
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(unigram.status().message().find("Unigram"), std::string::npos);

  auto bad_merge = Tokenizer::FromSerialized(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})");
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("a b"), std::string::npos);
}

TEST(ClipBpe, CutsToContextKeepingEndOfTextLast) {
  auto tok = Tokenizer::FromFile(ClipVocab());
  ASSERT_TRUE(tok.ok());
  std::string caption;
  for (int i = 0; i < 100; ++i) caption += "word" + std::to_string(i) + " ";
  auto t = (*tok)->Encode(caption, 77);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->ids.size(), 77u);
  EXPECT_TRUE(t->truncated);
  EXPECT_EQ(t->ids.front(), 49406);
  EXPECT_EQ(t->ids.back(), 49407);
  EXPECT_GT(t->pieces, 75);
  EXPECT_EQ(t->unk, 0);  // byte-level: nothing is unknown
  auto empty = (*tok)->Encode("", 77);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ids, (std::vector<int32_t>{49406, 49407}));
}

// GPT-2's and CLIP's bpe(): the lowest-rank pair, every occurrence left to right, again.
std::vector<int32_t> NaiveBpe(
    std::vector<int32_t> w,
    const std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>>& merges) {
  while (w.size() > 1) {
    int32_t best = INT32_MAX;
    std::pair<int32_t, int32_t> pair;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = merges.find({w[i], w[i + 1]});
      if (it != merges.end() && it->second.first < best) {
        best = it->second.first;
        pair = it->first;
      }
    }
    if (best == INT32_MAX) break;
    std::vector<int32_t> out;
    for (size_t i = 0; i < w.size(); ++i) {
      if (i + 1 < w.size() && w[i] == pair.first && w[i + 1] == pair.second) {
        out.push_back(merges.at(pair).second);
        ++i;
      } else {
        out.push_back(w[i]);
      }
    }
    w = out;
  }
  return w;
}

TEST(BpeMerges, HeapMergingEqualsTheGreedyLoopOfGpt2) {
  // Symbols 0..3; merges build 4..9 from them, ranks in order, with repeats and overlaps.
  const std::vector<std::array<int32_t, 3>> list = {{0, 0, 4}, {4, 0, 5}, {1, 2, 6}, {4, 4, 7},
                                                    {6, 3, 8}, {0, 1, 9}, {5, 6, 10}};
  BpeMerges merges;
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> naive;
  for (size_t r = 0; r < list.size(); ++r) {
    merges.Add(list[r][0], list[r][1], list[r][2], static_cast<int32_t>(r));
    naive[{list[r][0], list[r][1]}] = {static_cast<int32_t>(r), list[r][2]};
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> word(1 + rng() % 24);
    for (int32_t& s : word) s = static_cast<int32_t>(rng() % 4);
    std::vector<int32_t> heap = word;
    merges.Apply(&heap);
    ASSERT_EQ(heap, NaiveBpe(word, naive)) << "trial " << trial;
  }
}

TEST(ClipBpe, LongWordOfOneLetterIsMergedWhole) {
  auto tok = ClipBpeTokenizer::FromSerialized(ReadBytes(ClipVocab()));
  ASSERT_TRUE(tok.ok());
  // 60,000 letters: one pre-tokenizer word; merged in O(n log n) (a rescanning loop would
  // take minutes).
  auto ids = (*tok)->EncodePieces(std::string(60000, 'a'));
  ASSERT_TRUE(ids.ok());
  EXPECT_GT(ids->size(), 1000u);
  EXPECT_LT(ids->size(), 60000u);
}

TEST(CleanText, HtmlUnescapeIsPythons) {
  const std::pair<const char*, const char*> cases[] = {
      {"&amp;lt;", "&lt;"}, {"&notit;", "\u00acit;"}, {"&#x110000;", "\ufffd"},
      {"&#0;", "\ufffd"},   {"&#128;", "\u20ac"},     {"&#1;", ""},
      {"&ampx", "&x"},      {"&#xD800;", "\ufffd"},   {"&copy2024", "\u00a92024"},
      {"&#65", "A"},        {"&#x41g", "Ag"},         {"&#;", "&#;"},
      {"&#x;", "&#x;"},     {"& amp;", "& amp;"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(EncodeUtf8(HtmlUnescape(DecodeUtf8(in))), want) << in;
  }
}

TEST(CleanText, ClipCleaningFixesQuotesWidthLigaturesAndSpace) {
  auto t =
      ClipCleanText("  Don\u2019t \uff2c\uff2f\uff35\uff24 \ufb01sh &amp;amp; \x1b[31mred\t\t ok ");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(EncodeUtf8(*t), "don't loud fish & red ok");
}

TEST(CaptionReservoir, KeepsEveryCaptionWhenFewerThanItsSize) {
  CaptionReservoir r(10);
  for (int i = 0; i < 7; ++i) r.Add("c" + std::to_string(i));
  const auto kept = r.Take();
  ASSERT_EQ(kept.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(kept[i], "c" + std::to_string(i));
}

TEST(CaptionReservoir, SampleIsBoundedDeterministicInStreamOrderAndUniform) {
  auto draw = [](int n, int keep) {
    CaptionReservoir r(keep);
    for (int i = 0; i < n; ++i) r.Add(std::to_string(i));
    return r.Take();
  };
  const auto a = draw(100000, 1000), b = draw(100000, 1000);
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_EQ(a, b);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LT(std::stoi(a[i - 1]), std::stoi(a[i]));
  // Uniform over the stream: each tenth of it holds about a tenth of the sample
  // (binomial(1000, 0.1): 100 +- 9.5; 60 and 140 are beyond 4 standard deviations).
  int tenths[10] = {};
  for (const auto& s : a) ++tenths[std::stoi(s) / 10000];
  for (int t : tenths) {
    EXPECT_GT(t, 60);
    EXPECT_LT(t, 140);
  }
}

}  // namespace
}  // namespace mm::pack

namespace mm::pack {
namespace {

TEST(Mojibake, FixEncodingIsFtfys) {
  // Expected values: ftfy 6.3.1's fix_encoding (tests/data/tokenizers/reference/ftfy).
  const std::pair<const char*, const char*> cases[] = {
      {"caf\u00c3\u00a9", "caf\u00e9"},
      {"mixed: caf\u00e9 and caf\u00c3\u00a9 in one line",
       "mixed: caf\u00e9 and caf\u00e9 in one line"},
      {"it\u00e2\u20ac\u2122s \u00c3\u00a9t\u00c3\u00a9", "it\u2019s \u00e9t\u00e9"},
      {"voil\u00c3\u00a0 le travail", "voil\u00e0 le travail"},
      {"caf\u251c\u00ae", "caf\u251c\u00ae"},
  };
  for (const auto& [in, want] : cases) {
    auto fixed = FixEncoding(DecodeUtf8(in));
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    EXPECT_EQ(EncodeUtf8(*fixed), want) << in;
  }
}

}  // namespace
}  // namespace mm::pack
