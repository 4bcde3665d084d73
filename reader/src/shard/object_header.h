// object_header.h: a dataset's Data Layout message, found in its object header read straight
// from the file's bytes (h5_bytes.h). Private to mm_reader. Field layouts: HDF5 File Format
// Specification version 3.0, sections IV.A.1 (object header prefixes and message headers),
// IV.A.2.i (Data Layout message), IV.A.2.q (Object Header Continuation message).
//
// Reads version 1 object headers and version 2 ("OHDR") ones, follows continuation blocks
// (version 2: "OCHK"), each block at most once and at most kMaxHeaderBlocks of them; every
// message must lie inside its block. The checksums of version 2 blocks are not verified (HDF5
// verified them when it opened the dataset; the chunk index walk is cross-checked against HDF5).
#pragma once

#include <cstdint>
#include <vector>

#include "mm/status.h"
#include "shard/h5_bytes.h"

namespace mm::reader::internal {

/// Object header blocks (the first and its continuations) followed, at most.
inline constexpr int kMaxHeaderBlocks = 256;
/// Dimensions of a chunk in a layout message, the element size included (H5O_LAYOUT_NDIMS).
inline constexpr unsigned kMaxLayoutDims = 33;

/// A chunked dataset's Data Layout message, version 1 to 3.
struct ChunkedLayout {
  std::vector<uint32_t> dims;  // chunk dimensions, the last one the element size
  uint64_t btree = 0;          // base-relative address of the version 1 B-tree chunk index
};

/// The one Data Layout message of the object header at base-relative `header_address`.
/// Errors: Corruption (the header outside the file or malformed, a continuation loop, none or
/// two layout messages, a dataset not chunked); Unsupported (a version 4 layout message: one of
/// HDF5 1.10's newer chunk index types, named in the message).
Result<ChunkedLayout> FindChunkedLayout(const H5Bytes& f, uint64_t header_address);

}  // namespace mm::reader::internal
