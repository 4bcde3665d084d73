// shard.h: one opened shard file: its chunk table learned once (the chunk index walk, checked
// against HDF5), its tables read in place from a read-only mapping. Private to mm_reader.
//
// Open runs named stages (shard.cc), each of which must pass before the next:
//   1. Init: the image size fits this reader;
//   2. MapFile: a regular file whose size equals index.json's "bytes" (a truncated shard fails
//      here, before HDF5 parses anything), mapped read-only;
//   3. VerifyChecksum (optional): the XXH3-64 of the whole file equals index.json's "xxh3_64";
//   4. QueryShardLayout (shard_layout.h): codec jpeg (format 2): image_bytes uint8 [B]
//      contiguous, image_offsets int64 [N + 1] from 0 strictly increasing to B (each range a
//      "chunk" inside the file), image_size int32 [N, 2] within the set's rules; codec raw:
//      `images` is uint8 [N, H, W, 3], chunked [1, H, W, 3],
//      filter zstd (32015) or none, with N, H, W as the index says, and exactly N chunks, each
//      found by the chunk index walk (chunk_index.h) and checked against HDF5; every chunk's
//      [file offset, offset + stored size) lies inside the file; a raw chunk holds exactly
//      H*W*3 bytes, a zstd chunk no more than ZSTD_compressBound(H*W*3); keys (fixed-length
//      strings), caption_offsets (int64 [N+1]), token_offsets (int64 [C+1]) and tokens
//      (int32 [T]) have those types and lengths;
//   5. PlaceTables: each table lies inside the file; views into the mapping;
//   6. CheckTables: the set rules (mm/internal/set_rules.h) over the mapped tables: the offsets
//      start at 0, increase (strictly for captions) and end at C and T, the index's counts; no
//      caption is longer than max_tokens; every token id is in [0, vocab_size).
// Each zstd frame's content size is checked when the chunk is read (that touches its bytes).
//
// Memory: 12 bytes of anonymous memory per sample (the chunk table: offset and size); keys,
// offsets and tokens stay in the mapping. A table that is not contiguous in the file (not
// what mmpack writes) is read into memory at Open instead. Thread-safe after Open.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mm/reader.h"
#include "mm/status.h"
#include "shard/mapped_file.h"
#include "shard/shard_layout.h"

namespace mm::reader::internal {

class Shard {
 public:
  /// Opens `path` (the shard `entry` of the set `info`) and checks it as above.
  /// Errors: NotFound, IOError, Corruption (naming the file and, for chunk errors, the sample),
  /// Unsupported (a filter other than zstd or none; a format version outside the readable range).
  /// With options.isolate_hdf5, the HDF5 part runs in a forked child process, so that a crash
  /// inside libhdf5 on hostile metadata becomes a Corruption error instead of killing the caller;
  /// a child that does not answer within kHdf5QueryTimeoutMs is killed (Corruption too).
  static Result<std::unique_ptr<Shard>> Open(const std::string& path, const ShardEntry& entry,
                                             const SetInfo& info, const OpenOptions& options);

  static constexpr uint32_t kRawFlag = kRawChunkFlag;  // chunk stored without the filter
  static constexpr uint32_t kSizeMask = kChunkSizeMask;

  const std::string& name() const { return name_; }
  int64_t num_samples() const { return num_samples_; }
  int64_t num_captions() const { return num_captions_; }

  // Values read from the mapping. Open checked every table, but the file may change under the
  // reader afterwards (zeroed, rewritten in place, or truncated: its pages then read as zeros,
  // mapping_guard.h), so each value is checked again where it is used; one out of bounds marks
  // the shard inconsistent (CheckIntact reports it, naming the shard) and a harmless value
  // stands in for it: no division by zero, no read outside the tables.

