// ShardSet: opening real shard sets, reading them bit-exactly, and refusing damaged ones.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "mm/internal/index_json.h"
#include "mm/reader.h"
#include "set/shard_set_impl.h"
#include "shard_fixture.h"

#if defined(__SANITIZE_ADDRESS__)
#define MM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MM_ASAN 1
#endif
#endif
#ifdef MM_ASAN
// Hostile HDF5 metadata can make HDF5 itself ask malloc for tens of GB; under ASan that must
// fail like a plain malloc (NULL, then an HDF5 error) instead of aborting the test.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace mm::reader {
namespace {

using mm::testing::CocoSamples;
using mm::testing::CocoSet;
using mm::testing::FixtureOptions;
using mm::testing::ReadFile;
using mm::testing::RefreshIndexEntry;
using mm::testing::TempDir;
using mm::testing::WriteFile;

FixtureOptions ThreeShards() {
  FixtureOptions o;
  o.samples_per_shard = 20;  // 51 samples: shards of 20, 20, 11
  return o;
}

std::shared_ptr<ShardSet> OpenOk(const std::string& dir, OpenOptions opt = {}) {
  auto r = ShardSet::Open(dir, opt);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : nullptr;
}

void ExpectMatchesSamples(const ShardSet& set) {
  const auto& samples = CocoSamples();
  ASSERT_EQ(set.num_samples(), static_cast<int64_t>(samples.size()));
  std::vector<uint8_t> buf(set.image_bytes());
  for (int64_t i = 0; i < set.num_samples(); ++i) {
    const auto& s = samples[i];
    ASSERT_TRUE(set.ReadImage(i, buf.data()).ok()) << set.Locate(i);
    ASSERT_EQ(buf, s.pixels) << "sample " << i;
    EXPECT_EQ(set.Key(i), s.key);
    ASSERT_EQ(set.NumCaptions(i), static_cast<int>(s.captions.size()));
    for (int c = 0; c < set.NumCaptions(i); ++c) {
      auto t = set.Tokens(i, c);
      EXPECT_EQ(std::vector<int32_t>(t.begin(), t.end()), s.tokens[c]) << i << "/" << c;
    }
  }
}

TEST(ShardSet, ReadsRealPhotosBitExactAcrossShards) {
  auto set = OpenOk(CocoSet(ThreeShards()));
  ASSERT_TRUE(set);
  EXPECT_EQ(set->info().shards.size(), 3u);
  EXPECT_EQ(set->info().num_captions, 255);
  EXPECT_EQ(set->Locate(45), "shard-000002.h5 sample 5");
  ExpectMatchesSamples(*set);
  // Compressed: stored bytes differ from the raw size.
  EXPECT_NE(set->StoredImageBytes(0), static_cast<int64_t>(set->image_bytes()));
}

TEST(ShardSet, ReadsUncompressedSetByCopy) {
  FixtureOptions o = ThreeShards();
  o.compression = "none";
  auto set = OpenOk(CocoSet(o));
  ASSERT_TRUE(set);
  EXPECT_EQ(set->info().compression, mm::format::Codec::kNone);
  EXPECT_EQ(set->StoredImageBytes(7), static_cast<int64_t>(set->image_bytes()));
  ExpectMatchesSamples(*set);
}

TEST(ShardSet, ReadsTablesStoredChunked) {
  FixtureOptions o;
  o.chunked_tables = true;
  auto set = OpenOk(CocoSet(o));
  ASSERT_TRUE(set);
  ExpectMatchesSamples(*set);
}

TEST(ShardSet, ReadsShardsWithVersion2ObjectHeaders) {
  FixtureOptions o;  // libver v18: superblock v2, "OHDR" object headers, the same v1 B-tree
  o.libver_low = o.libver_high = H5F_LIBVER_V18;
  o.samples_per_shard = 20;
  auto set = OpenOk(CocoSet(o));
  ASSERT_TRUE(set);
  ExpectMatchesSamples(*set);
}

TEST(ShardSet, ReadsAnotherChunkIndexTypeOneChunkAtATime) {
  FixtureOptions o;  // libver v110 as the low bound: layout message v4, a fixed array index
  o.libver_low = H5F_LIBVER_V110;
  auto set = OpenOk(CocoSet(o));
  ASSERT_TRUE(set);
  ExpectMatchesSamples(*set);
}

TEST(ShardSet, RefusesAnotherChunkIndexTypeTooLargeToQueryOneByOne) {
  // Asked one chunk at a time, HDF5 1.10.8 would take minutes on a large shard of this kind:
  // above internal::kMaxChunksQueriedOneByOne chunks it is refused at once.
  TempDir tmp;
  FixtureOptions o;
  o.libver_low = H5F_LIBVER_V110;
  o.width = o.height = 2;
  const int64_t n = internal::kMaxChunksQueriedOneByOne + 1;
  ASSERT_TRUE(mm::testing::WriteShardSet(tmp.path(), mm::testing::ManySamples(n, 2, 2), o).ok());
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard-000000.h5: dataset 'images': chunk index is a "
                                      "fixed array"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("up to 16384 chunks (16385 here"), std::string::npos);
}

