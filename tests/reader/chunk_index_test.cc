// The chunk index walk (reader/src/shard/chunk_index.h): equal to HDF5's own per-chunk answers on
// real shards, and an error, never a loop, a crash or an unbounded allocation, on damaged ones.
#include "shard/chunk_index.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shard_fixture.h"

namespace mm::reader::internal {
namespace {

using mm::testing::CocoSet;
using mm::testing::FixtureOptions;
using mm::testing::ManySamples;
using mm::testing::ReadFile;
using mm::testing::TempDir;
using mm::testing::WriteFile;

// What HDF5 says of a shard's `images`: the walk's hints and grid, and every chunk's record
// from H5Dget_chunk_info_by_coord (addresses: mmpack shards have no user block, so
// base-relative addresses are file offsets).
struct Hdf5View {
  ChunkIndexHints hints;
  ChunkGrid grid;
  std::vector<ChunkRecord> records;
};

Hdf5View AskHdf5(const std::string& path) {
  Hdf5View v;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << path;
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  hid_t fcpl = H5Fget_create_plist(f);
  size_t sa = 0, ss = 0;
  H5Pget_sizes(fcpl, &sa, &ss);
  H5Pget_istore_k(fcpl, &v.hints.btree_k);
  hsize_t userblock = 0;
  H5Pget_userblock(fcpl, &userblock);
  v.hints.userblock = userblock;
  v.hints.sizeof_addr = static_cast<unsigned>(sa);
  v.hints.sizeof_size = static_cast<unsigned>(ss);
  H5O_info_t info;
  H5Oget_info2(d, &info, H5O_INFO_BASIC);
  v.hints.header_address = info.addr;
  hid_t space = H5Dget_space(d);
  hsize_t dims[4] = {0, 0, 0, 0};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  v.grid.chunk_dims = {1, static_cast<uint32_t>(dims[1]), static_cast<uint32_t>(dims[2]), 3};
  v.grid.num_chunks = static_cast<int64_t>(dims[0]);
  for (hsize_t i = 0; i < dims[0]; ++i) {
    hsize_t coord[4] = {i, 0, 0, 0};
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    EXPECT_GE(H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &size), 0);
    v.records.push_back(ChunkRecord{addr + v.hints.userblock, static_cast<uint32_t>(size), mask});
  }
  H5Sclose(space);
  H5Pclose(fcpl);
  H5Dclose(d);
  H5Fclose(f);
  return v;
}

Result<std::vector<ChunkRecord>> Walk(const std::string& bytes, const Hdf5View& v) {
  return ReadChunkIndex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), v.hints,
                        v.grid);
}

void ExpectWalkEqualsHdf5(const std::string& path) {
  SCOPED_TRACE(path);
  const Hdf5View v = AskHdf5(path);
  auto r = Walk(ReadFile(path), v);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), v.records.size());
  for (size_t i = 0; i < v.records.size(); ++i) {
    EXPECT_EQ((*r)[i].offset, v.records[i].offset) << "chunk " << i;
    EXPECT_EQ((*r)[i].size, v.records[i].size) << "chunk " << i;
    EXPECT_EQ((*r)[i].filter_mask, v.records[i].filter_mask) << "chunk " << i;
  }
}

// A shard of `n` tiny real photos (4x4), written once per (n, options) per test binary.
std::string TinyShard(int64_t n, FixtureOptions o = {}) {
  static std::map<std::string, std::unique_ptr<TempDir>> cache;
  o.width = o.height = 4;
  const std::string tag = std::to_string(n) + "_" + std::to_string(o.libver_low) + o.compression;
  auto it = cache.find(tag);
  if (it == cache.end()) {
    auto dir = std::make_unique<TempDir>("mm_tiny");
    Status st = mm::testing::WriteShardSet(dir->path(), ManySamples(n), o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    it = cache.emplace(tag, std::move(dir)).first;
  }
  return *it->second / "shard-000000.h5";
}

TEST(ChunkIndex, EqualsHdf5OnRealShards) {
  FixtureOptions three;
  three.samples_per_shard = 20;
  for (const char* f : {"shard-000000.h5", "shard-000001.h5", "shard-000002.h5"}) {
    ExpectWalkEqualsHdf5(CocoSet(three) + "/" + f);
  }
  FixtureOptions raw;
  raw.compression = "none";
  ExpectWalkEqualsHdf5(CocoSet(raw) + "/shard-000000.h5");
  // 5000 chunks: a B-tree of three levels (at most 64 entries a node).
  ExpectWalkEqualsHdf5(TinyShard(5000));
  // Version 2 object headers ("OHDR", superblock v2) over the same kind of index.
  FixtureOptions v18;
  v18.libver_low = v18.libver_high = H5F_LIBVER_V18;
  ExpectWalkEqualsHdf5(TinyShard(700, v18));
}

TEST(ChunkIndex, EqualsHdf5OnAnExtendibleDatasetWrittenByH5py) {
  TempDir tmp;
  const std::string path = tmp / "h5py.h5";
  const std::string script =
      "import h5py, numpy as np, sys\n"
      "with h5py.File(sys.argv[1], 'w', libver='earliest') as f:\n"
      "    d = f.create_dataset('images', shape=(0, 4, 4, 3), maxshape=(None, 4, 4, 3),\n"
      "                         chunks=(1, 4, 4, 3), dtype='u1')\n"
      "    for i in range(3000):\n"
      "        d.resize(i + 1, axis=0)\n"
      "        d[i] = np.full((4, 4, 3), i % 251, 'u1')\n";
  WriteFile(tmp / "w.py", script);
  ASSERT_EQ(std::system((std::string(MM_PYTHON) + " " + tmp / "w.py" + " " + path).c_str()), 0);
  ExpectWalkEqualsHdf5(path);
}

TEST(ChunkIndex, NewerIndexTypeIsUnsupported) {
  FixtureOptions v110;
  v110.libver_low = H5F_LIBVER_V110;
  const std::string path = TinyShard(50, v110);
  auto r = Walk(ReadFile(path), AskHdf5(path));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("fixed array"), std::string::npos) << r.status().ToString();
}

