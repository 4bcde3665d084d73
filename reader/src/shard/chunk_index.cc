// chunk_index.cc: the walk of a chunked dataset's version 1 B-tree (see chunk_index.h). Node
// layout: HDF5 File Format Specification version 3.0, section III.A.1.
#include "shard/chunk_index.h"

#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "shard/h5_bytes.h"
#include "shard/object_header.h"

namespace mm::reader::internal {
namespace {

constexpr uint64_t kRawDataChunkNodes = 1;  // B-tree node type of a chunk index

// The B-tree walk: depth first from the root, each node at most once.
class BtreeWalk {
 public:
  BtreeWalk(const H5Bytes& w, const ChunkIndexHints& h, const ChunkGrid& g, const ChunkedLayout& l)
      : w_(w),
        grid_(g),
        ndims_(l.dims.size()),
        key_bytes_(8 + 8 * ndims_),
        max_entries_(2 * uint64_t{h.btree_k}) {}

  Result<std::vector<ChunkRecord>> Run(uint64_t root) {
    records_.resize(static_cast<size_t>(grid_.num_chunks));
    seen_.assign(static_cast<size_t>(grid_.num_chunks), false);
    if (w_.Undefined(root)) {
      if (grid_.num_chunks == 0) return std::move(records_);
      return Status::Corruption("no chunk index for " + std::to_string(grid_.num_chunks) +
                                " chunks");
    }
    pending_.push_back({root, -1});
    while (!pending_.empty()) {
      Node n = pending_.back();
      pending_.pop_back();
      MM_RETURN_NOT_OK(Visit(n));
    }
    for (int64_t i = 0; i < grid_.num_chunks; ++i) {
      if (!seen_[i]) return Status::Corruption("chunk " + std::to_string(i) + " is not indexed");
    }
    return std::move(records_);
  }

 private:
  struct Node {
    uint64_t addr;  // base-relative
    int level;      // what the parent implies; -1 for the root
  };

  // Checks node `n`'s header (in the file, not seen before, signature, type, level, entry
  // count that fits the file); *entries_at is where its entries begin.
  Status OpenNode(const Node& n, uint64_t* entries_at, int* level, uint64_t* entries) {
    const uint64_t header_bytes = 8 + 2 * uint64_t{w_.sb.sizeof_addr};
    uint64_t pos = 0;
    if (!w_.Locate(n.addr, header_bytes, &pos)) {
      return Status::Corruption("chunk B-tree node address " + std::to_string(n.addr) +
                                " lies outside the file");
    }
    if (!visited_.insert(pos).second) {
      return Status::Corruption("chunk B-tree node" + At(pos) + " is reached twice (a cycle)");
    }
    static constexpr char kTree[4] = {'T', 'R', 'E', 'E'};
    Cursor c = w_.Read(pos, w_.file_size);
    const bool signed_ok = c.Matches(kTree, 4);
    const uint64_t type = c.U(1);
    *level = static_cast<int>(c.U(1));
    *entries = c.U(2);
    c.Skip(2 * uint64_t{w_.sb.sizeof_addr});  // siblings
    if (!signed_ok || type != kRawDataChunkNodes) {
      return Status::Corruption("no chunk B-tree node" + At(pos));
    }
    if (*level > kMaxBtreeLevel || (n.level >= 0 && *level != n.level)) {
      return Status::Corruption(
          "chunk B-tree node" + At(pos) + " has level " + std::to_string(*level) + ", expected " +
          (n.level >= 0 ? std::to_string(n.level) : "at most " + std::to_string(kMaxBtreeLevel)));
    }
    // Entries (key, child) and the final key must lie in the file.
    if (*entries == 0 || *entries > max_entries_ || c.left() < key_bytes_ ||
        *entries > (c.left() - key_bytes_) / (key_bytes_ + w_.sb.sizeof_addr)) {
      return Status::Corruption("chunk B-tree node" + At(pos) + " claims " +
                                std::to_string(*entries) + " entries (at most " +
                                std::to_string(max_entries_) + ", in the file)");
    }
    *entries_at = c.pos();
    return Status::OK();
  }

