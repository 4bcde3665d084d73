// shard_writer.cc: the HDF5 writer of format v1 (see shard_writer.h and schemas/FORMAT.md).
//
// File layout choices that make the output byte-identical for the same samples: libver bounds
// earliest..v110, object timestamps off (file, every dataset), no fill values, the zstd filter
// registered in-process (its name is stored the same whether or not a plugin is on the path),
// datasets and attributes created in a fixed order.
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

#include "shard/h5_util.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/zstd_codec.h"

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

// The dtype ("uint8", "int32", "int64", "string-fixed", "string-vlen") and rank of every dataset
// of the embedded schema (schemas/shard_v1.json), by name.
struct SchemaDataset {
  std::string dtype;
  size_t rank = 0;
  std::string layout;
};

Result<std::map<std::string, SchemaDataset>> LoadSchemaDatasets() {
  nlohmann::json schema = nlohmann::json::parse(format::SchemaJson(), nullptr, false);
  if (schema.is_discarded() || !schema.contains("datasets")) {
    return Status::Internal("embedded shard schema is not valid JSON with 'datasets'");
  }
  std::map<std::string, SchemaDataset> out;
  for (const auto& d : schema["datasets"]) {
    SchemaDataset sd;
    sd.dtype = d.value("dtype", "");
    sd.rank = d.contains("shape") ? d["shape"].size() : 0;
    sd.layout = d.value("layout", "any");
    out[d.value("name", "")] = sd;
  }
  return out;
}

// File datatype for a numeric schema dtype (little-endian, as FORMAT.md says).
Result<hid_t> NumericFileType(const std::string& dtype) {
  if (dtype == "uint8") return H5T_STD_U8LE;
  if (dtype == "int32") return H5T_STD_I32LE;
  if (dtype == "int64") return H5T_STD_I64LE;
  return Status::Internal("schema dtype '" + dtype + "' is not numeric");
}

Status CheckText(const std::string& text, const char* what, const std::string& key) {
  if (text.find('\0') != std::string::npos) {
    return Status::InvalidArgument(std::string(what) + " of sample '" + key +
                                   "' holds a NUL byte, which HDF5 strings cannot store");
  }
  return Status::OK();
}

class ShardWriterImpl final : public ShardWriter {
 public:
  ShardWriterImpl(WriterOptions options, std::map<std::string, SchemaDataset> schema)
      : options_(std::move(options)), schema_(std::move(schema)) {
    image_bytes_ = static_cast<size_t>(options_.image_width) * options_.image_height * 3;
  }

  ~ShardWriterImpl() override {
    if (open_) {
      // Abandoned mid-shard (an error upstream): leave no half-written file behind.
      images_.Reset();
      file_.Reset();
      std::error_code ec;
      fs::remove(TempPath(), ec);
    }
  }

  Status Add(EncodedSample&& sample) override {
    if (finished_) return Status::InvalidArgument("ShardWriter::Add after Finish");
    MM_RETURN_NOT_OK(Validate(sample));
    // Keys are unique within the set (FORMAT.md); `mmpack verify` rejects a set that repeats
    // one, so the writer refuses it rather than write such a set. The set remembers each key
    // by its 128-bit XXH3 hash (16 bytes, not the text): a false "duplicate" needs a 128-bit
    // collision, about n^2 / 2^129 (1e-26 at a billion keys).
    const XXH128_hash_t h = XXH3_128bits(sample.key.data(), sample.key.size());
    if (!set_keys_.insert(KeyHash{h.low64, h.high64}).second) {
      return Status::InvalidArgument("duplicate sample key '" + sample.key +
                                     "': keys must be unique within a shard set");
    }
    int64_t cost = SampleBytes(sample);
    if (open_ && num_samples_ > 0 && shard_bytes_ + cost > options_.shard_size) {
      MM_RETURN_NOT_OK(CloseShard());
    }
    if (!open_) MM_RETURN_NOT_OK(OpenShard());
    MM_RETURN_NOT_OK(AppendChunk(sample.image_chunk));
    shard_bytes_ += cost;

    keys_.push_back(std::move(sample.key));
    sources_.push_back(std::move(sample.source));
    original_size_.push_back(sample.original_width);
    original_size_.push_back(sample.original_height);
    valid_box_.insert(valid_box_.end(), sample.valid_box, sample.valid_box + 4);
    for (size_t c = 0; c < sample.captions.size(); ++c) {
      captions_.push_back(std::move(sample.captions[c]));
      tokens_.insert(tokens_.end(), sample.tokens[c].begin(), sample.tokens[c].end());
      token_offsets_.push_back(static_cast<int64_t>(tokens_.size()));
    }
    caption_offsets_.push_back(static_cast<int64_t>(captions_.size()));

    bool full = (options_.samples_per_shard > 0 && num_samples_ >= options_.samples_per_shard) ||
                shard_bytes_ >= options_.shard_size;
    if (full) MM_RETURN_NOT_OK(CloseShard());
    return Status::OK();
  }