TEST(ShardSet, RefusesAUserBlock) {
  // HDF5 1.10.8 reports chunk offsets relative to the user block's end and H5Dget_offset one
  // user block too far: such a shard was read at the wrong bytes; now it is refused by name.
  FixtureOptions o;
  o.userblock = 512;
  auto r = ShardSet::Open(CocoSet(o));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard-000000.h5: has a user block of 512 bytes"),
            std::string::npos)
      << r.status().ToString();
}

TEST(ShardSet, EqualsHdf5ReadPathForEverySample) {
  ASSERT_GE(mm::testing::RegisterZstdFilterForTests(), 0);
  std::string dir = CocoSet(ThreeShards());
  auto set = OpenOk(dir);
  ASSERT_TRUE(set);
  std::vector<uint8_t> mine(set->image_bytes()), theirs(set->image_bytes());
  int64_t global = 0;
  for (const ShardEntry& e : set->info().shards) {
    hid_t f = H5Fopen((dir + "/" + e.file).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hsize_t count[4] = {1, static_cast<hsize_t>(set->info().image_height),
                        static_cast<hsize_t>(set->info().image_width), 3};
    hid_t ms = H5Screate_simple(4, count, nullptr);
    for (int64_t i = 0; i < e.samples; ++i, ++global) {
      hsize_t start[4] = {static_cast<hsize_t>(i), 0, 0, 0};
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
      ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, theirs.data()), 0);
      ASSERT_TRUE(set->ReadImage(global, mine.data()).ok());
      ASSERT_EQ(mine, theirs) << set->Locate(global);
    }
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
  }
  EXPECT_EQ(global, set->num_samples());
}

TEST(ShardSet, VerifiesChecksumsOnRequest) {
  std::string good = CocoSet(ThreeShards());
  OpenOptions verify;
  verify.verify_checksums = true;
  ASSERT_TRUE(OpenOk(good, verify));

  TempDir tmp;
  mm::testing::CopySet(good, tmp.path());
  auto set = OpenOk(tmp.path());
  ASSERT_TRUE(set);
  const internal::ShardSetImpl* impl = &set->impl();
  bool compressed = false;
  auto chunk = impl->shard(1).StoredChunk(3, &compressed);
  // Offset of the chunk's middle byte in the file: the chunk view points into the mapping.
  std::string path = tmp / "shard-000001.h5";
  std::string bytes = ReadFile(path);
  size_t pos = bytes.find(std::string(chunk.substr(chunk.size() / 2, 64)));
  ASSERT_NE(pos, std::string::npos);
  set.reset();
  bytes[pos] ^= 0x10;
  WriteFile(path, bytes);
  auto r = ShardSet::Open(tmp.path(), verify);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard-000001.h5"), std::string::npos);
  EXPECT_NE(r.status().message().find("XXH3"), std::string::npos);
}

TEST(ShardSet, RejectsTruncatedShard) {
  TempDir tmp;
  mm::testing::CopySet(CocoSet(ThreeShards()), tmp.path());
  std::string path = tmp / "shard-000002.h5";
  std::string bytes = ReadFile(path);
  WriteFile(path, bytes.substr(0, bytes.size() / 2));
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption());
  EXPECT_NE(r.status().message().find("shard-000002.h5"), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().ToString();

  // Even when index.json is made to agree with the cut file, HDF5 or the bounds checks refuse.
  for (size_t keep : {bytes.size() - 1, bytes.size() * 3 / 4, size_t{4096}, size_t{100}}) {
    WriteFile(path, bytes.substr(0, keep));
    RefreshIndexEntry(tmp.path(), 2);
    auto r2 = ShardSet::Open(tmp.path());
    if (r2.ok()) {
      // Possible only if every chunk and table still fits: then reads must still be safe.
      std::vector<uint8_t> buf(r2.value()->image_bytes());
      for (int64_t i = 0; i < r2.value()->num_samples(); ++i) {
        (void)r2.value()->ReadImage(i, buf.data());
      }
      ADD_FAILURE() << "opened a shard cut to " << keep << " bytes";
    } else {
      EXPECT_NE(r2.status().message().find("shard-000002.h5"), std::string::npos)
          << r2.status().ToString();
    }
  }
}

