// caption.cc: see caption.h.
#include "text/caption.h"

#include <cstdint>

#include "mm/internal/utf8.h"

namespace mm::pack {
namespace {

// Unicode's White_Space property (PropList.txt, Unicode 15): the code points a reader sees
// as blank. Python's str.isspace() adds U+001C..U+001F; those are not blank and stay text.
bool IsWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Whether valid UTF-8 `s` holds only White_Space code points (true when empty).
bool OnlyWhiteSpace(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; ++k) cp = cp << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if (!IsWhiteSpace(cp)) return false;
    i += len;
  }
  return true;
}

}  // namespace

const char* CheckCaption(std::string_view caption, int64_t max_bytes) {
  if (static_cast<int64_t>(caption.size()) > max_bytes) return "caption_too_large";
  if (!IsValidUtf8(caption)) return "invalid_utf8";
  // Valid UTF-8 (U+0000), but HDF5 strings end at NUL: it could not come back whole.
  if (caption.find('\0') != std::string_view::npos) return "nul_in_caption";
  if (OnlyWhiteSpace(caption)) return "empty_caption";
  return nullptr;
}

}  // namespace mm::pack