  Result<std::vector<mm::reader::ShardEntry>> Finish() override {
    if (finished_) return Status::InvalidArgument("ShardWriter::Finish called twice");
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
    const auto& chunk = sample.image_chunk;
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
    return bytes;
  }

  std::string FinalPath() const {
    return (fs::path(options_.output_dir) / format::ShardFileName(shard_index_)).string();
  }
  std::string TempPath() const {
    return (fs::path(options_.output_dir) / format::TempShardFileName(shard_index_)).string();
  }

  // Dataset creation properties shared by every dataset: no timestamps; no fill values for
  // fixed-size types (HDF5 requires the fill machinery for variable-length strings).
  Result<h5::PropList> BaseDcpl(bool variable_length) const {
    MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                        h5::Own<h5::PropList>(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"));
    MM_RETURN_NOT_OK(h5::Check(H5Pset_obj_track_times(dcpl.get(), false), "track_times"));
    if (!variable_length) {
      MM_RETURN_NOT_OK(h5::Check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill_time"));
    }
    return dcpl;
  }

  Status OpenShard() {
    MM_ASSIGN_OR_RETURN(h5::PropList fcpl,
                        h5::Own<h5::PropList>(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate"));
    MM_RETURN_NOT_OK(h5::Check(H5Pset_obj_track_times(fcpl.get(), false), "track_times"));
    MM_ASSIGN_OR_RETURN(h5::PropList fapl,
                        h5::Own<h5::PropList>(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"));
    MM_RETURN_NOT_OK(h5::Check(
        H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_EARLIEST, H5F_LIBVER_V110), "libver"));
    std::string tmp = TempPath();
    MM_ASSIGN_OR_RETURN(
        file_, h5::Own<h5::File>(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
                                 "creating " + tmp, StatusCode::kIOError));
    open_ = true;

    const hsize_t h = static_cast<hsize_t>(options_.image_height);
    const hsize_t w = static_cast<hsize_t>(options_.image_width);
    hsize_t dims[4] = {0, h, w, 3};
    hsize_t max_dims[4] = {H5S_UNLIMITED, h, w, 3};
    hsize_t chunk[4] = {1, h, w, 3};
    MM_ASSIGN_OR_RETURN(h5::Dataspace space,
                        h5::Own<h5::Dataspace>(H5Screate_simple(4, dims, max_dims), "H5S"));
    MM_ASSIGN_OR_RETURN(h5::PropList dcpl, BaseDcpl(/*variable_length=*/false));
    MM_RETURN_NOT_OK(h5::Check(H5Pset_chunk(dcpl.get(), 4, chunk), "H5Pset_chunk"));
    MM_RETURN_NOT_OK(
        h5::Check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_INCR), "H5Pset_alloc_time"));
    if (options_.compression == format::Codec::kZstd) {
      // A negative (fast) level is stored as its 32-bit two's complement (-1: 4294967295, as
      // h5dump prints it); filters read cd_values[0] back as an int.
      const unsigned level[1] = {static_cast<unsigned>(options_.compression_level)};
      MM_RETURN_NOT_OK(
          h5::Check(H5Pset_filter(dcpl.get(), format::kZstdFilterId, H5Z_FLAG_OPTIONAL, 1, level),
                    "H5Pset_filter(zstd)"));
    }
    MM_ASSIGN_OR_RETURN(hid_t file_type, NumericFileType(schema_.at(format::kImages).dtype));
    MM_ASSIGN_OR_RETURN(
        images_, h5::Own<h5::Dataset>(H5Dcreate2(file_.get(), format::kImages, file_type,
                                                 space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                      "H5Dcreate2(images)"));
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
    return Status::OK();
  }

  Status AppendChunk(const std::vector<uint8_t>& chunk) {
    const hsize_t h = static_cast<hsize_t>(options_.image_height);
    const hsize_t w = static_cast<hsize_t>(options_.image_width);
    hsize_t n = static_cast<hsize_t>(num_samples_);
    hsize_t dims[4] = {n + 1, h, w, 3};
    MM_RETURN_NOT_OK(h5::Check(H5Dset_extent(images_.get(), dims), "H5Dset_extent(images)",
                               StatusCode::kIOError));
    hsize_t offset[4] = {n, 0, 0, 0};
    MM_RETURN_NOT_OK(h5::Check(H5Dwrite_chunk(images_.get(), H5P_DEFAULT, /*filters=*/0, offset,
                                              chunk.size(), chunk.data()),
                               "H5Dwrite_chunk(images)", StatusCode::kIOError));
    ++num_samples_;
    return Status::OK();
  }

  // Writes one contiguous table: file type from the schema's dtype, `dims` from the data.
  Status WriteNumeric(const char* name, const std::vector<hsize_t>& dims, hid_t mem_type,
                      const void* data) {
    const SchemaDataset& sd = schema_.at(name);
    if (sd.rank != dims.size()) {
      return Status::Internal(std::string("writer rank of '") + name + "' differs from schema");
    }
    MM_ASSIGN_OR_RETURN(hid_t file_type, NumericFileType(sd.dtype));
    return WriteDataset(name, dims, file_type, mem_type, data);
  }

  Status WriteDataset(const char* name, const std::vector<hsize_t>& dims, hid_t file_type,
                      hid_t mem_type, const void* data) {
    MM_ASSIGN_OR_RETURN(h5::Dataspace space,
                        h5::Own<h5::Dataspace>(
                            H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                            "H5Screate_simple"));
    MM_ASSIGN_OR_RETURN(h5::PropList dcpl, BaseDcpl(H5Tis_variable_str(file_type) > 0));
    MM_RETURN_NOT_OK(h5::Check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout"));
    MM_ASSIGN_OR_RETURN(h5::Dataset dset,
                        h5::Own<h5::Dataset>(H5Dcreate2(file_.get(), name, file_type, space.get(),
                                                        H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                             std::string("H5Dcreate2(") + name + ")"));
    hsize_t elements = 1;
    for (hsize_t d : dims) elements *= d;
    // An empty dataset (tokens when T == 0) is left unallocated: H5Dget_offset is undefined.
    if (elements > 0) {
      MM_RETURN_NOT_OK(
          h5::Check(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                    std::string("H5Dwrite(") + name + ")", StatusCode::kIOError));
    }
    return dset.Close();
  }

  Status WriteStrings(const char* name, const std::vector<std::string>& values) {
    const SchemaDataset& sd = schema_.at(name);
    std::vector<hsize_t> dims = {values.size()};
    if (sd.dtype == "string-vlen") {
      MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::VlenUtf8Type());
      std::vector<const char*> pointers;
      pointers.reserve(values.size());
      for (const auto& v : values) pointers.push_back(v.c_str());
      return WriteDataset(name, dims, type.get(), type.get(), pointers.data());
    }
    if (sd.dtype == "string-fixed") {
      size_t width = 1;
      for (const auto& v : values) width = std::max(width, v.size());
      MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::FixedUtf8Type(width));
      std::vector<char> buffer(values.size() * width, '\0');
      for (size_t i = 0; i < values.size(); ++i) {
        std::memcpy(buffer.data() + i * width, values[i].data(), values[i].size());
      }
      return WriteDataset(name, dims, type.get(), type.get(), buffer.data());
    }
    return Status::Internal(std::string("schema dtype of '") + name + "' is not a string");
  }

  Status WriteTables() {
    const hsize_t n = static_cast<hsize_t>(num_samples_);
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
    return Status::OK();
  }

  Status WriteAttributes() {
    hid_t f = file_.get();
    MM_RETURN_NOT_OK(h5::WriteAttribute(f, format::kAttrFormat, std::string(format::kFormatName)));
    MM_RETURN_NOT_OK(
        h5::WriteAttribute(f, format::kAttrFormatVersion, int32_t{format::kFormatVersion}));
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
    return Status::OK();
  }

  Status CloseShard() {
    std::string tmp = TempPath();
    std::string final_path = FinalPath();
    Status st = WriteTables();
    if (st.ok()) st = WriteAttributes();
    if (st.ok()) st = images_.Close();
    if (st.ok()) st = file_.Close();
    open_ = false;
    if (!st.ok()) {
      images_.Reset();
      file_.Reset();
      std::error_code ec;
      fs::remove(tmp, ec);
      return st.WithContext(format::ShardFileName(shard_index_));
    }
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

  // fsyncs `path` and returns the XXH3-64 of its bytes (mm/internal/checksum.h).
  static Result<std::string> SyncAndHash(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open " + path);
    MM_ASSIGN_OR_RETURN(std::string hash, Xxh3HexOfFd(fd.get(), path));
    if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync " + path);
    return hash;
  }

  WriterOptions options_;
  std::map<std::string, SchemaDataset> schema_;
  size_t image_bytes_ = 0;
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
  int64_t num_samples_ = 0;
  int64_t shard_bytes_ = 0;  // estimate of the file's size so far
  std::vector<std::string> keys_;
  std::vector<std::string> sources_;
  std::vector<int32_t> original_size_;    // [N, 2]
  std::vector<int32_t> valid_box_;        // [N, 4]
  std::vector<int64_t> caption_offsets_;  // [N + 1]
  std::vector<std::string> captions_;     // [C]
  std::vector<int64_t> token_offsets_;    // [C + 1]
  std::vector<int32_t> tokens_;           // [T]
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
  MM_ASSIGN_OR_RETURN(auto schema, LoadSchemaDatasets());
  for (const char* name :
       {format::kImages, format::kKeys, format::kSources, format::kOriginalSize, format::kValidBox,
        format::kCaptionOffsets, format::kCaptions, format::kTokenOffsets, format::kTokens}) {
    if (schema.count(name) == 0) {
      return Status::Internal(std::string("embedded schema lacks dataset '") + name + "'");
    }
  }
  if (schema.size() != 9) {
    return Status::Internal("embedded schema lists datasets this writer does not write");
  }
  return std::unique_ptr<ShardWriter>(new ShardWriterImpl(options, std::move(schema)));
}

}  // namespace mm::pack
