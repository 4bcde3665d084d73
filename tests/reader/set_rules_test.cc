// The set rules (mm/internal/set_rules.h): checked by ShardSet::Open on real shards, naming the
// shard, sample and caption; and the functions themselves on tables held in vectors, as
// `mmpack verify` calls them.
#include "mm/internal/set_rules.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSamples;
using mm::testing::CocoSet;
using mm::testing::FixtureOptions;
using mm::testing::ReadFile;
using mm::testing::TempDir;
using mm::testing::WriteFile;

Status OpenStatus(const std::string& dir) { return ShardSet::Open(dir).status(); }

void ExpectCorruption(const Status& st, const std::string& what) {
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find(what), std::string::npos) << st.ToString();
}

// The first (sample, caption, position, id) of coco-cc's fake tokens with id >= vocab.
std::string FirstIdOutside(int vocab, int per_shard) {
  const auto& samples = CocoSamples();
  for (size_t s = 0; s < samples.size(); ++s) {
    for (size_t c = 0; c < samples[s].tokens.size(); ++c) {
      const auto& row = samples[s].tokens[c];
      for (size_t k = 0; k < row.size(); ++k) {
        if (row[k] >= vocab) {
          char buf[160];
          std::snprintf(buf, sizeof(buf),
                        "shard-%06zu.h5 sample %zu caption %zu: token id %d at position %zu "
                        "outside the vocabulary [0, %d)",
                        s / per_shard, s % per_shard, c, row[k], k, vocab);
          return buf;
        }
      }
    }
  }
  return "none";
}

TEST(SetRules, TokenIdOutsideTheVocabularyNamesShardSampleAndCaption) {
  // The fixture's ids lie in [5, 30000); index.json claiming a smaller vocabulary makes some
  // of them out of range, as a set whose tokenizer was swapped would be. Before the rules the
  // reader opened it and mmtrain failed ten steps later ("index out of range in self").
  FixtureOptions o;
  o.samples_per_shard = 20;
  o.vocab_size = 20000;
  const std::string expected = FirstIdOutside(20000, 20);
  ASSERT_NE(expected, "none");
  ExpectCorruption(OpenStatus(CocoSet(o)), expected);
}

TEST(SetRules, CaptionLongerThanMaxTokensIsNamed) {
  FixtureOptions o;
  o.max_tokens = 12;
  const auto& samples = CocoSamples();
  std::string expected;
  for (size_t s = 0; s < samples.size() && expected.empty(); ++s) {
    for (size_t c = 0; c < samples[s].tokens.size() && expected.empty(); ++c) {
      if (samples[s].tokens[c].size() > 12) {
        expected = "shard-000000.h5 sample " + std::to_string(s) + " caption " + std::to_string(c) +
                   ": " + std::to_string(samples[s].tokens[c].size()) +
                   " tokens, more than index.json's max_tokens 12";
      }
    }
  }
  ASSERT_FALSE(expected.empty());
  ExpectCorruption(OpenStatus(CocoSet(o)), expected);
}

// index.json rewritten with `edit` applied to it.
void ExpectIndexRefused(const std::string& key, const nlohmann::json& value,
                        const std::string& what) {
  SCOPED_TRACE(key);
  TempDir tmp;
  mm::testing::CopySet(CocoSet(FixtureOptions{}), tmp.path());
  auto j = nlohmann::json::parse(ReadFile(tmp / "index.json"));
  if (key == "height" || key == "width") {
    j["image"][key] = value;
  } else {
    j["tokenizer"][key] = value;
  }
  WriteFile(tmp / "index.json", j.dump());
  ExpectCorruption(OpenStatus(tmp.path()), what);
}