// The B-tree nodes of a real file, found by their signature.
struct Node {
  size_t pos;
  int level;
  int entries;
};
constexpr size_t kKeyBytes = 8 + 8 * 5;  // size, filter mask, 5 offsets (4 dims + element)
constexpr size_t kEntryBytes = kKeyBytes + 8;

std::vector<Node> FindNodes(const std::string& b) {
  std::vector<Node> nodes;
  for (size_t p = b.find("TREE"); p != std::string::npos; p = b.find("TREE", p + 1)) {
    if (p + 8 <= b.size() && b[p + 4] == 1) {
      nodes.push_back({p, static_cast<uint8_t>(b[p + 5]),
                       static_cast<uint8_t>(b[p + 6]) | (static_cast<uint8_t>(b[p + 7]) << 8)});
    }
  }
  return nodes;
}
size_t KeyAt(const Node& n, int e) { return n.pos + 24 + e * kEntryBytes; }
size_t ChildAt(const Node& n, int e) { return KeyAt(n, e) + kKeyBytes; }
void Put64(std::string* b, size_t pos, uint64_t v) { std::memcpy(&(*b)[pos], &v, 8); }
void Put16(std::string* b, size_t pos, uint16_t v) { std::memcpy(&(*b)[pos], &v, 2); }
uint64_t Get64(const std::string& b, size_t pos) {
  uint64_t v;
  std::memcpy(&v, &b[pos], 8);
  return v;
}

class DamagedIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TinyShard(5000);
    view_ = AskHdf5(path_);
    bytes_ = ReadFile(path_);
    for (const Node& n : FindNodes(bytes_)) {
      if (n.level == 0) leaves_.push_back(n);
      if (root_.entries == 0 || n.level > root_.level) root_ = n;
    }
    ASSERT_GE(root_.level, 2);
    ASSERT_GT(leaves_.size(), 50u);
  }
  // The walk of the damaged bytes fails with Corruption whose message holds `what`.
  void ExpectCorruption(const std::string& bytes, const std::string& what,
                        const Hdf5View* view = nullptr) {
    auto r = Walk(bytes, view ? *view : view_);
    ASSERT_FALSE(r.ok()) << "expected: " << what;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
  }
  std::string path_, bytes_;
  Hdf5View view_;
  Node root_{0, 0, 0};
  std::vector<Node> leaves_;
};

