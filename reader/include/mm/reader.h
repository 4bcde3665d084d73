// mm/reader.h: the mmpack shard reader's public API.
//
// A ShardSet is a set of shards opened from its index.json: each shard memory-mapped, each
// image chunk's (file offset, stored size) learned once through HDF5's chunk query, every
// offset and size checked against the file before the mapping is touched. After Open it is
// immutable and safe to read from any number of threads at once.
//
// A Loader turns a ShardSet into this rank's stream of batches: a deterministic permutation
// per (seed, epoch) over the whole set (or file order without shuffle), split across ranks so
// that each rank gets the same number of batches (or, for exact evaluation, each item exactly
// once: LoaderOptions::even_batches), decompressed by worker threads into a bounded pool of
// reusable batch buffers. Its LoaderState can be saved and restored to
// resume mid-epoch exactly, also under another world size.
//
// This header includes no HDF5, zstd, LibTorch or sentencepiece header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mm/format.h"
#include "mm/span.h"
#include "mm/status.h"

namespace mm::reader {

/// One shard as index.json lists it.
struct ShardEntry {
  std::string file;      // file name, relative to the set's directory
  int64_t samples = 0;   // images in the shard
  int64_t captions = 0;  // captions (>= samples)
  int64_t tokens = 0;    // token ids in the shard
  int64_t bytes = 0;     // file size in bytes
  std::string xxh3_64;   // XXH3-64 of the whole file, 16 lowercase hex digits
};

/// What index.json says of the whole set.
struct SetInfo {
  std::string root;  // directory holding index.json
  int format_version = 0;
  // Pixels. Every image's size in the fixed-size modes; in the keep-ratio modes (each image at
  // its own aspect ratio, ImageSize(i)) both are max_size: the size a Loader outputs by default.
  int image_height = 0;
  int image_width = 0;
  int channels = 3;
  // How images were fitted (index.json "image.resize_mode"). nullopt: index.json names no mode
  // this reader knows (a format 1 set may omit it or name another: its pixels are what they
  // are); a jpeg set's is always known (ShardSet::Open checks it).
  std::optional<mm::format::ResizeMode> resize_mode;
  // How images are stored (index.json "image.codec", format 2): raw pixels, or JPEG bytes
  // decoded by the Loader's threads. Raw sets are format version 1.
  mm::format::ImageCodec image_codec = mm::format::ImageCodec::kRaw;
  int jpeg_quality = 0;  // codec jpeg: libjpeg quality 1..100; 0 otherwise
  int max_size = 0;      // keep-ratio modes: the bound of the shorter / longer side; 0 otherwise
  // Raw pixels' HDF5 filter (index.json "compression.codec"; jpeg sets: kNone).
  mm::format::Codec compression = mm::format::Codec::kNone;
  int compression_level = 0;
  // Tokenizer (the ids the shards hold). has_tokenizer false: built with `--tokenizer none`
  // (index.json "tokenizer": null): captions are text only, every token table is empty, the
  // ids below are 0 and batches carry the caption text (Batch::texts) instead of ids.
  bool has_tokenizer = true;
  int vocab_size = 0;
  int pad_id = 0;   // id used to pad token rows in batches
  int bos_id = -1;  // -1 when the model defines none
  int eos_id = -1;
  int unk_id = 0;
  int max_tokens = 0;  // longest caption in tokens, bos/eos included
  std::string tokenizer_sha256;
  double unk_rate = -1;  // fraction of stored token ids that are unk_id; -1: not recorded
  // Text normalisation applied to captions before tokenizing (index.json "text"); the stored
  // caption text is always the input's bytes.
  bool text_lowercase = false;
  std::string text_normalize = "none";  // "none" | "nfkc"
  // Manifest fields kept per sample (`--keep-fields`, index.json "metadata.fields"), in their
  // stored order; each is the shard dataset metadata/<name>. Read with SampleText::Metadata.
  std::vector<std::string> metadata_fields;
  std::vector<ShardEntry> shards;
  int64_t num_samples = 0;  // sum over shards
  int64_t num_captions = 0;
};

/// How a remote set (s3://, http://, https://) is fetched and cached. Ignored for local sets.
struct RemoteOptions {
  /// Cache directory; several processes may share it (file locks). Empty: $XDG_CACHE_HOME/mmpack,
  /// else $HOME/.cache/mmpack.
  std::string cache_dir;
  /// Bytes the cache directory may hold (shards and downloads in progress, all sets in it
  /// together); 0: no limit. Least recently used shards are evicted; a pinned one never is.
  int64_t cache_limit = 0;
  /// Tries per request (1: no retry). Timeouts, connection errors, HTTP 5xx, 408 and 429 are
  /// retried after initial_backoff_ms * 2^k (at most max_backoff_ms, jittered down to half).
  int max_attempts = 5;
  int initial_backoff_ms = 200;
  int max_backoff_ms = 10000;
  int connect_timeout_s = 10;
  /// A transfer slower than 1 KiB/s for this long is abandoned (and retried).
  int stall_timeout_s = 30;
  /// Shards a Loader downloads at once, ahead of the order it reads them in.
  int download_threads = 2;
  /// Longest wait, in seconds, for cache space that other processes' pinned shards hold before
  /// a pin fails (IOError naming the cache, its limit and what is pinned).
  int cache_wait_s = 600;
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
  /// (kHdf5QueryTimeoutMs), kills the child and returns Corruption
  /// ("HDF5 metadata query timed out"). Cost: one fork per shard, about 22 ms per GB of the
  /// caller's resident memory (page-table copy) on top of the query itself: a 20 GB process
  /// opening 10,000 shards spends over an hour. Use it for untrusted shards in a small
  /// process (a validator), not in a large trainer.
  bool isolate_hdf5 = false;
  /// Remote sets only: the local cache and the transport.
  RemoteOptions remote;
};

/// Keeps one shard of a remote set resident (downloaded into the cache, mapped, never evicted)
/// while it, or a copy of it, lives. Copies share the pin. An empty pin (local sets, or
/// default-constructed) holds nothing. Thread-safe to copy and destroy from any thread.
class ShardPin {
 public:
  ShardPin() = default;
  explicit ShardPin(std::shared_ptr<const void> hold) : hold_(std::move(hold)) {}
  bool empty() const { return hold_ == nullptr; }