// Finds the 8-byte little-endian `value` in `bytes` outside [skip_begin, skip_end).
size_t FindU64(const std::string& bytes, uint64_t value) {
  char pattern[8];
  std::memcpy(pattern, &value, 8);
  return bytes.find(std::string(pattern, 8));
}

TEST(ShardSet, RejectsChunkOffsetPastEndOfFile) {
  TempDir tmp;
  mm::testing::CopySet(CocoSet(ThreeShards()), tmp.path());
  std::string path = tmp / "shard-000000.h5";
  // Where HDF5 says sample 7's chunk lies.
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  hsize_t coord[4] = {7, 0, 0, 0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  ASSERT_GE(H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &size), 0);
  H5Dclose(d);
  H5Fclose(f);
  std::string bytes = ReadFile(path);
  size_t pos = FindU64(bytes, addr);  // the chunk B-tree's record of that address
  ASSERT_NE(pos, std::string::npos);
  uint64_t hostile = bytes.size() + 4096;
  std::memcpy(&bytes[pos], &hostile, 8);
  WriteFile(path, bytes);
  RefreshIndexEntry(tmp.path(), 0);
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard-000000.h5 sample 7"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("outside the file"), std::string::npos);

  // A chunk that starts inside but runs past the end.
  hostile = bytes.size() - size / 2;
  std::memcpy(&bytes[pos], &hostile, 8);
  WriteFile(path, bytes);
  RefreshIndexEntry(tmp.path(), 0);
  r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sample 7"), std::string::npos) << r.status().ToString();
}

TEST(ShardSet, RejectsChunkKeyWithAWrongStoredSize) {
  // The stored size sits in the chunk's B-tree key, just before the chunk address; HDF5 reads
  // the same key, so only the size rules can catch it: a raw chunk holds exactly H*W*3 bytes.
  TempDir tmp;
  FixtureOptions raw;
  raw.compression = "none";
  mm::testing::CopySet(CocoSet(raw), tmp.path());
  std::string path = tmp / "shard-000000.h5";
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  hsize_t coord[4] = {7, 0, 0, 0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  ASSERT_GE(H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &size), 0);
  H5Dclose(d);
  H5Fclose(f);
  std::string bytes = ReadFile(path);
  size_t pos = FindU64(bytes, addr);
  ASSERT_NE(pos, std::string::npos);
  const size_t key = pos - (8 + 8 * 5);  // size u32, filter mask u32, 5 offsets u64
  uint32_t wrong = static_cast<uint32_t>(size) + 1;
  std::memcpy(&bytes[key], &wrong, 4);
  WriteFile(path, bytes);
  RefreshIndexEntry(tmp.path(), 0);
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shard-000000.h5 sample 7: image chunk of 9217 stored "
                                      "bytes cannot hold a 9216-byte image"),
            std::string::npos)
      << r.status().ToString();
}

TEST(ShardSet, ChunkIndexCycleIsAnErrorBeforeHdf5WalksIt) {
  // A B-tree node that is its own child. HDF5's own passes over the index
  // (H5Dget_num_chunks, H5Dget_chunk_info_by_coord) recurse into it without end; the reader's
  // walk refuses it first, so HDF5 is only asked about an index already known to be a tree.
  TempDir tmp;
  FixtureOptions o;
  o.width = o.height = 4;
  ASSERT_TRUE(mm::testing::WriteShardSet(tmp.path(), mm::testing::ManySamples(3000), o).ok());
  const std::string path = tmp / "shard-000000.h5";
  std::string bytes = ReadFile(path);
  size_t root = std::string::npos;
  int root_level = -1;
  for (size_t p = bytes.find("TREE"); p != std::string::npos; p = bytes.find("TREE", p + 1)) {
    if (bytes[p + 4] == 1 && static_cast<uint8_t>(bytes[p + 5]) > root_level) {
      root = p;
      root_level = static_cast<uint8_t>(bytes[p + 5]);
    }
  }
  ASSERT_GE(root_level, 1);
  const uint64_t self = root;
  std::memcpy(&bytes[root + 24 + 48], &self, 8);  // child 0, after the header and key 0
  WriteFile(path, bytes);
  RefreshIndexEntry(tmp.path(), 0);
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shard-000000.h5: dataset 'images': chunk index: "
                                      "chunk B-tree node at file offset " +
                                      std::to_string(root) + " is reached twice (a cycle)"),
            std::string::npos)
      << r.status().ToString();
}

