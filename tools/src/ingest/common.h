// common.h: small rules every input format of ingest/ shares (private to ingest/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

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

}  // namespace mm::pack