 private:
  std::shared_ptr<const void> hold_;
};

/// What a remote set's cache did in this process (zeros for a local set).
struct CacheStats {
  int64_t downloads = 0;         // shard files fetched (a retry within one fetch counts once)
  int64_t downloaded_bytes = 0;  // body bytes received for shards, every try included
  int64_t hits = 0;              // pins served by a file already in the cache
  int64_t evictions = 0;         // files this process removed to make room
  int64_t peak_bytes = 0;        // most bytes the cache directory held, seen at a reservation
};

/// One set of what ShardSet::Open opened: each set of a mixture in the mixture's order, or the
/// single set (reader/README.md, "Several sets by weight").
struct MixtureSet {
  std::string location;       // as the mixture names it (a JSON file's relative paths resolved)
  double weight = 0;          // > 0 in a weighted mixture; 0: concatenated at its natural size
  int64_t first_sample = 0;   // global index of its first sample: its samples are
                              // [first_sample, first_sample + info.num_samples)
  int64_t epoch_samples = 0;  // items a Loader's epoch draws from it (caption_mode random)
  SetInfo info;               // its own index.json (root: its location)
};

namespace internal {
class ShardSetImpl;  // reader/src/set/shard_set_impl.h
}  // namespace internal

/// An opened shard set. Immutable after Open; all const methods are thread-safe.
///
/// Local sets (a directory): every shard is mapped at Open; every method works on any sample,
/// and views (Tokens, Key) are valid while the set lives.
///
/// Remote sets (s3://, http://, https://, or a mixture holding one): only index.json is read
/// at Open. A shard is resident (downloaded into the cache, checked against index.json's
/// XXH3-64, then opened and checked exactly as a local shard) only while pinned: PinShard /
/// PinSample. NumCaptions, Tokens, Key, StoredImageBytes and ReadImage need the sample's shard
/// pinned (the Loader pins the shards of the window it reads); their views are valid while the
/// pin lives. Calling them on an unpinned remote shard is a programmer error: the process
/// aborts with a message naming the sample. info(), num_samples(), Locate() and the shard
/// table need no pin.
///
/// Memory: the shard files are mapped read-only (page cache, not anonymous memory); the
/// per-sample tables (keys, offsets) are read from the mapping in place.
///
/// One concrete class over a private implementation (pimpl, as Arrow's ReadRangeCache): a
/// single set, a remote one and a mixture are all one internal::ShardSetImpl, whose parts
/// (reader/src/set/shard_set_impl.h) are the sets opened. Not meant to be derived from.
class ShardSet {
 public:
  /// Opens the set at `location`:
  ///  - a directory: `location`/index.json and every shard it lists;
  ///  - "s3://BUCKET/PREFIX", "http[s]://HOST/PATH": a remote set, fetched through the cache
  ///    of options.remote; S3 credentials, region and endpoint from the environment
  ///    (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or
  ///    AWS_DEFAULT_REGION, AWS_ENDPOINT_URL with path-style addressing);
  ///  - a mixture of sets drawn by weight: "A:0.7,B:0.3" or a JSON file
  ///    {"sets": [{"path": A, "weight": 0.7}, ...], "epoch_size": N}; see reader/README.md
  ///    ("Several sets by weight") for how an epoch's size and each set's share are computed.
  /// Errors: NotFound (no index or shard file; HTTP 404), Unsupported (format version outside
  /// [mm::format::kMinReadableVersion, kFormatVersion], named in the message), Corruption
  /// (index and shard disagree; a chunk or table lies outside the file; checksum mismatch),
  /// IOError (open/mmap failed; a request failed after its retries, naming the URL),
  /// InvalidArgument (a malformed location or mixture; sets of a mixture that differ in
  /// tokenizer). The sets of a mixture may be stored at different image sizes (info() then
  /// gives the first set's, ImageSize(i) each sample's); a Loader over them needs an output
  /// size, so that every batch has one shape (Loader::Create).
  static Result<std::shared_ptr<ShardSet>> Open(const std::string& location,
                                                const OpenOptions& options = {});
  ~ShardSet();
  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  const SetInfo& info() const;
  int64_t num_samples() const { return info().num_samples; }
  /// Bytes of one image of the set's size: image_height * image_width * 3 (in the keep-ratio
  /// modes the Loader's default output, not each stored image: ImageSize).
  size_t image_bytes() const {
    return static_cast<size_t>(info().image_height) * info().image_width * info().channels;
  }

