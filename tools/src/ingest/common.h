// common.h: small rules every input format of ingest/ shares (private to ingest/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "ingest/ingest.h"
#include "mm/status.h"

namespace mm::pack {

// The most bytes read of one caption file (folder .txt or tar text member): far above any
// real caption (a 100 KB one is long), far below what would exhaust memory (a 50 GB sparse
// .txt). A larger one is an issue, file_too_large.
constexpr int64_t kMaxCaptionFileBytes = int64_t{16} << 20;

/// Whether `ext_no_dot` ("JPG", "png") names an image: jpg, jpeg, png, webp, gif, tif, tiff,
/// bmp, without regard to ASCII case.
bool IsImageExtension(const std::string& ext_no_dot);

/// Removes a leading UTF-8 byte-order mark.
void StripBom(std::string* s);

/// Removes one trailing "\n" or "\r\n" (what an editor or `echo` adds), nothing more.
void StripOneNewline(std::string* s);

/// `given` (an image path from a manifest) against `base_dir` (the manifest's folder), unless
/// it is absolute; lexically normal.
std::string Resolve(const std::filesystem::path& base_dir, const std::string& given);

/// What IngestToList does after every format (feed.cc too): captions cut to
/// fields.max_caption_bytes + 1, samples whose names are not storable (not UTF-8, a NUL) moved
/// to `result`'s issues, repeated keys made unique (MakeKeysUnique); the new list in
/// `spill_dir`. Errors: IOError, Corruption (the spill files).
[[nodiscard]] Status FinishIngestList(const FieldNames& fields,
                                      const std::filesystem::path& spill_dir, IngestResult* result);

/// A manifest mapped read-only, so that it is read through the page cache and never held: the
/// part behind the reader is given back (MADV_DONTNEED) as it goes, and a rewind faults it in
/// again from the cache.
class MappedText {
 public:
  MappedText() = default;
  ~MappedText();
  MappedText(const MappedText&) = delete;
  MappedText& operator=(const MappedText&) = delete;
  /// Maps the regular file `file` (or, `fd` >= 0, that open descriptor, named `file`).
  /// Errors: those of OpenRegularFile; IOError (mmap).
  [[nodiscard]] Status Open(const std::filesystem::path& file, int fd = -1);
  std::string_view text() const { return std::string_view(base_ == nullptr ? "" : base_, size_); }
  /// Gives back the pages wholly before `offset` once 4 MiB more than last time lie there.
  void DoneBefore(size_t offset);

 private:
  char* base_ = nullptr;
  size_t size_ = 0, released_ = 0;
};

}  // namespace mm::pack
