// colour.h: the --background colour of `mmpack build` (behind alpha, around a padded image),
// and how index.json writes it.
#pragma once

#include <cstdint>
#include <string>

#include "mm/status.h"

namespace mm::pack {

struct Rgb {
  uint8_t r = 255, g = 255, b = 255;
};
/// "white", "black", "gray"/"grey", "#rrggbb", "#rgb" or "r,g,b" (0..255).
/// Errors: InvalidArgument.
[[nodiscard]] Result<Rgb> ParseColour(const std::string& text);
/// "#rrggbb", lowercase.
std::string ColourHex(Rgb colour);

}  // namespace mm::pack