  /// The sets opened: a mixture's in its order (Batch::set_index indexes this), else one. Global
  /// sample indices run through the sets one after the other, whatever the weights.
  const std::vector<MixtureSet>& sets() const;
  /// Which of sets() holds global sample `i`. Precondition: 0 <= i < num_samples().
  int SetOfSample(int64_t i) const;

  /// True when some shard is fetched through the cache (see the class comment).
  bool remote() const;
  /// Shards of the set: info().shards in order (a mixture's sets one after the other).
  size_t num_shards() const { return info().shards.size(); }
  /// The shard holding global sample `i`. Precondition: 0 <= i < num_samples().
  size_t ShardOfSample(int64_t i) const;
  /// Makes shard `k` resident and keeps it so while the pin lives (see the class comment):
  /// downloads it into the cache unless some process already did, waiting for cache space
  /// other pins hold (at most RemoteOptions::cache_wait_s). A local shard: an empty pin.
  /// Errors: OutOfRange (k >= num_shards()); for a remote shard, those of the download
  /// (NotFound, IOError naming the URL after the retries, Corruption: XXH3-64 or size unlike
  /// index.json's), of the cache (IOError: no room within the limit) and of opening the shard.
  Result<ShardPin> PinShard(size_t k) const;
  Result<ShardPin> PinSample(int64_t i) const { return PinShard(ShardOfSample(i)); }
  /// What the cache did so far (zeros for a local set).
  CacheStats cache_stats() const;

