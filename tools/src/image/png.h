// png.h: an [H, W, 3] uint8 sRGB image written as a PNG file (`mmpack show`), by libvips.
#pragma once

#include <cstdint>
#include <string>

#include "mm/status.h"

namespace mm::pack {

/// Writes `pixels` ([height, width, 3] uint8, sRGB, row-major) to `path` as PNG.
/// Errors: Internal (libvips cannot start or wrap the pixels), IOError (the file cannot be
/// written; libvips' message).
[[nodiscard]] Status WritePng(const uint8_t* pixels, int width, int height,
                              const std::string& path);

}  // namespace mm::pack
