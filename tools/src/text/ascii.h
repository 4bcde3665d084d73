// ascii.h: ASCII case folding shared by the mmpack tools (file extensions, CSV headers,
// library messages).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace mm::pack {

/// `text` with A-Z turned into a-z; every other byte (UTF-8 sequences included) unchanged.
inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace mm::pack
