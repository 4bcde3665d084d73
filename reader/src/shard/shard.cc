// shard.cc: Shard::Open as named stages (see shard.h), and reads from the mapping.
#include "shard/shard.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/set_rules.h"
#include "mm/internal/zstd_codec.h"
#include "transforms/jpeg_region.h"

namespace mm::reader::internal {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the reader reads little-endian tables in place");

// zstd's errors become a Status in mm/internal/zstd_codec.h.
Status ZstdDecode(const uint8_t* src, size_t size, uint8_t* dst, size_t expected,
                  const std::string& where) {
  return mm::zstd::Decompress(src, size, dst, expected).WithContext(where);
}

}  // namespace

Result<std::unique_ptr<Shard>> Shard::Open(const std::string& path, const ShardEntry& entry,
                                           const SetInfo& info, const OpenOptions& options) {
  std::unique_ptr<Shard> shard(new Shard());
  MM_RETURN_NOT_OK(shard->Init(entry, info));
  MM_RETURN_NOT_OK(shard->MapFile(path, entry));
  if (options.verify_checksums) MM_RETURN_NOT_OK(shard->VerifyChecksum(entry));
  ShardQuery query{
      path, shard->name_, &entry, &info, shard->file_.get(), shard->image_bytes_, shard->jpeg_};
  MM_ASSIGN_OR_RETURN(ShardLayout layout, QueryShardLayout(query, options));
  // From here on HDF5 is closed and only the mapping is read.
  shard->TakeLayout(&layout);
  MM_RETURN_NOT_OK(shard->PlaceTables(&layout));
  MM_RETURN_NOT_OK(shard->CheckTables(entry, info));
  MM_RETURN_NOT_OK(shard->CheckIntact());  // the file did not change while it was checked
  return shard;
}

// Stage 1: names, counts and the image size.
Status Shard::Init(const ShardEntry& entry, const SetInfo& info) {
  name_ = entry.file;
  image_bytes_ = static_cast<size_t>(info.image_height) * info.image_width * info.channels;
  width_ = info.image_width;
  height_ = info.image_height;
  jpeg_ = info.image_codec == mm::format::ImageCodec::kJpeg;
  if (image_bytes_ >= kSizeMask) {
    return Status::Unsupported(name_ + ": images of " + std::to_string(image_bytes_) +
                               " bytes are too large for this reader");
  }
  num_samples_ = entry.samples;
  num_captions_ = entry.captions;
  num_tokens_ = entry.tokens;
  max_tokens_ = info.max_tokens;
  vocab_size_ = info.vocab_size;
  file_bytes_ = entry.bytes;
  return Status::OK();
}

// Stage 2: a regular file of index.json's size (a truncated shard fails here, before HDF5
// parses anything; a FIFO or device is never opened), mapped read-only.
Status Shard::MapFile(const std::string& path, const ShardEntry& entry) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, name_);
  if (!S_ISREG(st.st_mode)) return Status::IOError(name_ + ": not a regular file");
  if (static_cast<int64_t>(st.st_size) != entry.bytes) {
    return Status::Corruption(name_ + ": file is " + std::to_string(st.st_size) +
                              " bytes, index.json says " + std::to_string(entry.bytes) +
                              (st.st_size < entry.bytes ? " (truncated)" : ""));
  }
  path_ = path;
  MM_ASSIGN_OR_RETURN(file_, MappedFile::Open(path));
  if (file_->size() != static_cast<uint64_t>(entry.bytes)) {
    return Status::Corruption(name_ + ": file changed size while opening");
  }
  return Status::OK();
}

// Stage 3 (OpenOptions::verify_checksums): the whole file's XXH3-64 against index.json's.
Status Shard::VerifyChecksum(const ShardEntry& entry) const {
  const std::string h = mm::Xxh3Hex(file_->data(), file_->size());
  if (h != entry.xxh3_64) {
    return Status::Corruption(name_ + ": XXH3-64 is " + h + ", index.json says \"" + entry.xxh3_64 +
                              "\"");
  }
  return Status::OK();
}

// Stage 4 is QueryShardLayout (shard_layout.h); this keeps its chunk table and copies.
void Shard::TakeLayout(ShardLayout* layout) {
  chunk_offset_ = std::move(layout->chunk_offset);
  chunk_size_ = std::move(layout->chunk_size);
  key_size_ = layout->key_size;
  image_size_ = std::move(layout->image_size);
  for (int k = 0; k < kNumTables; ++k) owned_[k] = std::move(layout->owned[k]);
}