TEST(ShardSet, CorruptFrameGivesCorruptionNamingShardAndSample) {
  TempDir tmp;
  mm::testing::CopySet(CocoSet(ThreeShards()), tmp.path());
  std::string path = tmp / "shard-000001.h5";
  int64_t chunk_offset = 0;
  {
    auto set = OpenOk(tmp.path());
    ASSERT_TRUE(set);
    const internal::ShardSetImpl* impl = &set->impl();
    bool compressed = false;
    auto chunk = impl->shard(1).StoredChunk(4, &compressed);
    ASSERT_TRUE(compressed);
    std::string bytes = ReadFile(path);
    chunk_offset = static_cast<int64_t>(bytes.find(std::string(chunk.substr(0, 256))));
    ASSERT_GE(chunk_offset, 0);
  }
  std::string bytes = ReadFile(path);
  bytes[chunk_offset] ^= 0xff;  // the zstd magic number
  WriteFile(path, bytes);
  RefreshIndexEntry(tmp.path(), 1);
  auto set = OpenOk(tmp.path());
  ASSERT_TRUE(set);
  std::vector<uint8_t> buf(set->image_bytes());
  Status st = set->ReadImage(24, buf.data());  // shard 1, sample 4
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5 sample 4"), std::string::npos) << st.ToString();
  EXPECT_TRUE(set->ReadImage(23, buf.data()).ok());

  // Flips inside the compressed data: an error or wrong pixels, never a crash or overrun.
  for (int k = 1; k < 64; ++k) {
    std::string b2 = bytes;
    b2[chunk_offset] ^= 0xff;  // restore the magic
    b2[chunk_offset + 6 + k * 37] ^= static_cast<char>(1 << (k % 8));
    WriteFile(path, b2);
    auto s2 = OpenOk(tmp.path());
    ASSERT_TRUE(s2);
    Status r = s2->ReadImage(24, buf.data());
    EXPECT_TRUE(r.ok() || r.IsCorruption()) << r.ToString();
  }
}

TEST(ShardSet, BitFlipsInHdf5MetadataGiveErrorsNotCrashes) {
  TempDir tmp;
  FixtureOptions o;
  o.samples_per_shard = 8;
  o.width = 16;
  o.height = 16;
  std::string good = CocoSet(o);
  mm::testing::CopySet(good, tmp.path());
  std::string path = tmp / "shard-000000.h5";
  const std::string bytes = ReadFile(path);
  int opened = 0, refused = 0;
  std::vector<uint8_t> buf(16 * 16 * 3);
  // A stride over the metadata HDF5 wrote before the first chunk, and a sparser one after.
  for (size_t pos = 0; pos < bytes.size(); pos += (pos < 2048 ? 3 : 61)) {
    for (uint8_t bit : {static_cast<uint8_t>(1u << (pos % 8))}) {
      std::string b = bytes;
      b[pos] ^= static_cast<char>(bit);
      WriteFile(path, b);
      // In-process, so that a sanitizer sees every read our own checks make (in a forked
      // child an ASan report would only turn into a Corruption status).
      OpenOptions in_process;
      in_process.isolate_hdf5 = false;
      auto r = ShardSet::Open(tmp.path(), in_process);
      if (!r.ok()) {
        ++refused;
        EXPECT_NE(r.status().message().find("shard-000000.h5"), std::string::npos)
            << pos << ": " << r.status().ToString();
        continue;
      }
      ++opened;
      for (int64_t i = 0; i < r.value()->num_samples(); ++i) {
        Status st = r.value()->ReadImage(i, buf.data());
        EXPECT_TRUE(st.ok() || st.IsCorruption()) << st.ToString();
        (void)r.value()->Key(i);
        for (int c = 0; c < r.value()->NumCaptions(i); ++c) (void)r.value()->Tokens(i, c);
      }
    }
  }
  EXPECT_GT(refused, 0);
  // The reader closed every HDF5 object it opened, on every error path. (LeakSanitizer still
  // reports ~26 KB that libhdf5 itself leaks inside failed H5Fopen calls on some flips.)
  EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
  std::printf(
      "bit flips: %d refused, %d opened (flip in bytes the reader does not use or that "
      "only change pixels)\n",
      refused, opened);
}