  /// Number of captions of global sample `i` (>= 1). Precondition: 0 <= i < num_samples().
  int NumCaptions(int64_t i) const;
  /// Token ids of caption `c` of sample `i`, a view into the mapping, valid while the set
  /// lives (remote: while the shard is pinned).
  Span<const int32_t> Tokens(int64_t i, int c) const;
  /// The sample's key (UTF-8), a view into the mapping (lifetime as Tokens).
  std::string_view Key(int64_t i) const;
  /// Shard file name and index within the shard of global sample `i`, for messages.
  std::string Locate(int64_t i) const;
  /// Stored bytes of sample i's image: its compressed chunk (codec raw) or its JPEG.
  int64_t StoredImageBytes(int64_t i) const;
  /// Width and height of sample i's stored image, pixels: the set's image size, except in the
  /// keep-ratio modes (the shard's image_size table). Precondition as Key.
  void ImageSize(int64_t i, int* width, int* height) const;

  /// OK, or Corruption naming the shard of sample `i` when its file changed while mapped (it
  /// was truncated: its pages past the new end read as zeros; or a value read from it broke
  /// the format's bounds): what Tokens, Key and NumCaptions gave for its samples since must
  /// not be used. Sets must not be modified while read; reading one that is never crashes the
  /// process (reader/README.md, "Files changed while mapped"). ReadImage and the Loader check
  /// it themselves. Precondition as Key.
  Status CheckIntact(int64_t i) const;

  /// Decodes sample `i`'s stored image into `dst`, which holds width * height * 3 bytes of
  /// ImageSize(i) (image_bytes() in the fixed-size modes): [height, width, 3] uint8, row-major
  /// RGB. Codec raw: the zstd frame (or the raw chunk); codec jpeg: the whole JPEG, decoded
  /// with libjpeg-turbo (islow IDCT, fancy upsampling).
  /// Thread-safe; uses per-thread decoder contexts.
  /// Errors: Corruption naming the shard and sample (bad frame, wrong decoded size, a damaged
  /// JPEG or one whose header disagrees with image_size), OutOfRange.
  Status ReadImage(int64_t i, uint8_t* dst) const;

  /// The implementation, for mm_reader's own code only (internal::ShardSetImpl is declared in
  /// reader/src/set/shard_set_impl.h, private to the library): the Loader, the epoch order and the
  /// transforms reach the shards through it.
  const internal::ShardSetImpl& impl() const { return *impl_; }

 private:
  explicit ShardSet(std::unique_ptr<const internal::ShardSetImpl> impl);

