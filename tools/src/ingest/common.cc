// common.cc: see common.h.
#include "ingest/common.h"

#include "text/ascii.h"

namespace mm::pack {

namespace fs = std::filesystem;

const char* const kImageExtensions[] = {"jpg", "jpeg", "png", "webp", "gif", "tif", "tiff", "bmp"};

bool IsImageExtension(const std::string& ext_no_dot) {
  std::string e = AsciiLower(ext_no_dot);
  for (const char* x : kImageExtensions) {
    if (e == x) return true;
  }
  return false;
}

void StripBom(std::string* s) {
  if (s->size() >= 3 && static_cast<unsigned char>((*s)[0]) == 0xEF &&
      static_cast<unsigned char>((*s)[1]) == 0xBB && static_cast<unsigned char>((*s)[2]) == 0xBF) {
    s->erase(0, 3);
  }
}

void StripOneNewline(std::string* s) {
  if (!s->empty() && s->back() == '\n') {
    s->pop_back();
    if (!s->empty() && s->back() == '\r') s->pop_back();
  }
}

std::string Resolve(const fs::path& base_dir, const std::string& given) {
  fs::path p(given);
  if (p.is_absolute()) return p.string();
  return (base_dir / p).lexically_normal().string();
}

}  // namespace mm::pack
