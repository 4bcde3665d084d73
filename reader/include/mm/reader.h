// mm/reader.h: the mmpack shard reader's public API.
//
// A ShardSet is a set of shards opened from its index.json: each shard memory-mapped, each
// image chunk's (file offset, stored size) learned once through HDF5's chunk query, every
// offset and size checked against the file before the mapping is touched. After Open it is
// immutable and safe to read from any number of threads at once.
//
// A Loader turns a ShardSet into this rank's stream of batches: a deterministic permutation
// per (seed, epoch) over the whole set (or file order without shuffle), split across ranks so
// that each rank gets the same number of batches, decompressed by worker threads into a
// bounded pool of reusable batch buffers. Its LoaderState can be saved and restored to
// resume mid-epoch exactly, also under another world size.
//
// This header includes no HDF5, zstd, LibTorch or sentencepiece header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mm/span.h"
#include "mm/status.h"

namespace mm::reader {

/// One shard as index.json lists it.
struct ShardEntry {
  std::string file;       // file name, relative to the set's directory
  int64_t samples = 0;    // images in the shard
  int64_t captions = 0;   // captions (>= samples)
  int64_t tokens = 0;     // token ids in the shard
  int64_t bytes = 0;      // file size in bytes
  std::string xxh3_64;    // XXH3-64 of the whole file, 16 lowercase hex digits
};

/// What index.json says of the whole set.
struct SetInfo {
  std::string root;             // directory holding index.json
  int format_version = 0;
  int image_height = 0;         // pixels
  int image_width = 0;          // pixels
  int channels = 3;
  std::string resize_mode;      // "center-crop" | "pad" | "stretch"
  std::string compression;      // "zstd" | "none"
  int compression_level = 0;
  // Tokenizer (the ids the shards hold).
  int vocab_size = 0;
  int pad_id = 0;               // id used to pad token rows in batches
  int bos_id = -1;              // -1 when the model defines none
  int eos_id = -1;
  int unk_id = 0;
  int max_tokens = 0;           // longest caption in tokens, bos/eos included
  std::string tokenizer_sha256;
  std::vector<ShardEntry> shards;
  int64_t num_samples = 0;      // sum over shards
  int64_t num_captions = 0;
};

struct OpenOptions {
  /// Recompute every shard's XXH3-64 and compare with index.json (reads every byte).
  bool verify_checksums = false;
  /// false (default): ask HDF5 for each shard's layout in this process, under a process-wide
  /// mutex (one shard's query at a time); safe while other threads of the process use HDF5
  /// (Debian's libhdf5 is built thread-safe).
  /// true: ask in a short-lived child process made with fork(), one per shard, so that a crash
  /// inside libhdf5 on a hostile or damaged shard (HDF5 1.10 can segfault on fuzzed metadata)
  /// becomes a Corruption error instead of killing the caller. The parent re-checks the
  /// child's answer (chunk and table ranges inside the file, sizes) before using it.
  /// Do NOT use it while any other thread of the process may be inside HDF5 (mmpack's writer,
  /// h5py, the application's own HDF5 calls): the child inherits libhdf5's global lock held
  /// by that thread and blocks forever; the parent then gives up after 30 s per shard
  /// (kHdf5QueryTimeoutMs in reader/src/shard.h), kills the child and returns Corruption
  /// ("HDF5 metadata query timed out"). Cost: one fork per shard, about 22 ms per GB of the
  /// caller's resident memory (page-table copy) on top of the query itself: a 20 GB process
  /// opening 10,000 shards spends over an hour. Use it for untrusted shards in a small
  /// process (a validator), not in a large trainer.
  bool isolate_hdf5 = false;
};

/// An opened shard set. Immutable after Open; all const methods are thread-safe.
/// Memory: the shard files are mapped read-only (page cache, not anonymous memory); the
/// per-sample tables (keys, offsets) are read from the mapping in place.
class ShardSet {
 public:
  /// Opens `dir`/index.json and every shard it lists.
  /// Errors: NotFound (no index or shard file), Unsupported (format version outside
  /// [mm::format::kMinReadableVersion, kFormatVersion], named in the message), Corruption
  /// (index and shard disagree; a chunk or table lies outside the file; checksum mismatch),
  /// IOError (open/mmap failed).
  static Result<std::shared_ptr<ShardSet>> Open(const std::string& dir,
                                                const OpenOptions& options = {});
  virtual ~ShardSet() = default;

  virtual const SetInfo& info() const = 0;
  int64_t num_samples() const { return info().num_samples; }
  /// Bytes of one decoded image: image_height * image_width * 3.
  size_t image_bytes() const {
    return static_cast<size_t>(info().image_height) * info().image_width * info().channels;
  }

  /// Number of captions of global sample `i` (>= 1). Precondition: 0 <= i < num_samples().
  virtual int NumCaptions(int64_t i) const = 0;
  /// Token ids of caption `c` of sample `i`, a view into the mapping, valid while the set lives.
  virtual Span<const int32_t> Tokens(int64_t i, int c) const = 0;
  /// The sample's key (UTF-8), a view into the mapping.
  virtual std::string_view Key(int64_t i) const = 0;
  /// Shard file name and index within the shard of global sample `i`, for messages.
  virtual std::string Locate(int64_t i) const = 0;
  /// Stored (compressed) bytes of sample i's image chunk.
  virtual int64_t StoredImageBytes(int64_t i) const = 0;