  std::unique_ptr<const internal::ShardSetImpl> impl_;
};

/// How captions become training pairs.
enum class CaptionMode {
  kRandomCaption,  // one item per image; its caption chosen per (seed, epoch, sample)
  kAllCaptions,    // one item per (image, caption) pair
};

/// Which part of each stored image a batch shows; the window is then resized to the output size
/// with LoaderOptions::interpolation (antialiased bilinear by default) and may be mirrored.
enum class ImageCrop {
  /// The largest centred window of the output's shape (all of a fixed-size image whose size is
  /// the output's: then a raw set's pixels are copied as stored, no resize).
  kNone,
  /// Evaluation: the centred window of LoaderOptions::center_crop_ratio of kNone's sides (FFCV's
  /// CenterCropRGBImageDecoder).
  kCenter,
  /// Training: torchvision's RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3)) window
  /// (its get_params: area and log-ratio sampling, 10 tries, the same fallback), drawn per
  /// (seed, epoch, sample).
  kRandomResized,
};

/// The filter that resizes a crop window to the output size (torchvision's `interpolation`).
/// Both are antialiased (the kernel stretched by the scale when shrinking), as Pillow's
/// `resize(..., box=window)` with LANCZOS or BILINEAR and torchvision's `antialias=True`.
enum class Interpolation {
  kLanczos,   // Lanczos-3 (Pillow's LANCZOS): 6 taps a pass when enlarging
  kBilinear,  // the triangle (Pillow's BILINEAR; torchvision's RandomResizedCrop default): 2
};

/// Largest LoaderOptions::output_height / output_width.
inline constexpr int kMaxOutputSide = 8192;

/// Upper bounds of LoaderOptions::num_threads and prefetch_batches: beyond them a request is a
/// mistake (a flag typed wrong), not a configuration; Loader::Create refuses it.
inline constexpr int kMaxLoaderThreads = 256;
inline constexpr int kMaxPrefetchBatches = 256;

/// Decode threads of a Loader whose LoaderOptions::num_threads is 0: the CPUs this process may
/// run on (sched_getaffinity), shared among the ranks of this node when the process is not
/// bound to a share of the machine already and a launcher says how many ranks there are
/// (LOCAL_WORLD_SIZE of torchrun, else OMPI_COMM_WORLD_LOCAL_SIZE of Open MPI's mpirun);
/// at least 1, at most kMaxLoaderThreads.
int DefaultLoaderThreads();

/// How LoaderOptions::shuffle orders an epoch (reader/README.md, "Epoch order" and "Block
/// shuffle", with its shuffle quality measured against the global permutation).
enum class ShuffleMode {
  /// kGlobal, unless the set is remote and its cache limit cannot hold it: then kBlock with the
  /// largest window the limit holds (Loader::notice() says so in one line).
  kAuto,
  /// One seeded permutation of the whole epoch: any item may follow any other.
  kGlobal,
  /// Shards permuted per (seed, epoch) and cut into windows of shuffle_window shards; the items
  /// of each window permuted (as MosaicML Streaming's py1b and WebDataset's shard shuffle plus
  /// buffer do). A remote set needs only two windows in its cache: the one read, the next.
  kBlock,
};

/// "auto", "global", "block"; Parse: those names, else InvalidArgument.
const char* ToString(ShuffleMode mode);
Result<ShuffleMode> ParseShuffleMode(std::string_view name);

/// Window of kBlock when nothing bounds it (a local set, or a cache without a limit).
inline constexpr int kDefaultShuffleWindow = 8;

struct LoaderOptions {
  int batch_size = 32;  // per rank
  bool shuffle = true;  // false: file order
  ShuffleMode shuffle_mode = ShuffleMode::kAuto;
  /// kBlock: shards per window, >= 1; 0: for a remote set with a cache limit the largest window
  /// of which two fit in the limit, else kDefaultShuffleWindow.
  int shuffle_window = 0;
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  /// true: drop the tail that does not fill a global batch (world_size * batch_size).
  /// false: keep it; what the last global batch holds then depends on even_batches.
  bool drop_last = true;
  /// With drop_last false (Accelerate's `even_batches`):
  /// true: pad the last global batch by wrapping around to the epoch's first items (as torch's
  /// DistributedSampler pads), so every rank gets the same number of full batches.
  /// false (exact evaluation): no padding: each item of the epoch is handed out exactly once
  /// over all ranks. With G = world_size * batch_size and r = the items of the last, partial
  /// global batch (items_per_epoch mod G, when not 0), rank k's last batch holds
  /// min(batch_size, max(0, r - k * batch_size)) items: the first ranks get full batches, one
  /// rank a short one, the ranks past it one batch fewer (Batch::size is the rows). So
  /// batches_per_epoch differs by at most one between ranks. Loader::Create refuses it with
  /// drop_last true (nothing to pad: say what is meant).
  bool even_batches = true;
  CaptionMode caption_mode = CaptionMode::kRandomCaption;
  /// Decode threads, 1..kMaxLoaderThreads; 0: DefaultLoaderThreads(). They share the work of
  /// each batch (its rows), so every thread decodes whatever prefetch_batches is.
  int num_threads = 0;
  /// Batches being decoded or waiting for Next(), at most, 1..kMaxPrefetchBatches (a bounded
  /// pool of reusable buffers: memory). 1 leaves the threads idle while the consumer takes each
  /// batch; 2 or more keeps them busy.
  int prefetch_batches = 4;
  /// Load-time image transforms, in the decode threads (reader/src/transforms). Every random
  /// draw is a function of (seed, epoch, sample), so batches are the same on any thread count
  /// and after a LoaderState restore. The output is [output_height, output_width, 3] uint8;
  /// 0, 0: the set's stored image size.
  int output_height = 0;  // pixels
  int output_width = 0;   // pixels
  ImageCrop crop = ImageCrop::kNone;
  /// kCenter's window: this fraction of the largest window of the output's shape (FFCV's
  /// CenterCropRGBImageDecoder default 224/256, as torchvision's Resize(256)+CenterCrop(224)).
  double center_crop_ratio = 224.0 / 256.0;
  bool horizontal_flip = false;  // mirror with probability 1/2, after the crop
  /// The crop's resize filter: bilinear (antialiased) by default, as torchvision's
  /// RandomResizedCrop and Resize; kLanczos on request (reader/README.md, "Load-time
  /// transforms", measures both).
  Interpolation interpolation = Interpolation::kBilinear;
};

/// One batch, owned by the loader's pool; returned to the pool when the last BatchPtr dies.
struct Batch {
  int size = 0;                   // B: batch_size, or fewer in a short last batch (even_batches)
  int height = 0, width = 0;      // pixels: the loader's output size
  std::vector<uint8_t> images;    // [B, height, width, 3] uint8, contiguous
  int max_length = 0;             // L: longest caption in this batch, in tokens
  std::vector<int32_t> tokens;    // [B, L] int32, padded with the set's pad_id
  std::vector<int32_t> lengths;   // [B] tokens per row before padding
  std::vector<int64_t> indices;   // [B] global sample index
  std::vector<int32_t> caption;   // [B] which caption of the sample
  std::vector<std::string> keys;  // [B]
  // [B] which set of a mixture each row came from: its position in the mixture's list
  // ("A:0.7,B:0.3": 0 for A, 1 for B); 0 for a single set.
  std::vector<int32_t> set_index;
  // [B] the caption text of each row (UTF-8, as the input gave it), only for a set without a
  // tokenizer (SetInfo::has_tokenizer false), whose rows have no token ids (L = 0); empty
  // otherwise. Read through HDF5 (mm/sample_text.h) in the decode threads.
  std::vector<std::string> texts;
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;  // index of this batch among this rank's batches
};
using BatchPtr = std::shared_ptr<const Batch>;

/// Where a loader is: enough to continue exactly, on any world size.
struct LoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  /// Items of this epoch's global order already handed out, over all ranks.
  int64_t consumed = 0;
  int world_size = 1;  // world size when saved (informational)
  int batch_size = 0;  // per rank, when saved
  /// The order the state counts in: "none", "global" or "block" (empty: not recorded, as in
  /// states saved before block shuffle existed), and the block window (0 unless "block").
  /// Restore refuses a state whose order differs from the loader's.
  std::string order;
  int shuffle_window = 0;
  /// What the state belongs to: Restore refuses a state of another set, mixture or caption
  /// mode. Empty: not recorded (states saved before identities existed restore unchecked, as
  /// they always did).
  ///  - set: 16 hex digits, the XXH3-64 of every set's shard table (file, samples, captions,
  ///    tokens, bytes, xxh3_64, in order), each set's weight and a mixture's epoch_size: the
  ///    same for the same files at any location (a set copied to s3:// keeps it);
  ///  - set_source: the location the loader's set was opened from (for messages only);
  ///  - caption_mode: "random" or "all".
  std::string set;
  std::string set_source;
  std::string caption_mode;
  /// One-line JSON: {"seed":..,"epoch":..,"consumed":..,"world_size":..,"batch_size":..,
  /// "order":..,"shuffle_window":..,"set":..,"set_source":..,"caption_mode":..} (the strings
  /// only when recorded).
  std::string ToJson() const;
  static Result<LoaderState> FromJson(std::string_view json);
};

