// shard_writer.cc: the writer of format v1 (see shard_writer.h and schemas/FORMAT.md): when a
// shard closes, what its tables hold, in which order they and the attributes are written. The
// HDF5 layout itself (what makes the bytes the same for the same samples) is shard_file.h.
#include "shard/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/set_rules.h"
#include "mm/internal/zstd_codec.h"
#include "shard/h5_util.h"
#include "shard/shard_file.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

// HDF5 bytes a shard needs besides its data (measured on 1.10.8, earliest format): superblock
// and object headers of 9 datasets with their attributes (~2 KiB), the first node of the
// chunk B-tree (~3.6 KiB, 64 chunks) and the first global heap collection of the vlen strings
// (4 KiB), the vlen string attributes. A one-sample shard of a 40x32 image: 13.2 KiB.
constexpr int64_t kShardOverheadBytes = 13 * 1024;
// Per sample: its share of the chunk B-tree (~56 bytes) and the vlen record and heap object
// header of its source (~40 bytes), plus its fixed-size rows (8 + 16 + 8 bytes).
constexpr int64_t kPerSampleOverheadBytes = 96 + 32;
// Per caption: the vlen record and heap object header (~40 bytes), its offset (8 bytes).
constexpr int64_t kPerCaptionOverheadBytes = 48;
// The largest stored JPEG (a range of image_bytes; the reader's chunk sizes are 31-bit).
constexpr size_t kMaxJpegBytes = size_t{1} << 30;

Status CheckText(const std::string& text, const char* what, const std::string& key) {
  if (text.find('\0') != std::string::npos) {
    return Status::InvalidArgument(std::string(what) + " of sample '" + key +
                                   "' holds a NUL byte, which HDF5 strings cannot store");
  }
  return Status::OK();
}

class ShardWriterImpl final : public ShardWriter {
 public:
  ShardWriterImpl(WriterOptions options, SchemaDatasets schema)
      : options_(std::move(options)), schema_(std::move(schema)) {
    shard_index_ = options_.first_shard_index;
    image_bytes_ = static_cast<size_t>(options_.image_width) * options_.image_height * 3;
    jpeg_ = options_.image_codec == format::ImageCodec::kJpeg;
  }

  ~ShardWriterImpl() override {
    if (open_) Abandon();  // an error upstream: leave no half-written file behind
  }

  // The open shard cannot be finished (a failed write or close, or an error upstream). Its
  // file is emptied first, so that the flushes HDF5 does while closing find room on a full
  // disk where they can; then what is still open is closed and the file removed. An object
  // whose close failed is never closed again: libhdf5 has half torn it down, and a second
  // close crashed (SIGSEGV in H5F__close). It stays open in HDF5 until the process ends, and
  // mmpack's main keeps libhdf5's exit handler from retrying it (h5::SkipLibraryCloseAtExit).
  void Abandon() {
    const std::string tmp = TempPath();
    (void)::truncate(tmp.c_str(), 0);
    spool_.Reset();
    images_.Reset();
    file_.Reset();
    h5::ClearErrors();
    std::error_code ec;
    fs::remove(tmp, ec);
    open_ = false;
  }

  Status Add(EncodedSample&& sample) override {
    if (finished_) return Status::InvalidArgument("ShardWriter::Add after Finish");
    SilenceErrorsOnThisThread();  // the build's sink runs on any TBB thread
    MM_RETURN_NOT_OK(Validate(sample));
    // Keys are unique within the set (FORMAT.md); `mmpack verify` rejects a set that repeats
    // one, so the writer refuses it rather than write such a set. The set remembers each key
    // by its 128-bit XXH3 hash (16 bytes, not the text): a false "duplicate" needs a 128-bit
    // collision, about n^2 / 2^129 (1e-26 at a billion keys).
    const XXH128_hash_t h = XXH3_128bits(sample.key.data(), sample.key.size());
    if (options_.check_unique_keys && !set_keys_.insert(KeyHash{h.low64, h.high64}).second) {
      return Status::InvalidArgument("duplicate sample key '" + sample.key +
                                     "': keys must be unique within a shard set");
    }
    int64_t cost = SampleBytes(sample);
    if (open_ && num_samples_ > 0 && shard_bytes_ + cost > options_.shard_size) {
      MM_RETURN_NOT_OK(CloseShard());
    }
    if (!open_) MM_RETURN_NOT_OK(OpenShard());
    if (Status st = AppendChunk(sample.image_chunk); !st.ok()) {
      Abandon();
      return st.WithContext("cannot write " + TempPath());
    }
    shard_bytes_ += cost;

    keys_.push_back(std::move(sample.key));
    sources_.push_back(std::move(sample.source));
    if (jpeg_) {
      image_offsets_.push_back(image_offsets_.back() +
                               static_cast<int64_t>(sample.image_chunk.size()));
      image_size_.push_back(sample.stored_width);
      image_size_.push_back(sample.stored_height);
    }
    original_size_.push_back(sample.original_width);
    original_size_.push_back(sample.original_height);
    valid_box_.insert(valid_box_.end(), sample.valid_box, sample.valid_box + 4);
    for (size_t c = 0; c < sample.captions.size(); ++c) {
      captions_.push_back(std::move(sample.captions[c]));
      tokens_.insert(tokens_.end(), sample.tokens[c].begin(), sample.tokens[c].end());
      token_offsets_.push_back(static_cast<int64_t>(tokens_.size()));
    }
    caption_offsets_.push_back(static_cast<int64_t>(captions_.size()));
    for (size_t f = 0; f < sample.metadata.size(); ++f) {
      metadata_[f].push_back(std::move(sample.metadata[f]));
    }

    bool full = (options_.samples_per_shard > 0 && num_samples_ >= options_.samples_per_shard) ||
                shard_bytes_ >= options_.shard_size;
    if (full) MM_RETURN_NOT_OK(CloseShard());
    return Status::OK();
  }

