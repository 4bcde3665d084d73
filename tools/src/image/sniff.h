// sniff.h: what an encoded image is, read from its bytes alone without libvips (private to
// image/): the type from the magic bytes, the pixel size from the file's own header (so that
// a huge image is refused before anything is decoded), and whether a failed file was cut short
// (so that the reason in report.json depends on the bytes only, not on libvips' messages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mm::pack {

enum class ImageKind { kUnknown, kJpeg, kPng, kGif, kWebp, kTiff, kBmp };

/// The type from the magic bytes: JPEG, PNG, GIF, WebP, TIFF, BMP, else kUnknown.
ImageKind Sniff(const std::string& bytes);

/// The pixel size the file's own header states (PNG IHDR, GIF screen, BMP header, JPEG SOF),
/// before EXIF orientation. False when the header is not where the format puts it.
bool PeekSize(ImageKind kind, const std::string& bytes, int64_t* width, int64_t* height);

/// Whether the file's structure says it was cut short (a JPEG without EOI after its last SOS,
/// a PNG without IEND, ...); `message` (a decoder's) decides for the other types.
bool LooksTruncated(ImageKind kind, const std::string& bytes, const std::string& message);

/// Little- and big-endian 32-bit reads at byte `at` of `b` (the caller checks the size).
inline uint32_t Le32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}
inline uint32_t Be32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) << 24 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

}  // namespace mm::pack
