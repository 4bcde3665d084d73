// chunk_index.h: a chunked HDF5 dataset's chunk index, read in one pass straight from the file's
// bytes. Private to mm_reader (and its tests).
//
// Why: HDF5 1.10.8's per-chunk queries are linear in the number of chunks on every call
// (H5Dget_chunk_info_by_coord and H5Dget_chunk_info iterate over the whole index until they
// meet the chunk asked for), so asking once per sample makes opening a shard quadratic:
// measured here, 10k chunks 0.8 s, 50k 28 s, 100k over 100 s. Its public API has no one-pass
// iteration (H5Dchunk_iter arrived in 1.14). So the reader walks the index itself.
//
// What is read (HDF5 File Format Specification version 3.0):
//   - the superblock (h5_bytes.h; signature "\x89HDF\r\n\x1a\n" at 0, 512, 1024, ...): the
//     sizes of file addresses and lengths and the base address, checked against HDF5's;
//   - the dataset's object header (object_header.h; version 1, or "OHDR" version 2) and its
//     continuation blocks, for the Data Layout message (type 0x0008), version 1, 2 or 3, class
//     chunked: the chunk dimensions and the address of the chunk index, a version 1 B-tree;
//   - the B-tree's nodes ("TREE", node type 1 = raw data chunks): per entry a key (stored size
//     u32, filter mask u32, one u64 offset per dimension, the last for the element size) and a
//     child address: a lower node, or at level 0 the chunk itself.
// A layout message of version 4 (HDF5 1.10's newer indexes: fixed array, extensible array,
// version 2 B-tree, single chunk, implicit; written under libver v110 or later) is Unsupported.
//
// Safety on hostile bytes: every read is bounds-checked against the file; every address is
// checked before use; object header blocks and B-tree nodes are each visited at most once (a
// cycle is an error, not a loop); a node's level must be its parent's minus one and at most
// kMaxBtreeLevel; a node holds 1..2K entries (K from HDF5, H5Pget_istore_k) that fit in the
// file; every chunk coordinate in [0, num_chunks) must be met exactly once. Work and memory are
// linear in the file's size: no node is read twice and the result holds num_chunks records,
// num_chunks having been checked against the file's size first.
#pragma once

#include <cstdint>
#include <vector>

#include "mm/status.h"

namespace mm::reader::internal {

/// What HDF5 said about the file and the dataset. The walk starts from `header_address` and
/// checks its own reading of the superblock against the rest.
struct ChunkIndexHints {
  uint64_t header_address = 0;  // the dataset's object header (H5Oget_info2), base-relative
  unsigned sizeof_addr = 8;     // H5Pget_sizes of the file creation property list, bytes
  unsigned sizeof_size = 8;
  unsigned btree_k = 32;   // H5Pget_istore_k: a node holds at most 2K entries
  uint64_t userblock = 0;  // H5Pget_userblock, bytes: where the superblock must be
};

/// The dataset as HDF5 describes it: chunked along dimension 0 only, each chunk spanning every
/// other dimension whole (so every other chunk offset is 0).
struct ChunkGrid {
  std::vector<uint32_t> chunk_dims;  // [rank] elements
  uint32_t element_size = 1;         // bytes
  int64_t num_chunks = 0;            // chunks along dimension 0
};

/// One chunk as the index records it.
struct ChunkRecord {
  uint64_t offset = 0;       // absolute file offset of its first stored byte
  uint32_t size = 0;         // stored bytes
  uint32_t filter_mask = 0;  // bit i set: filter i of the pipeline was not applied
};

/// The deepest B-tree level accepted. A v1 B-tree of raw data chunks with K >= 1 and 2^63
/// chunks is shallower; real shards have level 1 or 2.
inline constexpr int kMaxBtreeLevel = 48;

/// Reads the chunk index of the dataset described by `hints` and `grid` from `file`
/// (`file_size` bytes, the whole file). Returns one record per chunk, record i for the chunk at
/// dimension-0 offset i * chunk_dims[0].
/// Errors: Corruption (names the structure and its file offset: no superblock, a superblock
/// disagreeing with HDF5, a malformed object header, no or two layout messages, chunk
/// dimensions other than HDF5's, a B-tree node out of the file, of the wrong type or level, with
/// too many entries, reached twice; a chunk offset outside the grid, met twice or never);
/// Unsupported (a version 4 layout message, i.e. another chunk index type).
Result<std::vector<ChunkRecord>> ReadChunkIndex(const uint8_t* file, uint64_t file_size,
                                                const ChunkIndexHints& hints,
                                                const ChunkGrid& grid);

}  // namespace mm::reader::internal
