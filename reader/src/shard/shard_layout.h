// shard_layout.h: where a shard's bytes lie: every image chunk's (file offset, stored size) and
// the place of each small table, learned once through HDF5 and the chunk index walk
// (chunk_index.h), in this process or in a short-lived forked child. Private to mm_reader.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "mm/reader.h"
#include "mm/status.h"
#include "shard/mapped_file.h"

namespace mm::reader::internal {

/// With OpenOptions::isolate_hdf5: how long the parent waits for the forked HDF5 query's
/// answer (one shard) before it kills the child and returns Corruption. A healthy query takes
/// milliseconds; a child stuck on a lock inherited from another thread never answers.
inline constexpr int kHdf5QueryTimeoutMs = 30000;

/// A shard whose `images` has another chunk index than the version 1 B-tree (a layout message
/// of version 4: not what mmpack writes) is read through HDF5's per-chunk query, which is linear
/// per chunk in HDF5 1.10.8 (quadratic in all); above this many chunks it is refused
/// (Unsupported) instead of taking minutes.
inline constexpr int64_t kMaxChunksQueriedOneByOne = 16384;

/// Test-only (tests/reader/shard_set_test.cc): the forked query's deadline, and a function the
/// child runs before its query (to make it crash or hang). Not for production use; not
/// thread-safe to change while an Open runs.
struct IsolatedQueryTestHooks {
  int timeout_ms = kHdf5QueryTimeoutMs;
  void (*in_child)() = nullptr;
};
IsolatedQueryTestHooks& IsolatedQueryHooksForTesting();

/// Bit of ShardLayout::chunk_size: the chunk is stored without the filter (raw pixels).
inline constexpr uint32_t kRawChunkFlag = 0x80000000u;
inline constexpr uint32_t kChunkSizeMask = 0x7fffffffu;

/// Where one of the small tables lies: in the file (contiguous) or read into memory.
struct TablePlace {
  uint64_t offset = 0;  // file offset, when bytes > 0 and !in_memory
  uint64_t bytes = 0;   // elements * element size
  bool in_memory = false;
};

/// The small tables, in the order of ShardLayout::places.
enum Table { kKeysTable = 0, kCaptionOffsetsTable, kTokenOffsetsTable, kTokensTable, kNumTables };

/// Everything Open learns through HDF5.
struct ShardLayout {
  bool compressed = false;             // images has the zstd filter
  // Codec jpeg (format 2): chunk_offset/chunk_size give each sample's JPEG bytes inside
  // image_bytes (flagged kRawChunkFlag: no filter), and image_size its [width, height].
  bool jpeg = false;
  std::vector<int32_t> image_size;     // [N, 2] codec jpeg only
  std::vector<uint64_t> chunk_offset;  // [N] file offset of each image chunk
  std::vector<uint32_t> chunk_size;    // [N] stored bytes | kRawChunkFlag
  TablePlace places[kNumTables];
  size_t key_size = 0;                     // bytes per key (fixed-length strings)
  std::vector<uint8_t> owned[kNumTables];  // tables read through HDF5 (not contiguous)
};

/// What a query needs to know of the shard.
struct ShardQuery {
  std::string path;  // the shard file
  std::string name;  // its name in messages ("shard-000003.h5")
  const ShardEntry* entry = nullptr;
  const SetInfo* info = nullptr;
  const MappedFile* file = nullptr;  // the file, mapped (the chunk index is read from it)
  size_t image_bytes = 0;            // H * W * 3
  bool jpeg = false;                 // codec jpeg: image_bytes / image_offsets / image_size
};

/// Checks one chunk's (file offset, stored size) against the mapped file and the image size:
/// inside the file, not empty; `raw` (stored without the filter): exactly image_bytes; else at
/// most ZSTD_compressBound(image_bytes). A jpeg shard's ranges: inside the file, not empty. Errors: Corruption naming the shard and sample `i`.
Status CheckChunk(const ShardQuery& q, int64_t i, uint64_t offset, uint64_t size, bool raw);

/// Learns the shard's layout through HDF5 and the chunk index walk, in this process under
/// Hdf5Mutex(), or with options.isolate_hdf5 in a forked child whose answer is re-checked.
/// Checks the images dataset (uint8 [N, H, W, 3], chunked [1, H, W, 3], filter zstd or none as
/// index.json says, N chunks), every chunk (CheckChunk, and its stored size against HDF5's), and
/// the tables' types and lengths. HDF5 is closed when it returns.
/// Errors: Corruption (naming the shard, and the sample for a chunk), Unsupported (another
/// filter; a user block; another chunk index over kMaxChunksQueriedOneByOne chunks).
Result<ShardLayout> QueryShardLayout(const ShardQuery& q, const OpenOptions& options);

/// The reader calls HDF5 only while holding this mutex (one shard's query at a time), which
/// keeps concurrent ShardSet::Open calls safe whatever libhdf5's build.
std::mutex& Hdf5Mutex();

/// The query itself, in this process. The caller holds Hdf5Mutex() (or is the forked child).
Status QueryLayout(const ShardQuery& q, ShardLayout* out);

/// QueryLayout in a forked child, its answer re-checked (isolated_query.cc).
Status QueryLayoutIsolated(const ShardQuery& q, ShardLayout* out);

}  // namespace mm::reader::internal
