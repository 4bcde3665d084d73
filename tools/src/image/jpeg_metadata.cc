// jpeg_metadata.cc: see jpeg_metadata.h.
#include "image/jpeg_metadata.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "image/sniff.h"

namespace mm::pack {
namespace {

// The text of an ICC profile's description tag ('desc'; ICC.1:2001 textDescriptionType in
// v2, the first record of a multiLocalizedUnicodeType in v4; non-ASCII as '?'). Empty when
// the profile has none or is malformed.
std::string IccDescription(const uint8_t* p, size_t n) {
  auto be32 = [&](size_t at) {
    return static_cast<uint32_t>(p[at]) << 24 | static_cast<uint32_t>(p[at + 1]) << 16 |
           static_cast<uint32_t>(p[at + 2]) << 8 | p[at + 3];
  };
  if (n < 132) return {};
  const uint32_t tags = be32(128);
  for (uint32_t t = 0; t < tags && 132 + 12 * (size_t{t} + 1) <= n; ++t) {
    const size_t entry = 132 + 12 * size_t{t};
    if (std::memcmp(p + entry, "desc", 4) != 0) continue;
    const size_t at = be32(entry + 4), size = be32(entry + 8);
    if (at > n || size > n - at || size < 12) return {};
    std::string text;
    if (std::memcmp(p + at, "desc", 4) == 0) {
      const size_t len = std::min<size_t>(be32(at + 8), size - 12);
      for (size_t k = 0; k < len && p[at + 12 + k] != 0; ++k) {
        text.push_back(p[at + 12 + k] < 0x80 ? static_cast<char>(p[at + 12 + k]) : '?');
      }
    } else if (std::memcmp(p + at, "mluc", 4) == 0 && size >= 28) {
      const size_t len = be32(at + 20), off = be32(at + 24);
      if (off > size || len > size - off) return {};
      for (size_t k = 0; k + 1 < len; k += 2) {
        const unsigned c = p[at + off + k] << 8 | p[at + off + k + 1];
        if (c == 0) break;
        text.push_back(c < 0x80 ? static_cast<char>(c) : '?');
      }
    }
    return text;
  }
  return {};
}

// One segment of a JPEG before its image data: its marker and where it lies (`at`: its 0xFF;
// `len`: the length field, which counts itself and the payload after it).
struct JpegSegment {
  unsigned marker;
  size_t at, len;
};

// Calls `visit(segment)` on each whole segment from SOI up to the image data (SOS) or EOI, in
// file order, while it returns true.
template <typename Visit>
void ForEachSegment(const std::string& b, Visit visit) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  size_t i = 2;
  while (i + 4 <= b.size() && u8(i) == 0xFF) {
    const unsigned marker = u8(i + 1);
    if (marker == 0xDA || marker == 0xD9) break;  // image data: no metadata after this
    const size_t len = u8(i + 2) << 8 | u8(i + 3);
    if (len < 2 || i + 2 + len > b.size()) break;
    if (!visit(JpegSegment{marker, i, len})) return;
    i += 2 + len;
  }
}

}  // namespace

int JpegExifOrientation(const std::string& b) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  int orientation = 1;
  ForEachSegment(b, [&](const JpegSegment& s) {
    if (s.marker != 0xE1 || s.len < 8 || b.compare(s.at + 4, 6, std::string("Exif\0\0", 6)) != 0) {
      return true;  // not the first Exif segment: go on
    }
    const size_t tiff = s.at + 10, end = s.at + 2 + s.len;
    if (tiff + 8 > end) return false;
    const bool le = b.compare(tiff, 2, "II") == 0;
    if (!le && b.compare(tiff, 2, "MM") != 0) return false;
    auto get16 = [&](size_t at) {
      return le ? u8(at) | u8(at + 1) << 8 : u8(at) << 8 | u8(at + 1);
    };
    auto get32 = [&](size_t at) { return le ? Le32(b, at) : Be32(b, at); };
    const size_t ifd = tiff + get32(tiff + 4);
    if (ifd + 2 > end) return false;
    const unsigned entries = get16(ifd);
    for (unsigned e = 0; e < entries; ++e) {
      const size_t at = ifd + 2 + 12 * static_cast<size_t>(e);
      if (at + 12 > end) return false;
      if (get16(at) == 0x0112) {
        const unsigned type = get16(at + 2), v = get16(at + 8);
        if (type == 3 && v >= 1 && v <= 8) orientation = static_cast<int>(v);  // SHORT
        return false;
      }
    }
    return false;
  });
  return orientation;
}

std::string JpegIccProfile(const std::string& b) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  static const std::string kTag("ICC_PROFILE\0", 12);
  std::vector<std::string> pieces;
  bool bad = false;
  ForEachSegment(b, [&](const JpegSegment& s) {
    if (s.marker != 0xE2 || s.len < 2 + 14 || b.compare(s.at + 4, 12, kTag) != 0) return true;
    const unsigned seq = u8(s.at + 16), count = u8(s.at + 17);
    if (count == 0 || seq == 0 || seq > count) return !(bad = true);
    if (pieces.empty()) pieces.resize(count);
    if (pieces.size() != count) return !(bad = true);
    pieces[seq - 1] = b.substr(s.at + 18, s.len - 16);
    return true;
  });
  std::string profile;
  for (const std::string& piece : pieces) {
    if (bad || piece.empty()) return {};
    profile += piece;
  }
  return profile;
}

// sRGB is recognised by its description naming "sRGB" as a word ("sRGB IEC61966-2.1",
// "sRGB v1.31 (Canon)", "Nikon sRGB 4.0.0.3002"; not "esRGB" or "scRGB"): those pixels are
// stored as decoded, which is what a round trip through lcms would give, less its rounding
// and its cost. 22 of the 51 coco-cc photos carry a profile; 7 need converting (Adobe RGB
// (1998), Camera RGB Profile).
bool IccNeedsConversion(const uint8_t* p, size_t n, bool grey) {
  if (n < 132 || std::memcmp(p + 36, "acsp", 4) != 0) return false;
  if (std::memcmp(p + 16, grey ? "GRAY" : "RGB ", 4) != 0) return false;
  const std::string desc = IccDescription(p, n);
  for (size_t at = desc.find("sRGB"); at != std::string::npos; at = desc.find("sRGB", at + 1)) {
    const bool word_start = at == 0 || !std::isalnum(static_cast<unsigned char>(desc[at - 1]));
    const bool word_end =
        at + 4 == desc.size() || !std::isalnum(static_cast<unsigned char>(desc[at + 4]));
    if (word_start && word_end) return false;
  }
  return true;
}

}  // namespace mm::pack