/// This rank's batches. Not thread-safe: one consumer thread calls Next/Restore/StartEpoch;
/// the loader runs its own decode threads. Not fork-safe: a forked child has none of them, so
/// Next() there fails at once (Internal, naming both processes); create a Loader in the process
/// that reads it.
class Loader {
 public:
  /// Starts options.num_threads decode threads (0: DefaultLoaderThreads()).
  /// Errors: InvalidArgument (batch_size < 1, rank outside [0, world_size), num_threads outside
  /// [0, kMaxLoaderThreads], prefetch_batches outside [1, kMaxPrefetchBatches], an empty set,
  /// drop_last with fewer items than one global batch, even_batches false with drop_last true,
  /// a mixture of sets stored at different image sizes without an output size,
  /// an output side outside [1, kMaxOutputSide] or only one of them given, center_crop_ratio
  /// outside (0, 1]); IOError when the system refuses a thread (a process or memory limit),
  /// naming which one.
  static Result<std::unique_ptr<Loader>> Create(std::shared_ptr<const ShardSet> set,
                                                const LoaderOptions& options);
  virtual ~Loader() = default;

  /// Items (images or pairs, per caption_mode) in one epoch's global order.
  virtual int64_t items_per_epoch() const = 0;
  /// Batches this rank gets in one full epoch: the same on every rank, except with
  /// even_batches false, where the ranks past the last partial global batch's items get one
  /// fewer (see LoaderOptions::even_batches).
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
  /// this loader's world size.
  /// Errors: InvalidArgument (consumed past the epoch's end; a state saved under another
  /// order: "block" with another window, or another shuffle mode; a state of another set or
  /// mixture (other files, weights or epoch_size) or caption mode, naming both).
  virtual Status Restore(const LoaderState& state) = 0;
  /// The options in force: shuffle_mode and shuffle_window resolved (never kAuto or 0 when
  /// shuffling), num_threads the threads started (never 0).
  virtual const LoaderOptions& options() const = 0;
  /// One line for the user when the loader chose for them (kAuto became kBlock because the
  /// cache limit cannot hold the set), else empty.
  virtual const std::string& notice() const = 0;
};

