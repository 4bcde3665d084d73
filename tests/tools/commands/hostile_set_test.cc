// Hostile shard sets against `mmpack verify` and `mmpack show`: a damaged
// file is refused by its checksum before libhdf5 parses it; a parse that hangs or crashes is
// bounded; nothing outside the set's folder is read (external storage, soft and external links,
// symlinks); verify applies the reader's rules. Each shard is written by the real ShardWriter
// from real photos, then changed with libhdf5 and re-sealed in index.json (size and XXH3), so
// that the change reaches the parser.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "shard/bounded_query.h"
#include "shard/shard_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class HostileSetTest : public WrittenSetTest {
 protected:
  // Index entry `i` made to agree with the file as it is now: verify then parses it.
  void Reseal(int i) {
    auto bytes = ReadFile(Shard(i));
    entries_[static_cast<size_t>(i)].bytes = static_cast<int64_t>(bytes.size());
    entries_[static_cast<size_t>(i)].xxh3_64 = testing::XxhHex(bytes);
    WriteIndex(options_, entries_);
  }

  // Replaces dataset `name` of shard `i` (int32 [n]) by one whose storage is `secret`.
  void MakeTokensExternal(int i, const fs::path& secret, size_t n) {
    hid_t f = H5Fopen(Shard(i).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    testing::H5Closer cf{f, H5Fclose};
    ASSERT_GE(H5Ldelete(f, format::kTokens, H5P_DEFAULT), 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    testing::H5Closer cp{dcpl, H5Pclose};
    ASSERT_GE(H5Pset_external(dcpl, secret.c_str(), 0, n * 4), 0);
    hsize_t dims[1] = {n};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    testing::H5Closer cs{space, H5Sclose};
    hid_t d = H5Dcreate2(f, format::kTokens, H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d);
  }

  Status Show(int64_t sample) {
    ShowOptions o;
    o.dir = options_.output_dir;
    o.index = sample;
    o.output_png = (tmp_.path() / "show.png").string();
    out_.str("");
    return RunShow(o, out_);
  }
};

TEST_F(HostileSetTest, ChecksumMismatchIsReportedBeforeAnyParse) {
  // A flipped bit in the metadata: the checksum names it, libhdf5 never sees the file.
  auto bytes = ReadFile(Shard(0));
  bytes[bytes.size() - 40] ^= 0x04;
  testing::WriteFile(Shard(0), bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("xxh3_64"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("not parsed"), std::string::npos) << st.ToString();
}

TEST_F(HostileSetTest, ExternalStorageIsRefusedNotRead) {
  // A "secret" file whose bytes are valid token ids: before the fix verify read them as the
  // shard's tokens and accepted the set.
  const size_t n = static_cast<size_t>(entries_[0].tokens);
  std::vector<int32_t> ids(n, 7);
  const fs::path secret = tmp_.path() / ".." / (tmp_.path().filename().string() + "-secret");
  std::ofstream(secret, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(n * 4));
  MakeTokensExternal(0, secret, n);
  Reseal(0);
  Status st = Verify();
  fs::remove(secret);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("external storage"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("shard-000000.h5"), std::string::npos) << st.ToString();
}

TEST_F(HostileSetTest, SoftAndExternalLinksAreRefused) {
  {
    hid_t f = H5Fopen(Shard(1).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    testing::H5Closer cf{f, H5Fclose};
    ASSERT_GE(
        H5Lcreate_external(Shard(0).c_str(), "/captions", f, "elsewhere", H5P_DEFAULT, H5P_DEFAULT),
        0);
  }
  Reseal(1);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("external link"), std::string::npos) << st.ToString();

  WriteIndex(options_, entries_);
  {
    hid_t f = H5Fopen(Shard(0).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    testing::H5Closer cf{f, H5Fclose};
    ASSERT_GE(H5Ldelete(f, format::kSources, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/captions", f, format::kSources, H5P_DEFAULT, H5P_DEFAULT), 0);
  }
  Reseal(0);
  st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("soft link"), std::string::npos) << st.ToString();
}

TEST_F(HostileSetTest, SymlinksOutOfTheSetAreRefusedByVerifyAndTheReader) {
  // A shard that is a symlink to a file outside OUT: before the fix both read it.
  const fs::path outside = tmp_.path() / ".." / (tmp_.path().filename().string() + "-elsewhere");
  fs::create_directories(outside);
  fs::rename(Shard(1), outside / "shard-000001.h5");
  fs::create_symlink(outside / "shard-000001.h5", Shard(1));
  Status st = Verify();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("outside the set's folder"), std::string::npos) << st.ToString();
  auto set = mm::reader::ShardSet::Open(options_.output_dir);
  EXPECT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("outside the set's folder"), std::string::npos)
      << set.status().ToString();
  fs::remove(Shard(1));
  fs::rename(outside / "shard-000001.h5", Shard(1));

  // The tokenizer, too.
  const fs::path tokenizer = tmp_.path() / "tokenizer.model";
  fs::rename(tokenizer, outside / "tokenizer.model");
  fs::create_symlink(outside / "tokenizer.model", tokenizer);
  st = Verify();
  fs::remove_all(outside);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer.model resolves to"), std::string::npos) << st.ToString();
}

TEST_F(HostileSetTest, VerifyAppliesTheReadersRules) {
  // max_tokens below the longest caption (7 tokens): the reader refuses, so must verify.
  std::string text;
  {
    std::ifstream in(tmp_.path() / "index.json");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  json index = json::parse(text);
  json bad = index;
  bad["tokenizer"]["max_tokens"] = 4;
  std::ofstream(tmp_.path() / "index.json") << bad.dump();
  Status st = Verify();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("max_tokens"), std::string::npos) << st.ToString();

  bad = index;
  bad["tokenizer"]["pad_id"] = 30000;  // == vocab_size
  std::ofstream(tmp_.path() / "index.json") << bad.dump();
  st = Verify();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("pad_id"), std::string::npos) << st.ToString();
}

TEST_F(HostileSetTest, BigEndianTokensAreRefused) {
  const size_t n = static_cast<size_t>(entries_[0].tokens);
  {
    hid_t f = H5Fopen(Shard(0).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    testing::H5Closer cf{f, H5Fclose};
    auto ids = testing::ReadAll<int32_t>(f, format::kTokens, H5T_NATIVE_INT32, n);
    ASSERT_GE(H5Ldelete(f, format::kTokens, H5P_DEFAULT), 0);
    hsize_t dims[1] = {n};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    testing::H5Closer cs{space, H5Sclose};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    testing::H5Closer cp{dcpl, H5Pclose};
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    hid_t d = H5Dcreate2(f, format::kTokens, H5T_STD_I32BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    testing::H5Closer cd{d, H5Dclose};
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()), 0);
  }
  Reseal(0);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("little-endian"), std::string::npos) << st.ToString();
}

