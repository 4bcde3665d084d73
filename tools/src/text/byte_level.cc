// byte_level.cc: see byte_level.h.
#include "text/byte_level.h"

#include <vector>

#include "text/unicode_text.h"

namespace mm::pack {

const ByteLevelMap& GetByteLevelMap() {
  static const ByteLevelMap map = [] {
    ByteLevelMap m;
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
    std::vector<bool> printable(256, false);
    for (int b : bs) printable[b] = true;
    for (int b : bs) m.code_point[b] = static_cast<char32_t>(b);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      if (!printable[b]) {
        bs.push_back(b);
        m.code_point[b] = static_cast<char32_t>(256 + n++);
      }
    }
    for (size_t i = 0; i < bs.size(); ++i) m.order[bs[i]] = static_cast<int>(i);
    for (int b = 0; b < 256; ++b) AppendUtf8(m.code_point[b], &m.utf8[b]);
    return m;
  }();
  return map;
}

}  // namespace mm::pack