TEST(SetRules, SpecialIdsAndImageSidesAreChecked) {
  ExpectIndexRefused("pad_id", 30000, "tokenizer pad_id 30000 outside [0, 30000)");
  ExpectIndexRefused("pad_id", -1, "tokenizer pad_id -1 outside [0, 30000)");
  ExpectIndexRefused("unk_id", 31000, "tokenizer unk_id 31000 outside [0, 30000)");
  ExpectIndexRefused("bos_id", 30000, "tokenizer bos_id 30000 outside [0, 30000) and not -1");
  ExpectIndexRefused("eos_id", 40000, "tokenizer eos_id 40000");
  ExpectIndexRefused("vocab_size", 0, "tokenizer vocab_size 0 (must be >= 1)");
  ExpectIndexRefused("max_tokens", 0, "tokenizer max_tokens 0 (must be >= 1)");
  // 37000 is refused by the index parser itself; 9000 by the rules, before any shard is read.
  ExpectIndexRefused("height", 9000, "images of 64x9000x3; sides must be within [1, 8192]");
}

// Little-endian bytes of `v`, starting `skew` bytes into the buffer (tables need no alignment).
template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v, size_t skew) {
  std::vector<uint8_t> out(skew + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data() + skew, v.data(), v.size() * sizeof(T));
  return out;
}

struct Tables {
  std::vector<uint8_t> caption_offsets, token_offsets, ids;
  TokenTables t;
  Tables(std::vector<int64_t> co, std::vector<int64_t> to, std::vector<int32_t> tok)
      : caption_offsets(Bytes(co, 1)), token_offsets(Bytes(to, 3)), ids(Bytes(tok, 2)) {
    t.samples = static_cast<int64_t>(co.size()) - 1;
    t.captions = static_cast<int64_t>(to.size()) - 1;
    t.tokens = static_cast<int64_t>(tok.size());
    t.caption_offsets = caption_offsets.data() + 1;
    t.token_offsets = token_offsets.data() + 3;
    t.token_ids = ids.data() + 2;
  }
};

SetInfo Vocab(int vocab, int max_tokens) {
  SetInfo info;
  info.vocab_size = vocab;
  info.max_tokens = max_tokens;
  return info;
}

TEST(SetRules, TokenTablesInVectorsAsVerifyHoldsThem) {
  // Sample 0: captions 0, 1; sample 1: caption 2 (empty), caption 3.
  Tables ok({0, 2, 4}, {0, 3, 5, 5, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto r = CheckTokenTables("s.h5", ok.t, Vocab(10, 4));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 4);

  Tables neg({0, 2, 4}, {0, 3, 5, 5, 9}, {1, 2, 3, 4, 5, 6, -7, 8, 9});
  ExpectCorruption(CheckTokenTables("s.h5", neg.t, Vocab(10, 4)).status(),
                   "s.h5 sample 1 caption 1: token id -7 at position 1 outside the vocabulary "
                   "[0, 10)");
  Tables at_vocab({0, 2, 4}, {0, 3, 5, 5, 9}, {10, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectCorruption(CheckTokenTables("s.h5", at_vocab.t, Vocab(10, 4)).status(),
                   "s.h5 sample 0 caption 0: token id 10 at position 0");
  ExpectCorruption(CheckTokenTables("s.h5", ok.t, Vocab(10, 3)).status(),
                   "s.h5 sample 1 caption 1: 4 tokens, more than index.json's max_tokens 3");
  Tables back({0, 2, 4}, {0, 3, 2, 5, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectCorruption(CheckTokenTables("s.h5", back.t, Vocab(10, 4)).status(),
                   "s.h5 sample 0 caption 1: token_offsets 3 -> 2 (must not decrease");
  Tables no_caption({0, 2, 2, 4}, {0, 3, 5, 5, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectCorruption(CheckTokenTables("s.h5", no_caption.t, Vocab(10, 4)).status(),
                   "s.h5 sample 1: caption_offsets 2 -> 2 (must increase");

  // A bad id deep in a long table (past the first block of 4096) is still named exactly.
  std::vector<int64_t> co = {0}, to = {0};
  std::vector<int32_t> ids;
  for (int s = 0; s < 1000; ++s) {
    co.push_back(s + 1);
    for (int k = 0; k < 7; ++k) ids.push_back((s * 7 + k) % 50);
    to.push_back(static_cast<int64_t>(ids.size()));
  }
  ids[6000] = 50;
  Tables big(co, to, ids);
  ExpectCorruption(CheckTokenTables("s.h5", big.t, Vocab(50, 7)).status(),
                   "s.h5 sample 857 caption 0: token id 50 at position 1");
}

}  // namespace
}  // namespace mm::reader