TEST_F(DamagedIndex, CycleOrSharedNodeIsAnErrorNotALoop) {
  std::string b = bytes_;
  Put64(&b, ChildAt(root_, 1), Get64(b, ChildAt(root_, 0)));  // two parents' worth of one node
  ExpectCorruption(b, "reached twice");
  b = bytes_;
  Put64(&b, ChildAt(root_, 0), root_.pos);  // the root is its own child
  ExpectCorruption(b, "reached twice (a cycle)");
  b = bytes_;
  Put64(&b, ChildAt(leaves_[3], 0), leaves_[3].pos);  // a chunk address: never followed
  auto r = Walk(b, view_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();  // the caller checks each chunk's bytes
}

TEST_F(DamagedIndex, ChildPointerOutsideTheFile) {
  std::string b = bytes_;
  Put64(&b, ChildAt(root_, 0), bytes_.size() + 100);
  ExpectCorruption(b, "lies outside the file");
  Put64(&b, ChildAt(root_, 0), ~uint64_t{0});  // HDF5's undefined address
  ExpectCorruption(b, "lies outside the file");
  Put64(&b, ChildAt(root_, 0), bytes_.size() - 10);  // a node header cut by the end
  ExpectCorruption(b, "lies outside the file");
}

TEST_F(DamagedIndex, KeyNamingAChunkOutsideTheGridOrTwice) {
  const Node& leaf = leaves_[5];
  std::string b = bytes_;
  Put64(&b, KeyAt(leaf, 0) + 8, 5000);  // dimension 0 offset past the last chunk
  ExpectCorruption(b, "outside the 5000-chunk grid");
  b = bytes_;
  Put64(&b, KeyAt(leaf, 0) + 16, 4);  // a second-dimension offset: not one chunk per sample
  ExpectCorruption(b, "outside the 5000-chunk grid");
  b = bytes_;
  Put64(&b, KeyAt(leaf, 1) + 8, Get64(b, KeyAt(leaf, 0) + 8));
  ExpectCorruption(b, "indexed twice");
  b = bytes_;
  Put16(&b, leaf.pos + 6, static_cast<uint16_t>(leaf.entries - 1));
  ExpectCorruption(b, "is not indexed");
}

TEST_F(DamagedIndex, TooManyOrNoEntries) {
  std::string b = bytes_;
  Put16(&b, leaves_[0].pos + 6, 0xffff);
  ExpectCorruption(b, "claims 65535 entries (at most 64");
  Put16(&b, leaves_[0].pos + 6, 65);
  ExpectCorruption(b, "claims 65 entries");
  Put16(&b, leaves_[0].pos + 6, 0);
  ExpectCorruption(b, "claims 0 entries");
  // A file whose last node claims entries past its end.
  auto r = Walk(bytes_.substr(0, leaves_.back().pos + 100), view_);
  EXPECT_FALSE(r.ok());
}

TEST_F(DamagedIndex, WrongNodeTypeSignatureOrLevel) {
  std::string b = bytes_;
  b[leaves_[2].pos + 4] = 0;  // a group node, not raw data chunks
  ExpectCorruption(b, "no chunk B-tree node");
  b = bytes_;
  b[leaves_[2].pos] = 'X';
  ExpectCorruption(b, "no chunk B-tree node");
  b = bytes_;
  b[root_.pos + 5] = 60;  // deeper than kMaxBtreeLevel
  ExpectCorruption(b, "has level 60, expected at most 48");
  b = bytes_;
  b[leaves_[2].pos + 5] = 1;  // a leaf that claims to be internal
  ExpectCorruption(b, "has level 1, expected 0");
}

TEST_F(DamagedIndex, SuperblockHeaderAndCountsAreChecked) {
  Hdf5View v = view_;
  v.hints.sizeof_addr = 4;
  ExpectCorruption(bytes_, "HDF5 reported 4 and 8", &v);
  v = view_;
  v.hints.userblock = 512;
  ExpectCorruption(bytes_, "user block of 512", &v);
  v = view_;
  v.hints.header_address = bytes_.size();
  ExpectCorruption(bytes_, "object header address", &v);
  v = view_;
  v.grid.num_chunks = int64_t{1} << 40;  // refused before 16 TiB of records are allocated
  ExpectCorruption(bytes_, "chunks cannot be indexed", &v);
  v = view_;
  v.grid.chunk_dims[1] = 5;
  ExpectCorruption(bytes_, "chunk dimensions [1, 4, 4, 3, 1], not HDF5's", &v);
  std::string b = bytes_;
  b[0] = 'x';
  ExpectCorruption(b, "no HDF5 superblock");
}

TEST_F(DamagedIndex, EveryPrefixOfTheFileIsAnErrorOrTheIndex) {
  // Cut the file at many points: the walk reads only inside what it is given.
  for (size_t cut = 0; cut < bytes_.size(); cut += bytes_.size() / 97 + 1) {
    auto r = Walk(bytes_.substr(0, cut), view_);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << cut;
    }
  }
}

// Generated files for what real writers do not produce: object header continuation blocks.
// Layout: superblock v0 (8-byte addresses and lengths) at 0; object header v1 at 96; blocks and
// B-tree nodes appended after.
class SynthFile {
 public:
  SynthFile() {
    bytes_.assign(96, '\0');
    std::memcpy(&bytes_[0], "\x89HDF\r\n\x1a\n", 8);
    bytes_[13] = 8;  // size of offsets
    bytes_[14] = 8;  // size of lengths
    // base address at 24: 0.
  }
  size_t size() const { return bytes_.size(); }
  size_t Append(const std::string& b) {
    size_t at = bytes_.size();
    bytes_ += b;
    return at;
  }
  std::string& bytes() { return bytes_; }

