// contact_sheet.h: a grid of images, each with a few lines of text under it, written as one
// PNG (`mmpack preview`). Images are placed pixel for pixel (no resampling), so a sample's
// stored pixels appear unchanged in the sheet. Text is rendered by libvips (vips_text: Pango
// and FreeType) from a TrueType file, dark on white, wrapped to the cell's width.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mm/status.h"

namespace mm::pack {

/// DejaVu Sans from Debian's fonts-dejavu-core (tools/install-deps.sh).
inline constexpr const char* kSheetFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

struct SheetCell {
  const uint8_t* pixels = nullptr;  // [height, width, 3] uint8 sRGB, row-major
  int width = 0, height = 0;        // pixels
  std::string label;                // plain UTF-8 text (not markup); '\n' breaks a line
};

struct SheetLayout {
  int width = 0, height = 0;  // of the whole sheet, pixels
  std::vector<int> x, y;      // each cell's image's top-left corner in the sheet
};

/// Lays `cells` out `columns` to a row (left to right, then down) on white, each label under
/// its image (at most `max_label_lines` lines, 10 px text), and writes the sheet to `path`.
/// Errors: InvalidArgument (no cells, columns < 1, a cell without pixels), NotFound (no font
/// file at `font_file`), Internal / IOError (libvips' message).
[[nodiscard]] Status WriteContactSheet(const std::vector<SheetCell>& cells, int columns,
                                       const std::string& font_file, const std::string& path,
                                       SheetLayout* layout, int max_label_lines = 5);

}  // namespace mm::pack
