// shard_writer.h: the one HDF5 writer stage of `mmpack build` (formats 1 and 2,
// schemas/FORMAT.md).
//
// Samples arrive in input order, already resized and with their image chunk already
// compressed (CompressImage, called in the worker threads). The writer appends each chunk with
// HDF5's direct chunk write, buffers the shard's small tables (keys, offsets, tokens,
// captions) in memory, and on closing a shard writes the tables, flushes, closes and renames
// "shard-000007.h5.tmp" to "shard-000007.h5". A shard closes when its bytes reach
// shard_size or its samples reach samples_per_shard. HDF5 object timestamps are off, so the
// same samples in the same order give byte-identical files.
//
// Not thread-safe: one thread calls Add and Finish.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mm/format.h"
#include "mm/metadata.h"
#include "mm/reader.h"
#include "mm/status.h"

namespace mm::pack {

/// A sample ready to write: what the worker threads produce.
struct EncodedSample {
  std::string key;                   // unique in the set, UTF-8
  std::string source;                // image path as the input gave it, UTF-8
  std::vector<uint8_t> image_chunk;  // CompressImage output ([H, W, 3] uint8 inside), or a JPEG
  int32_t stored_width = 0;          // codec jpeg: the JPEG's width and height, pixels
  int32_t stored_height = 0;
  int32_t original_width = 0;        // pixels, after EXIF orientation
  int32_t original_height = 0;
  int32_t valid_box[4] = {0, 0, 0, 0};              // x, y, width, height in pixels
  std::vector<std::string> captions;                // >= 1, UTF-8, as in the input
  std::vector<std::vector<int32_t>> tokens;         // one row per caption
  std::vector<mm::reader::MetadataValue> metadata;  // WriterOptions::metadata_fields' values
};

/// Default zstd level of image chunks, for `mmpack build` and the writer alike: -1, zstd's
/// first "fast" level (`zstd --fast=1`), not its usual 3. Decoded pixels barely compress
/// (raw/stored 1.11 at -1, 1.15 at 1, 1.20 at 3 on 300 expanded coco-cc images), while -1
/// compresses about twice as fast as 1 and decompresses about 2.7 times as fast, which every
/// training epoch pays (figures in schemas/FORMAT.md).
inline constexpr int kDefaultZstdLevel = -1;

struct WriterOptions {
  std::string output_dir;  // exists and is writable
  int image_width = 224;   // pixels
  int image_height = 224;
  format::ResizeMode resize_mode = format::ResizeMode::kCenterCrop;
  format::Codec compression = format::Codec::kZstd;  // zstd: filter 32015 (codec raw)
  int compression_level = kDefaultZstdLevel;
  // kJpeg (format 2): image_chunk is a JPEG, spooled to an unnamed file in output_dir while
  // the shard fills and written as image_bytes when it closes; compression must be kNone.
  format::ImageCodec image_codec = format::ImageCodec::kRaw;
  int jpeg_quality = 0;  // recorded in the shards' jpeg_quality attribute
  int max_size = 0;      // keep-ratio modes: the bound; recorded in max_size
  int64_t shard_size = int64_t{1} << 30;  // bytes
  int64_t samples_per_shard = 0;          // 0: no limit
  int64_t first_shard_index = 0;          // --append: the number of the first shard written
  std::string tokenizer_sha256;
  // Kept manifest fields (--keep-fields), written as metadata/<name> (schemas/FORMAT.md).
  std::vector<std::string> metadata_fields;
  // Refuse a key already added to the set (Add: InvalidArgument). It remembers every key's
  // 128-bit hash, so its memory grows with the set (about 50 bytes a sample); `mmpack build`,
  // whose ingest makes keys unique (ingest/keys.h), turns it off.
  bool check_unique_keys = true;
};

/// Compresses one [H, W, 3] uint8 image into the bytes of its HDF5 chunk: a zstd frame at
/// `level` for kZstd, the raw bytes for kNone. Thread-safe (per-thread context).
Result<std::vector<uint8_t>> CompressImage(const uint8_t* pixels, size_t bytes,
                                           format::Codec compression, int level);

class ShardWriter {
 public:
  /// Errors: InvalidArgument (bad options), IOError (output_dir not writable).
  static Result<std::unique_ptr<ShardWriter>> Create(const WriterOptions& options);
  virtual ~ShardWriter() = default;

  /// Appends one sample to the open shard (opening one if none), closing it when full.
  /// Errors: IOError, Internal (HDF5 failures, with HDF5's message).
  virtual Status Add(EncodedSample&& sample) = 0;

  /// Closes the open shard when `next` would not fit in it (Add would close it before adding
  /// `next`), so that the caller can act between two shards (the build's checkpoints,
  /// commands/build_resume.h). Nothing happens when it fits or no shard is open.
  /// Errors: as Add's.
  virtual Status CloseIfNoRoom(const EncodedSample& next) = 0;

  /// The shards closed so far, in order, as Finish lists them.
  virtual const std::vector<mm::reader::ShardEntry>& Closed() const = 0;

  /// Closes the last shard. Returns every shard written, as index.json lists them (file,
  /// samples, captions, tokens, bytes, xxh3_64).
  virtual Result<std::vector<mm::reader::ShardEntry>> Finish() = 0;
};

}  // namespace mm::pack