  // A node's entries: lower nodes to visit, or at level 0 the chunks.
  Status Visit(const Node& n) {
    uint64_t at = 0, entries = 0;
    int level = 0;
    MM_RETURN_NOT_OK(OpenNode(n, &at, &level, &entries));
    Cursor c = w_.Read(at, w_.file_size);
    for (uint64_t e = 0; e < entries; ++e) {
      const uint64_t key = c.pos();
      const uint64_t size = c.U(4);
      const uint64_t mask = c.U(4);
      const uint64_t first = c.U(8);
      bool rest_zero = true;
      for (uint64_t d = 1; d < ndims_; ++d) rest_zero &= c.U(8) == 0;
      const uint64_t child = c.U(w_.sb.sizeof_addr);
      if (level > 0) {
        pending_.push_back({child, level - 1});
        continue;
      }
      MM_RETURN_NOT_OK(Record(key, first, rest_zero, child, size, mask));
    }
    return Status::OK();
  }

  // A leaf entry: the chunk at dimension-0 offset `first`.
  Status Record(uint64_t key, uint64_t first, bool rest_zero, uint64_t addr, uint64_t size,
                uint64_t mask) {
    const uint64_t step = grid_.chunk_dims[0];
    const uint64_t i = first / step;
    if (!rest_zero || first % step != 0 || i >= static_cast<uint64_t>(grid_.num_chunks)) {
      return Status::Corruption("chunk B-tree key" + At(key) + " names a chunk outside the " +
                                std::to_string(grid_.num_chunks) + "-chunk grid");
    }
    if (seen_[i]) {
      return Status::Corruption("chunk " + std::to_string(i) + " is indexed twice" + At(key));
    }
    seen_[i] = true;
    ChunkRecord& r = records_[i];
    // The chunk's bytes are the caller's to check; an address that would overflow becomes an
    // offset no file contains.
    r.offset = addr > std::numeric_limits<uint64_t>::max() - w_.sb.base
                   ? std::numeric_limits<uint64_t>::max()
                   : w_.sb.base + addr;
    r.size = static_cast<uint32_t>(size);
    r.filter_mask = static_cast<uint32_t>(mask);
    return Status::OK();
  }

  const H5Bytes& w_;
  const ChunkGrid& grid_;
  const uint64_t ndims_;
  const uint64_t key_bytes_;  // size u32, filter mask u32, one u64 offset per dimension
  const uint64_t max_entries_;
  std::vector<Node> pending_;
  std::unordered_set<uint64_t> visited_;
  std::vector<ChunkRecord> records_;
  std::vector<bool> seen_;
};

}  // namespace

Result<std::vector<ChunkRecord>> ReadChunkIndex(const uint8_t* file, uint64_t file_size,
                                                const ChunkIndexHints& hints,
                                                const ChunkGrid& grid) {
  const size_t rank = grid.chunk_dims.size();
  if (rank == 0 || rank + 1 > kMaxLayoutDims || grid.chunk_dims[0] == 0 || grid.num_chunks < 0 ||
      hints.btree_k == 0) {
    return Status::InvalidArgument("ReadChunkIndex: bad grid or hints");
  }
  // Each chunk needs a B-tree entry of at least a key (8 bytes + 8 per dimension) and an
  // address: a count the file cannot hold is refused before anything is allocated for it.
  const uint64_t min_entry = 8 + 8 * (rank + 1) + hints.sizeof_addr;
  if (static_cast<uint64_t>(grid.num_chunks) > file_size / min_entry) {
    return Status::Corruption(std::to_string(grid.num_chunks) + " chunks cannot be indexed in a " +
                              std::to_string(file_size) + "-byte file");
  }
  H5Bytes w{file, file_size, {}};
  MM_ASSIGN_OR_RETURN(
      w.sb, ReadSuperblock(file, file_size, hints.sizeof_addr, hints.sizeof_size, hints.userblock));
  MM_ASSIGN_OR_RETURN(ChunkedLayout layout, FindChunkedLayout(w, hints.header_address));
  std::vector<uint32_t> expected = grid.chunk_dims;
  expected.push_back(grid.element_size);
  if (layout.dims != expected) {
    std::string dims;
    for (uint32_t d : layout.dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    return Status::Corruption("layout message gives chunk dimensions [" + dims +
                              "], not HDF5's (element size last)");
  }
  return BtreeWalk(w, hints, grid, layout).Run(layout.btree);
}

}  // namespace mm::reader::internal
