// Tests of `mmpack verify` (commands/verify.cc, shard/verifier.h) on sets the real writer
// wrote, then damaged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "shard/shard_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class VerifyTest : public WrittenSetTest {};

TEST_F(VerifyTest, AcceptsAWrittenSet) {
  Status st = Verify();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(out_.str().find("verify: OK: 2 shards, 5 samples"), std::string::npos) << out_.str();
}

TEST_F(VerifyTest, CatchesBitFlipInAChunkByChecksum) {
  auto [addr, size] = ChunkLocation(Shard(1), 1);
  auto bytes = ReadFile(Shard(1));
  bytes[addr + size / 2] ^= 0x10;
  WriteFile(Shard(1), bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5"), std::string::npos) << st.ToString();
  // Reported by the checksum, before libhdf5 parses the file: no sample named.
  EXPECT_NE(st.message().find("xxh3_64"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesBitFlipInAChunkByDecodingEvenWhenTheIndexAgrees) {
  auto [addr, size] = ChunkLocation(Shard(0), 2);
  auto bytes = ReadFile(Shard(0));
  bytes[addr + size / 2] ^= 0x01;
  WriteFile(Shard(0), bytes);
  // Rewrite the index with the damaged file's checksum: only decoding can tell now.
  entries_[0].xxh3_64 = XxhHex(bytes);
  WriteIndex(options_, entries_);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000000.h5 sample 2 (key 'coco-1002')"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("decode"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesTruncatedShard) {
  auto bytes = ReadFile(Shard(1));
  bytes.resize(bytes.size() / 2);
  WriteFile(Shard(1), bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5"), std::string::npos);
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesMissingShard) {
  fs::remove(Shard(1));
  Status st = Verify();
  ASSERT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesSampleCountMismatch) {
  entries_[0].samples = 4;
  WriteIndex(options_, entries_);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000000.h5"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("num_samples"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesTotalsMismatchAndMissingIndexKeys) {
  json index = json::parse(std::ifstream(tmp_.path() / "index.json"));
  index["totals"]["captions"] = 1;
  std::ofstream(tmp_.path() / "index.json") << index.dump();
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("totals"), std::string::npos) << st.ToString();
  index.erase("tokenizer");
  std::ofstream(tmp_.path() / "index.json") << index.dump();
  st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer"), std::string::npos) << st.ToString();
}

TEST(Verify, CatchesACaptionThatIsNotUtf8) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  PlainSample bad = MakePlain(1);
  bad.captions[1] = "caf\xe9 latin-1";  // the writer stores bytes; verify must notice
  auto entries = WriteSet(o, {MakePlain(0), bad});
  ASSERT_EQ(entries.size(), 1u);
  WriteIndex(o, entries);
  std::ostringstream out;
  Status st = RunVerify(o.output_dir, out);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("sample 1 (key 'coco-1001')"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("UTF-8"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesAMissingOrChangedTokenizer) {
  fs::path model = tmp_.path() / "tokenizer.model";
  auto bytes = ReadFile(model);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFile(model, bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer.model: sha256"), std::string::npos) << st.ToString();
  fs::remove(model);
  st = Verify();
  ASSERT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer.model"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, RefusesAnIndexOfAnotherFormatVersion) {
  json index = json::parse(std::ifstream(tmp_.path() / "index.json"));
  index["format_version"] = 99;
  std::ofstream(tmp_.path() / "index.json") << index.dump();
  Status st = Verify();
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  EXPECT_NE(st.message().find("99"), std::string::npos);
}

TEST_F(VerifyTest, CatchesALeftoverShardBeyondTheIndex) {
  fs::copy_file(Shard(1), tmp_.path() / "shard-000002.h5");
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000002.h5"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace mm::pack