  Status CloseIfNoRoom(const EncodedSample& next) override {
    if (finished_ || !open_ || num_samples_ == 0) return Status::OK();
    SilenceErrorsOnThisThread();
    if (shard_bytes_ + SampleBytes(next) <= options_.shard_size) return Status::OK();
    return CloseShard();
  }

  const std::vector<mm::reader::ShardEntry>& Closed() const override { return entries_; }

  Result<std::vector<mm::reader::ShardEntry>> Finish() override {
    if (finished_) return Status::InvalidArgument("ShardWriter::Finish called twice");
    SilenceErrorsOnThisThread();
    if (open_) MM_RETURN_NOT_OK(CloseShard());
    finished_ = true;
    return entries_;
  }

 private:
  Status Validate(const EncodedSample& sample) const {
    if (sample.key.empty()) return Status::InvalidArgument("sample with an empty key");
    MM_RETURN_NOT_OK(CheckText(sample.key, "key", sample.key));
    MM_RETURN_NOT_OK(CheckText(sample.source, "source", sample.key));
    if (sample.captions.empty()) {
      return Status::InvalidArgument("sample '" + sample.key + "' has no caption");
    }
    if (sample.tokens.size() != sample.captions.size()) {
      return Status::InvalidArgument("sample '" + sample.key + "' has " +
                                     std::to_string(sample.captions.size()) + " captions but " +
                                     std::to_string(sample.tokens.size()) + " token rows");
    }
    for (const auto& caption : sample.captions) {
      MM_RETURN_NOT_OK(CheckText(caption, "caption", sample.key));
    }
    if (sample.metadata.size() != options_.metadata_fields.size()) {
      return Status::InvalidArgument(
          "sample '" + sample.key + "' has " + std::to_string(sample.metadata.size()) +
          " kept field values, expected " + std::to_string(options_.metadata_fields.size()));
    }
    for (const auto& value : sample.metadata) {
      MM_RETURN_NOT_OK(CheckText(value.s, "kept field value", sample.key));
    }
    const auto& chunk = sample.image_chunk;
    if (jpeg_) {
      const bool fixed = format::IsFixedSize(options_.resize_mode);
      if (chunk.size() < 4 || chunk[0] != 0xFF || chunk[1] != 0xD8 ||
          chunk.size() > kMaxJpegBytes) {
        return Status::InvalidArgument("sample '" + sample.key + "': image is not a JPEG of 4 B.." +
                                       std::to_string(kMaxJpegBytes) + " B");
      }
      if (sample.stored_width < 1 || sample.stored_height < 1 ||
          sample.stored_width > mm::reader::kMaxImageSide ||
          sample.stored_height > mm::reader::kMaxImageSide ||
          (fixed && (sample.stored_width != options_.image_width ||
                     sample.stored_height != options_.image_height))) {
        return Status::InvalidArgument("sample '" + sample.key + "': stored size " +
                                       std::to_string(sample.stored_width) + "x" +
                                       std::to_string(sample.stored_height) +
                                       " is not what the set's resize mode allows");
      }
      return Status::OK();
    }
    if (options_.compression == format::Codec::kNone) {
      if (chunk.size() != image_bytes_) {
        return Status::InvalidArgument("sample '" + sample.key + "': image chunk of " +
                                       std::to_string(chunk.size()) + " bytes, expected " +
                                       std::to_string(image_bytes_));
      }
    } else {
      if (mm::zstd::FrameContentSize(chunk.data(), chunk.size()) != image_bytes_) {
        return Status::InvalidArgument("sample '" + sample.key +
                                       "': image chunk is not a zstd frame of " +
                                       std::to_string(image_bytes_) + " bytes");
      }
    }
    return Status::OK();
  }