  /// Index of sample `s`'s first caption among the shard's captions, in [0, C].
  int64_t CaptionBegin(int64_t s) const;
  /// Captions of sample `s`, >= 1 (1 when the mapping is inconsistent).
  int NumCaptions(int64_t s) const;
  /// The sample that caption `c` (0 <= c < num_captions()) belongs to, in [0, N): binary search
  /// over the mapped caption_offsets.
  int64_t SampleOfCaption(int64_t c) const;
  /// Token ids of caption `c` of the shard (not of a sample), each in [0, vocab_size), at most
  /// max_tokens of them (empty when `c` or the mapping is out of bounds).
  Span<const int32_t> CaptionTokens(int64_t c) const;
  /// Marks the shard inconsistent (a value read from it broke the format's bounds).
  void MarkInconsistent() const { inconsistent_.store(true, std::memory_order_relaxed); }
  /// OK, or Corruption naming the shard when its file changed while mapped: a page past its
  /// end was touched (truncated) or a value read from it broke the format's bounds; what was
  /// read from it since must not be used. One atomic load or two when intact.
  Status CheckIntact() const;
  std::string_view Key(int64_t s) const {
    const char* p = reinterpret_cast<const char*>(keys_) + s * key_size_;
    return std::string_view(p, strnlen(p, key_size_));
  }
  int64_t StoredBytes(int64_t s) const { return chunk_size_[s] & kSizeMask; }
  /// Codec jpeg (format 2): chunks are JPEGs and each sample has its own size.
  bool jpeg() const { return jpeg_; }
  /// Width and height of sample `s`'s stored image, pixels.
  void ImageSize(int64_t s, int* width, int* height) const {
    if (jpeg_) {
      *width = image_size_[2 * s];
      *height = image_size_[2 * s + 1];
    } else {
      *width = width_;
      *height = height_;
    }
  }

  /// Decodes sample `s` into dst (ImageSize's width * height * 3 bytes).
  /// Errors: Corruption naming shard and sample.
  Status ReadImage(int64_t s, uint8_t* dst) const;

  /// The raw stored bytes of sample s's chunk (a view into the mapping), and whether they are
  /// zstd-compressed. For benchmarks and tools.
  std::string_view StoredChunk(int64_t s, bool* compressed) const;

 private:
  Shard() = default;
  // The stages of Open, in order (each a screenful; shard.cc).
  Status Init(const ShardEntry& entry, const SetInfo& info);
  Status MapFile(const std::string& path, const ShardEntry& entry);
  Status VerifyChecksum(const ShardEntry& entry) const;
  void TakeLayout(ShardLayout* layout);
  Status PlaceTables(ShardLayout* layout);
  Status CheckTables(const ShardEntry& entry, const SetInfo& info) const;
  static int64_t LoadI64(const uint8_t* table, int64_t i) {
    int64_t v;
    std::memcpy(&v, table + i * 8, 8);  // tables need not be 8-byte aligned in the file
    return v;
  }
  std::string name_;
  std::string path_;  // the file opened (for CheckIntact's message)
  std::shared_ptr<const MappedFile> file_;
  int64_t num_tokens_ = 0;  // index.json's T
  int max_tokens_ = 0;      // longest caption, in tokens
  int vocab_size_ = 0;      // token ids lie in [0, vocab_size_)
  int64_t file_bytes_ = 0;  // index.json's size of the file
  mutable std::atomic<bool> inconsistent_{false};
  int64_t num_samples_ = 0;
  int64_t num_captions_ = 0;
  size_t image_bytes_ = 0;
  int width_ = 0, height_ = 0;  // the set's image size
  bool jpeg_ = false;
  std::vector<int32_t> image_size_;     // [N, 2] codec jpeg: [width, height]
  std::vector<uint64_t> chunk_offset_;  // [N] file offset of each image chunk
  std::vector<uint32_t> chunk_size_;    // [N] stored bytes | kRawFlag
  const uint8_t* keys_ = nullptr;       // [N, key_size_] NUL-padded
  size_t key_size_ = 0;
  const uint8_t* caption_offsets_ = nullptr;  // [N + 1] int64
  const uint8_t* token_offsets_ = nullptr;    // [C + 1] int64
  const int32_t* tokens_ = nullptr;           // [T]
  std::vector<uint8_t> owned_[kNumTables];    // tables read into memory (fallback)
};

}  // namespace mm::reader::internal