  /// Decodes sample `i`'s image into `dst`, which holds image_bytes() bytes:
  /// [image_height, image_width, 3] uint8, row-major RGB.
  /// Thread-safe; uses a per-thread zstd context.
  /// Errors: Corruption naming the shard and sample (bad frame, wrong decoded size),
  /// OutOfRange.
  virtual Status ReadImage(int64_t i, uint8_t* dst) const = 0;
};

/// How captions become training pairs.
enum class CaptionMode {
  kRandomCaption,  // one item per image; its caption chosen per (seed, epoch, sample)
  kAllCaptions,    // one item per (image, caption) pair
};

/// Upper bounds of LoaderOptions::num_threads and prefetch_batches: beyond them a request is a
/// mistake (a flag typed wrong), not a configuration; Loader::Create refuses it.
inline constexpr int kMaxLoaderThreads = 256;
inline constexpr int kMaxPrefetchBatches = 256;

struct LoaderOptions {
  int batch_size = 32;           // per rank
  bool shuffle = true;           // false: file order
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  /// true: drop the tail that does not fill a global batch (world_size * batch_size).
  /// false: pad the last global batch by wrapping around to the epoch's first items (as
  /// torch's DistributedSampler pads), so every rank still gets equal, full batches.
  bool drop_last = true;
  CaptionMode caption_mode = CaptionMode::kRandomCaption;
  int num_threads = 2;           // decode threads, 1..kMaxLoaderThreads
  int prefetch_batches = 4;      // bounded queue of reusable batch buffers, 1..kMaxPrefetchBatches
  /// Load-time augmentation, seeded per (seed, epoch, sample):
  /// random crop: a random window of (1 - random_crop_scale) .. 1 of each side, resized back
  /// to the stored size by nearest-neighbour sampling; 0 = off.
  float random_crop_scale = 0.0f;
  bool horizontal_flip = false;  // flip with probability 1/2
};

/// One batch, owned by the loader's pool; returned to the pool when the last BatchPtr dies.
struct Batch {
  int size = 0;                    // B
  int height = 0, width = 0;       // pixels
  std::vector<uint8_t> images;     // [B, height, width, 3] uint8, contiguous
  int max_length = 0;              // L: longest caption in this batch, in tokens
  std::vector<int32_t> tokens;     // [B, L] int32, padded with the set's pad_id
  std::vector<int32_t> lengths;    // [B] tokens per row before padding
  std::vector<int64_t> indices;    // [B] global sample index
  std::vector<int32_t> caption;    // [B] which caption of the sample
  std::vector<std::string> keys;   // [B]
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;       // index of this batch among this rank's batches
};
using BatchPtr = std::shared_ptr<const Batch>;

/// Where a loader is: enough to continue exactly, on any world size.
struct LoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  /// Items of this epoch's global order already handed out, over all ranks.
  int64_t consumed = 0;
  int world_size = 1;              // world size when saved (informational)
  int batch_size = 0;              // per rank, when saved
  /// One-line JSON: {"seed":..,"epoch":..,"consumed":..,"world_size":..,"batch_size":..}.
  std::string ToJson() const;
  static Result<LoaderState> FromJson(std::string_view json);
};

/// This rank's batches. Not thread-safe: one consumer thread calls Next/Restore/StartEpoch;
/// the loader runs its own decode threads.
class Loader {
 public:
  /// Starts options.num_threads decode threads.
  /// Errors: InvalidArgument (batch_size < 1, rank outside [0, world_size), num_threads outside
  /// [1, kMaxLoaderThreads], prefetch_batches outside [1, kMaxPrefetchBatches], an empty set,
  /// drop_last with fewer items than one global batch); IOError when the system refuses a
  /// thread (a process or memory limit), naming which one.
  static Result<std::unique_ptr<Loader>> Create(std::shared_ptr<const ShardSet> set,
                                                const LoaderOptions& options);
  virtual ~Loader() = default;

  /// Items (images or pairs, per caption_mode) in one epoch's global order.
  virtual int64_t items_per_epoch() const = 0;
  /// Batches this rank gets in one full epoch (the same on every rank).
  virtual int64_t batches_per_epoch() const = 0;
  /// Starts (or restarts) epoch `epoch` from its beginning. The first Next() without a
  /// StartEpoch starts epoch 0.
  virtual void StartEpoch(int64_t epoch) = 0;
  /// The next batch of this rank, or nullptr at the end of the epoch.
  /// Errors: Corruption from the shard (naming shard and sample).
  virtual Result<BatchPtr> Next() = 0;
  /// State after the last batch Next() returned.
  virtual LoaderState state() const = 0;
  /// Continues from `state`: the same global order from item state.consumed on, split over
  /// this loader's world size. Errors: InvalidArgument (consumed past the epoch's end).
  virtual Status Restore(const LoaderState& state) = 0;
};

/// One element of an epoch's global order.
struct Item {
  int64_t sample;   // global sample index
  int32_t caption;  // which caption of the sample (always concrete)
};

/// The item at position `pos` (0 <= pos < items_per_epoch) of `epoch`'s global order under
/// `options` (shuffle, seed, caption_mode): the reference the Loader follows, computed in
/// O(1) memory (a seeded bijection over the items, not a stored permutation). Exposed for
/// tests and tools.
Item GlobalItem(const ShardSet& set, const LoaderOptions& options, int64_t epoch, int64_t pos);

}  // namespace mm::reader