  static std::string U64(uint64_t v) { return std::string(reinterpret_cast<char*>(&v), 8); }
  static std::string U32(uint32_t v) { return std::string(reinterpret_cast<char*>(&v), 4); }
  static std::string Message(uint16_t type, std::string data) {
    data.resize((data.size() + 7) / 8 * 8, '\0');
    std::string h(8, '\0');
    std::memcpy(&h[0], &type, 2);
    uint16_t size = static_cast<uint16_t>(data.size());
    std::memcpy(&h[2], &size, 2);
    return h + data;
  }
  static std::string Continuation(uint64_t addr, uint64_t length) {
    return Message(0x10, U64(addr) + U64(length));
  }
  // Layout message v3, chunked [1, 2, 2, 3] of 1-byte elements.
  static std::string Layout(uint64_t btree) {
    std::string d = {3, 2, 5};
    d += U64(btree) + U32(1) + U32(2) + U32(2) + U32(3) + U32(1);
    return Message(0x08, d);
  }
  static std::string Header(const std::string& messages) {
    std::string h = {1, 0, 1, 0, 1, 0, 0, 0};
    h += U32(static_cast<uint32_t>(messages.size())) + std::string(4, '\0');
    return h + messages;
  }
  // A leaf of `n` chunks at dimension-0 offsets 0..n-1, each 12 bytes at `data`.
  static std::string Leaf(int n, uint64_t data) {
    std::string b = "TREE";
    b += std::string{1, 0} + std::string(1, static_cast<char>(n)) + std::string(1, 0);
    b += U64(~uint64_t{0}) + U64(~uint64_t{0});
    for (int i = 0; i <= n; ++i) {
      b += U32(12) + U32(0) + U64(i) + U64(0) + U64(0) + U64(0) + U64(0);
      if (i < n) b += U64(data + 12 * i);
    }
    return b;
  }

  Result<std::vector<ChunkRecord>> Walk(int64_t chunks) {
    ChunkIndexHints h;
    h.header_address = 96;
    ChunkGrid g{{1, 2, 2, 3}, 1, chunks};
    return ReadChunkIndex(reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size(), h, g);
  }

 private:
  std::string bytes_;
};

TEST(ChunkIndexSynthetic, LayoutInAContinuationBlockIsFound) {
  SynthFile f;
  // Header at 96 (16 + 24 bytes) -> block at 136 holding the layout -> leaf -> two chunks.
  const uint64_t block = 96 + 16 + 24, block_len = SynthFile::Layout(0).size();
  const uint64_t leaf = block + block_len;
  const uint64_t data = leaf + SynthFile::Leaf(2, 0).size();
  f.Append(SynthFile::Header(SynthFile::Continuation(block, block_len)));
  ASSERT_EQ(f.Append(SynthFile::Layout(leaf)), block);
  ASSERT_EQ(f.Append(SynthFile::Leaf(2, data)), leaf);
  f.Append(std::string(24, '\0'));
  auto r = f.Walk(2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[1].offset, data + 12);
  EXPECT_EQ((*r)[1].size, 12u);
}

TEST(ChunkIndexSynthetic, ContinuationLoopOrChainIsAnError) {
  SynthFile f;
  const uint64_t block = 96 + 16 + 24;
  f.Append(SynthFile::Header(SynthFile::Continuation(block, 24)));
  f.Append(SynthFile::Continuation(block, 24));  // the block continues into itself
  auto r = f.Walk(1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("loops back"), std::string::npos) << r.status().ToString();

  SynthFile chain;  // 300 blocks, each continuing into the next: more than kMaxHeaderBlocks
  uint64_t next = 96 + 16 + 24;
  chain.Append(SynthFile::Header(SynthFile::Continuation(next, 24)));
  for (int i = 0; i < 300; ++i) chain.Append(SynthFile::Continuation(next += 24, 24));
  r = chain.Walk(1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 256"), std::string::npos) << r.status().ToString();
}

TEST(ChunkIndexSynthetic, MessagePastItsBlockOrTwoLayoutsAreErrors) {
  SynthFile f;
  std::string m = SynthFile::Layout(0);
  m[2] = static_cast<char>(0xff);  // size 255+: past the header's block
  f.Append(SynthFile::Header(m));
  auto r = f.Walk(1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("runs past its block"), std::string::npos)
      << r.status().ToString();

  SynthFile two;
  two.Append(SynthFile::Header(SynthFile::Layout(0) + SynthFile::Layout(0)));
  r = two.Walk(1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("second layout message"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace mm::reader::internal