TEST(BoundedQuery, AHangACrashAndBadAllocBecomeCorruption) {
  QueryBounds b;
  b.cpu_seconds = 1;
  b.wall_seconds = 20;
  auto spin = []() -> Result<std::string> {
    volatile uint64_t x = 0;
    for (;;) x = x + 1;
  };
  Result<std::string> r = RunBounded("spin.h5", b, spin);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("s of CPU"), std::string::npos) << r.status().ToString();

  auto crash = []() -> Result<std::string> {
    ::raise(SIGSEGV);
    return std::string();
  };
  r = RunBounded("crash.h5", b, crash);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("crashed (signal 11"), std::string::npos)
      << r.status().ToString();

  auto oom = []() -> Result<std::string> { throw std::bad_alloc(); };
  r = RunBounded("huge.h5", b, oom);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of memory"), std::string::npos) << r.status().ToString();

  auto answer = []() -> Result<std::string> { return std::string("a\0b", 3); };
  r = RunBounded("fine.h5", b, answer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::string("a\0b", 3));
  auto refusal = []() -> Result<std::string> { return Status::NotFound("no such"); };
  r = RunBounded("fine.h5", b, refusal);
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
}

TEST_F(HostileSetTest, ShowReadsAGoodSetThroughTheBoundedPaths) {
  Status st = Show(4);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(out_.str().find("caption 1: Ein Café in Zürich"), std::string::npos) << out_.str();
}

}  // namespace
}  // namespace mm::pack