  static int64_t SampleBytes(const EncodedSample& sample) {
    int64_t bytes =
        static_cast<int64_t>(sample.image_chunk.size() + sample.key.size() + sample.source.size()) +
        kPerSampleOverheadBytes;
    for (size_t c = 0; c < sample.captions.size(); ++c) {
      bytes += static_cast<int64_t>(sample.captions[c].size() + 4 * sample.tokens[c].size()) +
               kPerCaptionOverheadBytes;
    }
    for (const auto& value : sample.metadata) {  // 8 bytes a number; a string as a caption
      bytes += static_cast<int64_t>(value.s.size()) + kPerCaptionOverheadBytes;
    }
    return bytes;
  }

  std::string FinalPath() const {
    return (fs::path(options_.output_dir) / format::ShardFileName(shard_index_)).string();
  }
  std::string TempPath() const {
    return (fs::path(options_.output_dir) / format::TempShardFileName(shard_index_)).string();
  }

  Status OpenShard() {
    MM_ASSIGN_OR_RETURN(file_, CreateShardFile(TempPath()));
    open_ = true;
    if (jpeg_) {
      MM_RETURN_NOT_OK(OpenSpool());
    } else {
      MM_ASSIGN_OR_RETURN(images_, CreateImages(file_.get(), schema_.at(format::kImages),
                                                options_.image_height, options_.image_width,
                                                options_.compression, options_.compression_level));
    }
    image_offsets_.assign(1, 0);
    image_size_.clear();
    num_samples_ = 0;
    shard_bytes_ = kShardOverheadBytes;
    keys_.clear();
    sources_.clear();
    original_size_.clear();
    valid_box_.clear();
    captions_.clear();
    tokens_.clear();
    caption_offsets_.assign(1, 0);
    token_offsets_.assign(1, 0);
    metadata_.assign(options_.metadata_fields.size(), {});
    return Status::OK();
  }

  // The JPEGs of the open shard wait in an unnamed file beside it (O_TMPFILE: nothing to clean
  // up after a crash), so memory stays bounded whatever the shard's size.
  Status OpenSpool() {
    MM_ASSIGN_OR_RETURN(spool_, OpenUnnamedFile(options_.output_dir, ".jpeg-spool.",
                                                "creating a spool file in " + options_.output_dir));
    return Status::OK();
  }

  Status AppendChunk(const std::vector<uint8_t>& chunk) {
    if (jpeg_) {
      MM_RETURN_NOT_OK(WriteAll(spool_.get(), chunk.data(), chunk.size(),
                                "spooling JPEG bytes in " + options_.output_dir));
    } else {
      MM_RETURN_NOT_OK(AppendImageChunk(images_.get(), num_samples_, options_.image_height,
                                        options_.image_width, chunk));
    }
    ++num_samples_;
    return Status::OK();
  }

  Status WriteNumeric(const char* name, const std::vector<hsize_t>& dims, hid_t mem_type,
                      const void* data) {
    return WriteNumericTable(file_.get(), name, schema_.at(name), dims, mem_type, data);
  }
  Status WriteStrings(const char* name, const std::vector<std::string>& values) {
    return WriteStringTable(file_.get(), name, schema_.at(name), values);
  }