/// Sample `sample`'s image exactly as a Loader with `options` hands it out in `epoch` (the same
/// window, flip and resize): [height, width, 3] uint8 into `pixels`, with (height, width) the
/// loader's output size. For tools (`mmpack show`) and tests. Thread-safe.
/// Errors: those of ShardSet::ReadImage; OutOfRange for a sample outside the set.
Status LoadSampleImage(const ShardSet& set, const LoaderOptions& options, int64_t epoch,
                       int64_t sample, std::vector<uint8_t>* pixels, int* height, int* width);

/// One element of an epoch's global order.
struct Item {
  int64_t sample;   // global sample index
  int32_t caption;  // which caption of the sample (always concrete)
};

/// The item at position `pos` (0 <= pos < items_per_epoch) of `epoch`'s global order under
/// `options` (shuffle, shuffle_mode, shuffle_window, seed, caption_mode): the reference the
/// Loader follows, computed from seeded bijections (no stored permutation of the items; O(1)
/// memory for a single set under the global or no shuffle, O(shards) otherwise). Exposed for
/// tests and tools. A remote set: the item's shard must be pinned. A kAuto or window-0 option
/// is resolved as Loader::Create resolves it.
Item GlobalItem(const ShardSet& set, const LoaderOptions& options, int64_t epoch, int64_t pos);

}  // namespace mm::reader