TEST(ShardSet, IsolatedHdf5QueryAgreesWithInProcess) {
  OpenOptions isolated, in_process;
  isolated.isolate_hdf5 = true;
  in_process.isolate_hdf5 = false;
  std::string good = CocoSet(ThreeShards());
  auto a = ShardSet::Open(good, isolated), b = ShardSet::Open(good, in_process);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  for (int64_t i = 0; i < a.value()->num_samples(); ++i) {
    ASSERT_EQ(a.value()->StoredImageBytes(i), b.value()->StoredImageBytes(i));
    ASSERT_EQ(a.value()->Key(i), b.value()->Key(i));
  }
  ExpectMatchesSamples(*a.value());
  // Chunked tables come back through the pipe too.
  FixtureOptions chunked;
  chunked.chunked_tables = true;
  auto c = ShardSet::Open(CocoSet(chunked), isolated);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ExpectMatchesSamples(*c.value());
  // Errors keep their code and message.
  TempDir tmp;
  mm::testing::CopySet(good, tmp.path());
  std::string path = tmp / "shard-000001.h5";
  std::string bytes = ReadFile(path);
  WriteFile(path, bytes.substr(0, 2000));
  RefreshIndexEntry(tmp.path(), 1);
  auto x = ShardSet::Open(tmp.path(), isolated), y = ShardSet::Open(tmp.path(), in_process);
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().ToString(), y.status().ToString());
}

// SIGKILLs this process's children (from /proc/<pid>/stat's ppid field): a forked HDF5 query
// stuck on an inherited lock would otherwise outlive the test binary and keep ctest's output
// pipe open.
void KillOwnChildren() {
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");  // readdir, not std::filesystem: nothing here may throw
  if (!proc) return;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    char path[64], stat[512];
    std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE* f = std::fopen(path, "r");
    if (!f) continue;
    size_t n = std::fread(stat, 1, sizeof(stat) - 1, f);
    std::fclose(f);
    stat[n] = '\0';
    const char* close = std::strrchr(stat, ')');  // the command name may hold spaces
    char state = 0;
    long ppid = 0;
    if (close && std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  ::closedir(proc);
}

TEST(ShardSet, OpenReturnsWhileAnotherThreadUsesHdf5) {
  // Another thread of the process loops over HDF5 calls on another set's shard, as mmpack's
  // writer or an application's own HDF5 code would. When Open forked for every shard by
  // default, a fork taken while that thread held libhdf5's global lock left the child, and
  // Open, blocked forever.
  const std::string other = CocoSet(FixtureOptions{}) + "/shard-000000.h5";
  const std::string dir = CocoSet(ThreeShards());  // both written before the thread starts
  std::atomic<bool> stop{false};
  std::atomic<int64_t> h5_rounds{0}, h5_failures{0};
  std::thread h5_user([&] {
    std::vector<int64_t> offsets(CocoSamples().size() + 1);
    while (!stop) {
      hid_t f = H5Fopen(other.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      hid_t d = f < 0 ? -1 : H5Dopen2(f, mm::format::kCaptionOffsets, H5P_DEFAULT);
      if (d < 0 ||
          H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data()) < 0) {
        ++h5_failures;
      }
      if (d >= 0) H5Dclose(d);
      if (f >= 0) H5Fclose(f);
      ++h5_rounds;
    }
  });
  while (h5_rounds == 0) std::this_thread::yield();
  auto opened = std::async(std::launch::async, [&] {
    int ok = 0;
    for (int i = 0; i < 20; ++i) ok += ShardSet::Open(dir).ok() ? 1 : 0;
    return ok;
  });
  if (opened.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // A hung Open can be neither joined nor cancelled: end the test binary now rather than
    // leave ctest waiting for its timeout.
    std::fprintf(stderr,
                 "FAILED: ShardSet::Open did not return within 20 s while another thread was "
                 "calling HDF5\n");
    std::fflush(stderr);
    KillOwnChildren();
    std::quick_exit(1);
  }
  stop = true;
  h5_user.join();
  EXPECT_EQ(opened.get(), 20);
  EXPECT_EQ(h5_failures, 0);
  std::printf("20 opens of 3 shards while the other thread made %lld HDF5 rounds\n",
              static_cast<long long>(h5_rounds.load()));
}

TEST(ShardSet, IsolatedQueryTurnsDeadOrSilentChildIntoCorruption) {
  OpenOptions isolated;
  isolated.isolate_hdf5 = true;
  const std::string dir = CocoSet(ThreeShards());
  auto& hooks = internal::IsolatedQueryHooksForTesting();
  const internal::IsolatedQueryTestHooks saved = hooks;

  // The child dies before answering (as on a segfault inside libhdf5).
  hooks.in_child = [] { ::kill(::getpid(), SIGKILL); };
  auto r = ShardSet::Open(dir, isolated);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("shard-000000.h5: libhdf5 crashed (signal 9)"),
            std::string::npos)
      << r.status().ToString();

  // The child never answers (as when it inherited a lock another thread held): killed at the
  // deadline.
  hooks.in_child = [] {
    for (;;) ::pause();
  };
  hooks.timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  r = ShardSet::Open(dir, isolated);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  hooks = saved;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("shard-000000.h5: HDF5 metadata query timed out"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_LT(seconds, 10.0);

  // Without the hooks the isolated path answers again.
  EXPECT_TRUE(ShardSet::Open(dir, isolated).ok());
}

TEST(ShardSet, RejectsAnotherFormatVersionNamingIt) {
  TempDir tmp;
  mm::testing::CopySet(CocoSet(ThreeShards()), tmp.path());
  std::string index_path = tmp / "index.json";
  auto j = nlohmann::json::parse(ReadFile(index_path));
  j["format_version"] = 7;
  WriteFile(index_path, j.dump());
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("format_version 7"), std::string::npos);
  EXPECT_NE(r.status().message().find("1..2"), std::string::npos) << r.status().ToString();
}

