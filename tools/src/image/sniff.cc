// sniff.cc: see sniff.h.
#include "image/sniff.h"

#include <cstdlib>
#include <cstring>

#include "text/ascii.h"

namespace mm::pack {

ImageKind Sniff(const std::string& b) {
  auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return ImageKind::kJpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return ImageKind::kPng;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageKind::kGif;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageKind::kWebp;
  if (starts("II*\0", 4) || starts("MM\0*", 4) || starts("II+\0", 4) || starts("MM\0+", 4)) {
    return ImageKind::kTiff;
  }
  if (starts("BM", 2) && b.size() >= 26) return ImageKind::kBmp;
  return ImageKind::kUnknown;
}

bool PeekSize(ImageKind kind, const std::string& b, int64_t* w, int64_t* h) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  switch (kind) {
    case ImageKind::kPng:
      if (b.size() < 24 || b.compare(12, 4, "IHDR") != 0) return false;
      *w = Be32(b, 16);
      *h = Be32(b, 20);
      return true;
    case ImageKind::kGif:
      if (b.size() < 10) return false;
      *w = u8(6) | u8(7) << 8;
      *h = u8(8) | u8(9) << 8;
      return true;
    case ImageKind::kBmp: {
      int32_t bw = static_cast<int32_t>(Le32(b, 18)), bh = static_cast<int32_t>(Le32(b, 22));
      *w = std::abs(int64_t{bw});
      *h = std::abs(int64_t{bh});
      return true;
    }
    case ImageKind::kJpeg: {
      size_t i = 2;
      while (i + 9 < b.size()) {
        if (u8(i) != 0xFF) return false;
        unsigned marker = u8(i + 1);
        if (marker == 0xFF) {
          ++i;
          continue;
        }
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
          i += 2;
          continue;
        }
        size_t len = u8(i + 2) << 8 | u8(i + 3);
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
            marker != 0xCC) {
          *h = u8(i + 5) << 8 | u8(i + 6);
          *w = u8(i + 7) << 8 | u8(i + 8);
          return true;
        }
        if (marker == 0xDA || len < 2) return false;
        i += 2 + len;
      }
      return false;
    }
    default:
      return false;
  }
}

bool LooksTruncated(ImageKind kind, const std::string& b, const std::string& message) {
  switch (kind) {
    case ImageKind::kJpeg: {
      // Entropy-coded data never holds FF D9 (FF is stuffed), so a complete file has an EOI
      // after its last SOS.
      size_t sos = std::string::npos;
      for (size_t i = b.size(); i-- > 1;) {
        if (static_cast<unsigned char>(b[i - 1]) == 0xFF &&
            static_cast<unsigned char>(b[i]) == 0xDA) {
          sos = i;
          break;
        }
      }
      if (sos == std::string::npos) return b.size() < 1024;
      return b.find("\xFF\xD9", sos) == std::string::npos;
    }
    case ImageKind::kPng:
      return b.find("IEND", b.size() > 64 ? b.size() - 64 : 0) == std::string::npos;
    case ImageKind::kGif:
      return b.back() != 0x3B;
    case ImageKind::kWebp:
      return b.size() >= 12 && static_cast<uint64_t>(Le32(b, 4)) + 8 > b.size();
    case ImageKind::kBmp:
      return Le32(b, 2) > b.size();
    default:
      break;
  }
  const std::string m = AsciiLower(message);
  return m.find("truncat") != std::string::npos || m.find("premature") != std::string::npos ||
         m.find("unexpected end") != std::string::npos;
}

}  // namespace mm::pack