  Status WriteTables() {
    const hsize_t n = static_cast<hsize_t>(num_samples_);
    if (jpeg_) {  // codec jpeg (format 2): in place of `images`, first
      MM_RETURN_NOT_OK(WriteBytesFromFd(file_.get(), format::kImageBytes,
                                        schema_.at(format::kImageBytes), spool_.get(),
                                        static_cast<uint64_t>(image_offsets_.back())));
      MM_RETURN_NOT_OK(WriteNumeric(format::kImageOffsets, {image_offsets_.size()},
                                    H5T_NATIVE_INT64, image_offsets_.data()));
      MM_RETURN_NOT_OK(
          WriteNumeric(format::kImageSize, {n, 2}, H5T_NATIVE_INT32, image_size_.data()));
    }
    MM_RETURN_NOT_OK(WriteStrings(format::kKeys, keys_));
    MM_RETURN_NOT_OK(WriteStrings(format::kSources, sources_));
    MM_RETURN_NOT_OK(
        WriteNumeric(format::kOriginalSize, {n, 2}, H5T_NATIVE_INT32, original_size_.data()));
    MM_RETURN_NOT_OK(WriteNumeric(format::kValidBox, {n, 4}, H5T_NATIVE_INT32, valid_box_.data()));
    MM_RETURN_NOT_OK(WriteNumeric(format::kCaptionOffsets, {caption_offsets_.size()},
                                  H5T_NATIVE_INT64, caption_offsets_.data()));
    MM_RETURN_NOT_OK(WriteStrings(format::kCaptions, captions_));
    MM_RETURN_NOT_OK(WriteNumeric(format::kTokenOffsets, {token_offsets_.size()}, H5T_NATIVE_INT64,
                                  token_offsets_.data()));
    MM_RETURN_NOT_OK(
        WriteNumeric(format::kTokens, {tokens_.size()}, H5T_NATIVE_INT32, tokens_.data()));
    if (!options_.metadata_fields.empty()) {
      MM_RETURN_NOT_OK(WriteMetadataGroup(file_.get(), options_.metadata_fields, metadata_));
    }
    return Status::OK();
  }

  Status WriteAttributes() {
    hid_t f = file_.get();
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrFormat, std::string(format::kFormatName)));
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrFormatVersion,
                                        int32_t{format::FormatVersionFor(options_.image_codec)}));
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrShardIndex, int64_t{shard_index_}));
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrNumSamples, int64_t{num_samples_}));
    MM_RETURN_NOT_OK(
        h5::WriteAttribute(f, format::kAttrNumCaptions, static_cast<int64_t>(captions_.size())));
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrImageHeight,
                                        static_cast<int32_t>(options_.image_height)));
    MM_RETURN_NOT_OK(
        h5::WriteAttribute(f, format::kAttrImageWidth, static_cast<int32_t>(options_.image_width)));
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrResizeMode,
                                        std::string(ToString(options_.resize_mode))));
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrCompression,
                                        std::string(ToString(options_.compression))));
    MM_RETURN_NOT_OK(
        h5::WriteAttribute(f, format::kAttrTokenizerSha256, options_.tokenizer_sha256));
    if (jpeg_) {
      MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrImageCodec,
                                          std::string(ToString(options_.image_codec))));
      MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrJpegQuality,
                                          static_cast<int32_t>(options_.jpeg_quality)));
      MM_RETURN_NOT_OK(
          h5::WriteAttribute(f, format::kAttrMaxSize, static_cast<int32_t>(options_.max_size)));
    }
    return Status::OK();
  }

  Status CloseShard() {
    std::string tmp = TempPath();
    std::string final_path = FinalPath();
    Status st = WriteTables();
    if (st.ok()) st = WriteAttributes();
    if (st.ok() && !jpeg_) st = images_.Close();
    if (st.ok()) st = file_.Close();
    spool_.Reset();
    if (!st.ok()) {
      Abandon();
      return st.WithContext("cannot write " + tmp);
    }
    open_ = false;
    // Durable before it takes its final name: a crash leaves a .tmp, never a short .h5.
    MM_ASSIGN_OR_RETURN(std::string hash, SyncAndHash(tmp));
    if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
      return ErrnoStatus(errno, "rename " + tmp + " -> " + final_path);
    }
    mm::reader::ShardEntry entry;
    entry.file = format::ShardFileName(shard_index_);
    entry.samples = num_samples_;
    entry.captions = static_cast<int64_t>(captions_.size());
    entry.tokens = static_cast<int64_t>(tokens_.size());
    std::error_code ec;
    entry.bytes = static_cast<int64_t>(fs::file_size(final_path, ec));
    if (ec) return Status::IOError("stat " + final_path + ": " + ec.message());
    entry.xxh3_64 = std::move(hash);
    entries_.push_back(std::move(entry));
    ++shard_index_;
    return Status::OK();
  }

  // HDF5 prints its error stack unless told not to, per thread: errors become Statuses here.
  static void SilenceErrorsOnThisThread() {
    thread_local bool silenced = false;
    if (!silenced) h5::SilenceErrors();
    silenced = true;
  }

  // fsyncs `path` and returns the XXH3-64 of its bytes (mm/internal/checksum.h).
  static Result<std::string> SyncAndHash(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open " + path);
    MM_ASSIGN_OR_RETURN(std::string hash, Xxh3HexOfFd(fd.get(), path));
    if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync " + path);
    return hash;
  }

  WriterOptions options_;
  SchemaDatasets schema_;
  size_t image_bytes_ = 0;
  bool jpeg_ = false;  // codec jpeg: JPEGs spooled, image_bytes written at close
  bool open_ = false;
  bool finished_ = false;
  int64_t shard_index_ = 0;
  std::vector<mm::reader::ShardEntry> entries_;
  struct KeyHash {
    uint64_t low, high;
    bool operator==(const KeyHash& o) const { return low == o.low && high == o.high; }
  };
  struct KeyHashHash {
    size_t operator()(const KeyHash& k) const { return static_cast<size_t>(k.low); }
  };
  std::unordered_set<KeyHash, KeyHashHash> set_keys_;  // every key added to the set so far

  // The open shard.
  h5::File file_;
  h5::Dataset images_;
  UniqueFd spool_;                      // codec jpeg: the open shard's JPEGs, in order
  std::vector<int64_t> image_offsets_;  // [N + 1] codec jpeg
  std::vector<int32_t> image_size_;     // [N, 2] codec jpeg
  int64_t num_samples_ = 0;
  int64_t shard_bytes_ = 0;  // estimate of the file's size so far
  std::vector<std::string> keys_;
  std::vector<std::string> sources_;
  std::vector<int32_t> original_size_;                            // [N, 2]
  std::vector<int32_t> valid_box_;                                // [N, 4]
  std::vector<int64_t> caption_offsets_;                          // [N + 1]
  std::vector<std::string> captions_;                             // [C]
  std::vector<int64_t> token_offsets_;                            // [C + 1]
  std::vector<int32_t> tokens_;                                   // [T]
  std::vector<std::vector<mm::reader::MetadataValue>> metadata_;  // [fields][N]
};

}  // namespace

