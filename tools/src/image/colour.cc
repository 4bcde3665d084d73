// colour.cc: see colour.h.
#include "image/colour.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace mm::pack {

Result<Rgb> ParseColour(const std::string& text_in) {
  std::string text;
  for (char c : text_in) {
    if (c != ' ') text.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  auto bad = [&] {
    return Status::InvalidArgument(
        "--background must be white, black, gray, #rrggbb or r,g,b; "
        "got '" +
        text_in + "'");
  };
  Rgb c;
  if (text == "white") return Rgb{255, 255, 255};
  if (text == "black") return Rgb{0, 0, 0};
  if (text == "gray" || text == "grey") return Rgb{128, 128, 128};
  if (!text.empty() && text[0] == '#') {
    std::string hex = text.substr(1);
    if (hex.size() == 3) hex = {hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]};
    if (hex.size() != 6 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return bad();
    }
    unsigned long v = std::strtoul(hex.c_str(), nullptr, 16);
    c.r = static_cast<uint8_t>(v >> 16);
    c.g = static_cast<uint8_t>(v >> 8);
    c.b = static_cast<uint8_t>(v);
    return c;
  }
  int r, g, b;
  char tail;
  if (std::sscanf(text.c_str(), "%d,%d,%d%c", &r, &g, &b, &tail) == 3 && r >= 0 && r <= 255 &&
      g >= 0 && g <= 255 && b >= 0 && b <= 255) {
    return Rgb{static_cast<uint8_t>(r), static_cast<uint8_t>(g), static_cast<uint8_t>(b)};
  }
  return bad();
}

std::string ColourHex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

}  // namespace mm::pack