// Stage 5: each table inside the file, then views into the mapping (or the in-memory copy).
Status Shard::PlaceTables(ShardLayout* layout) {
  static constexpr const char* kNames[kNumTables] = {mm::format::kKeys, mm::format::kCaptionOffsets,
                                                     mm::format::kTokenOffsets,
                                                     mm::format::kTokens};
  const uint8_t* views[kNumTables] = {};
  for (int k = 0; k < kNumTables; ++k) {
    const TablePlace& p = layout->places[k];
    if (p.in_memory) {
      views[k] = owned_[k].data();
    } else if (p.bytes > 0) {
      if (!file_->Contains(p.offset, p.bytes)) {
        return Status::Corruption(name_ + ": dataset '" + kNames[k] + "' [" +
                                  std::to_string(p.offset) + ", +" + std::to_string(p.bytes) +
                                  ") lies outside the file (" + std::to_string(file_->size()) +
                                  " bytes)");
      }
      views[k] = file_->data() + p.offset;
    }
  }
  keys_ = views[kKeysTable];
  caption_offsets_ = views[kCaptionOffsetsTable];
  token_offsets_ = views[kTokenOffsetsTable];
  const uint8_t* tokens = views[kTokensTable];
  if (tokens && reinterpret_cast<uintptr_t>(tokens) % alignof(int32_t) != 0) {
    // int32 views need alignment; HDF5 does not align datasets by default. Copy (rare).
    owned_[kTokensTable].assign(tokens, tokens + layout->places[kTokensTable].bytes);
    tokens = owned_[kTokensTable].data();
  }
  tokens_ = reinterpret_cast<const int32_t*>(tokens);
  return Status::OK();
}

// Stage 6: the set rules on the mapped tables (mm/internal/set_rules.h): offsets from 0 to
// index.json's C and T, no caption over max_tokens, every token id in [0, vocab_size). One pass
// over caption_offsets, token_offsets and tokens.
Status Shard::CheckTables(const ShardEntry& entry, const SetInfo& info) const {
  TokenTables t;
  t.samples = entry.samples;
  t.captions = entry.captions;
  t.tokens = entry.tokens;
  t.caption_offsets = caption_offsets_;
  t.token_offsets = token_offsets_;
  t.token_ids = tokens_;
  return CheckTokenTables(name_, t, info).status();
}

int64_t Shard::CaptionBegin(int64_t s) const {
  const int64_t b = LoadI64(caption_offsets_, s);
  if (b < 0 || b > num_captions_) {
    MarkInconsistent();
    return 0;
  }
  return b;
}

int Shard::NumCaptions(int64_t s) const {
  const int64_t b = LoadI64(caption_offsets_, s), e = LoadI64(caption_offsets_, s + 1);
  if (b < 0 || e <= b || e > num_captions_ || e - b > (int64_t{1} << 30)) {
    MarkInconsistent();
    return 1;  // a divisor, never 0
  }
  return static_cast<int>(e - b);
}

Span<const int32_t> Shard::CaptionTokens(int64_t c) const {
  if (c < 0 || c >= num_captions_) {
    MarkInconsistent();
    return {};
  }
  const int64_t b = LoadI64(token_offsets_, c), e = LoadI64(token_offsets_, c + 1);
  if (b < 0 || e < b || e > num_tokens_ || e - b > max_tokens_) {
    MarkInconsistent();
    return {};
  }
  const Span<const int32_t> ids(tokens_ + b, static_cast<size_t>(e - b));
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) {  // an embedding row that does not exist
      MarkInconsistent();
      return {};
    }
  }
  return ids;
}

Status Shard::CheckIntact() const {
  const bool faulted = !file_->intact();
  if (!faulted && !inconsistent_.load(std::memory_order_relaxed)) return Status::OK();
  struct stat st;
  const std::string now = ::stat(path_.c_str(), &st) == 0
                              ? std::to_string(st.st_size) + " bytes"
                              : std::string("gone (") + std::strerror(errno) + ")";
  return Status::Corruption(
      name_ + ": the file changed while it was read (" +
      (faulted ? "pages past its end were touched" : "a table read from it is out of bounds") +
      "; it is now " + now + ", index.json says " + std::to_string(file_bytes_) +
      " bytes): a set must not be modified while it is read; reopen it");
}

int64_t Shard::SampleOfCaption(int64_t c) const {
  // Largest s with caption_offsets[s] <= c.
  int64_t lo = 0, hi = num_samples_;  // invariant: offsets[lo] <= c < offsets[hi]
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (LoadI64(caption_offsets_, mid) <= c)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

Status Shard::ReadImage(int64_t s, uint8_t* dst) const {
  if (s < 0 || s >= num_samples_) {
    return Status::OutOfRange(name_ + " sample " + std::to_string(s) + " of " +
                              std::to_string(num_samples_));
  }
  const uint8_t* src = file_->data() + chunk_offset_[s];
  uint32_t stored = chunk_size_[s];
  Status decoded;
  if (jpeg_) {
    int w = 0, h = 0;
    ImageSize(s, &w, &h);
    decoded = DecodeJpeg(src, stored & kSizeMask, w, h, dst)
                  .WithContext(name_ + " sample " + std::to_string(s));
  } else if (stored & kRawFlag) {
    std::memcpy(dst, src, image_bytes_);
  } else {
    decoded = ZstdDecode(src, stored & kSizeMask, dst, image_bytes_,
                         name_ + " sample " + std::to_string(s));
  }
  MM_RETURN_NOT_OK(CheckIntact());  // before the decoder's view of zeros, say why
  return decoded;
}

std::string_view Shard::StoredChunk(int64_t s, bool* compressed) const {
  *compressed = !(chunk_size_[s] & kRawFlag);
  return std::string_view(reinterpret_cast<const char*>(file_->data() + chunk_offset_[s]),
                          chunk_size_[s] & kSizeMask);
}

}  // namespace mm::reader::internal