Result<std::vector<uint8_t>> CompressImage(const uint8_t* pixels, size_t bytes,
                                           format::Codec compression, int level) {
  if (compression == format::Codec::kNone) return std::vector<uint8_t>(pixels, pixels + bytes);
  return mm::zstd::Compress(pixels, bytes, level);
}

Result<std::unique_ptr<ShardWriter>> ShardWriter::Create(const WriterOptions& options) {
  if (options.image_width <= 0 || options.image_height <= 0) {
    return Status::InvalidArgument("image size must be positive");
  }
  if (options.compression == format::Codec::kZstd &&
      (options.compression_level < mm::zstd::MinLevel() ||
       options.compression_level > mm::zstd::MaxLevel())) {
    return Status::InvalidArgument("zstd level must be in " + std::to_string(mm::zstd::MinLevel()) +
                                   ".." + std::to_string(mm::zstd::MaxLevel()));
  }
  if (options.shard_size <= 0) return Status::InvalidArgument("shard size must be positive");
  if (options.image_codec == format::ImageCodec::kJpeg &&
      (options.compression != format::Codec::kNone || options.jpeg_quality < 1 ||
       options.jpeg_quality > 100)) {
    return Status::InvalidArgument("codec jpeg needs compression none and a quality in 1..100");
  }
  if (!format::IsFixedSize(options.resize_mode) &&
      (options.image_codec != format::ImageCodec::kJpeg || options.max_size < 1 ||
       options.image_width != options.max_size || options.image_height != options.max_size)) {
    return Status::InvalidArgument("the keep-ratio modes need codec jpeg and image size = max_size");
  }
  MM_RETURN_NOT_OK(mm::reader::CheckMetadataFieldNames(options.metadata_fields));
  if (options.first_shard_index < 0) {
    return Status::InvalidArgument("first shard index must be >= 0");
  }
  if (options.samples_per_shard < 0) {
    return Status::InvalidArgument("samples per shard must be >= 0");
  }
  std::error_code ec;
  if (!fs::is_directory(options.output_dir, ec)) {
    return Status::IOError("output directory '" + options.output_dir + "' does not exist");
  }
  if (::access(options.output_dir.c_str(), W_OK) != 0) {
    return ErrnoStatus(errno, "output directory '" + options.output_dir + "' is not writable");
  }
  h5::SilenceErrors();
  MM_RETURN_NOT_OK(h5::RegisterZstdFilter());
  MM_ASSIGN_OR_RETURN(SchemaDatasets schema, LoadSchemaDatasets());
  return std::unique_ptr<ShardWriter>(new ShardWriterImpl(options, std::move(schema)));
}

}  // namespace mm::pack