TEST(ShardSet, MissingIndexOrShardIsNotFound) {
  TempDir tmp;
  auto r = ShardSet::Open(tmp.path());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  mm::testing::CopySet(CocoSet(ThreeShards()), tmp.path());
  std::filesystem::remove(tmp / "shard-000001.h5");
  r = ShardSet::Open(tmp.path());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard-000001.h5"), std::string::npos);
}

TEST(ShardSet, RejectsIndexThatDisagreesWithShard) {
  TempDir tmp;
  mm::testing::CopySet(CocoSet(ThreeShards()), tmp.path());
  std::string index_path = tmp / "index.json";
  auto j = nlohmann::json::parse(ReadFile(index_path));
  j["shards"][1]["samples"] = 19;
  j["totals"]["samples"] = 50;
  WriteFile(index_path, j.dump());
  auto r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard-000001.h5"), std::string::npos);

  j = nlohmann::json::parse(ReadFile(index_path));
  j["shards"][1]["samples"] = 20;
  j["totals"]["samples"] = 51;
  j["shards"][1]["tokens"] = j["shards"][1]["tokens"].get<int64_t>() + 1;
  WriteFile(index_path, j.dump());
  r = ShardSet::Open(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
}

TEST(IndexJson, RefusesMalformedAndHostileIndexes) {
  auto good = nlohmann::json::parse(ReadFile(CocoSet(ThreeShards()) + "/index.json"));
  ASSERT_TRUE(internal::ParseIndex(good.dump(), "/x").ok());
  auto expect_bad = [](const nlohmann::json& j, const char* needle) {
    auto r = internal::ParseIndex(j.dump(), "/x");
    ASSERT_FALSE(r.ok()) << j.dump();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  };
  auto j = good;
  j["shards"][0]["file"] = "../../etc/passwd";
  expect_bad(j, "plain file name");
  j = good;
  j["totals"]["samples"] = 52;
  expect_bad(j, "totals.samples");
  j = good;
  j["shards"][0]["samples"] = -1;
  expect_bad(j, "samples");
  j = good;
  j["image"]["channels"] = 4;
  expect_bad(j, "channels");
  j = good;
  j["compression"]["codec"] = "lz4";
  expect_bad(j, "lz4");
  j = good;
  j["format"] = "webdataset";
  expect_bad(j, "format");
  j = good;
  j["shards"][0]["samples"] = "many";
  expect_bad(j, "not an integer");
  EXPECT_FALSE(internal::ParseIndex("{\"format\": ", "/x").ok());
  EXPECT_FALSE(internal::ParseIndex("[]", "/x").ok());
  EXPECT_FALSE(internal::ParseIndex("", "/x").ok());
}

}  // namespace
}  // namespace mm::reader
