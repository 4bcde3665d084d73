// contact_sheet.cc: see contact_sheet.h.
#include "image/contact_sheet.h"

#include <glib.h>
#include <vips/vips.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/c_handles.h"
#include "image/image_pipeline.h"
#include "image/png.h"
#include "image/vips_errors.h"

namespace mm::pack {
namespace {

constexpr int kGap = 8;          // pixels between cells and around the sheet
constexpr int kLineHeight = 13;  // of 10 px DejaVu Sans at 72 dpi, with leading

// A rendered label: [height, width] uint8 coverage (255: ink).
struct Mask {
  int width = 0, height = 0;
  std::vector<uint8_t> ink;
};

// `text` as Pango markup that shows it literally.
std::string EscapeMarkup(const std::string& text) {
  gchar* escaped = g_markup_escape_text(text.c_str(), static_cast<gssize>(text.size()));
  std::string out(escaped);
  g_free(escaped);
  return out;
}

Result<Mask> RenderLabel(const std::string& text, int width, const std::string& font_file) {
  Mask mask;
  if (text.empty()) return mask;
  VipsImage* raw = nullptr;
  if (vips_text(&raw, EscapeMarkup(text).c_str(), "font", "DejaVu Sans 10", "fontfile",
                font_file.c_str(), "width", width, "dpi", 72, nullptr) != 0) {
    return Status::Internal("rendering a label: " + TakeVipsError());
  }
  VipsImagePtr image(raw);
  size_t size = 0;
  void* memory = vips_image_write_to_memory(image.get(), &size);
  if (memory == nullptr) return Status::Internal("rendering a label: " + TakeVipsError());
  mask.width = vips_image_get_width(image.get());
  mask.height = vips_image_get_height(image.get());
  const auto* bytes = static_cast<const uint8_t*>(memory);
  mask.ink.assign(bytes, bytes + std::min(size, static_cast<size_t>(mask.width) * mask.height));
  g_free(memory);
  return mask;
}

// Draws `mask` (clipped to `max_height` and the sheet) dark on the white sheet at (x, y).
void DrawMask(const Mask& mask, int x, int y, int max_height, int sheet_width, int sheet_height,
              std::vector<uint8_t>* sheet) {
  for (int my = 0; my < std::min(mask.height, max_height) && y + my < sheet_height; ++my) {
    for (int mx = 0; mx < mask.width && x + mx < sheet_width; ++mx) {
      const uint8_t ink = mask.ink[static_cast<size_t>(my) * mask.width + mx];
      uint8_t* p = sheet->data() + (static_cast<size_t>(y + my) * sheet_width + x + mx) * 3;
      for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(std::min<int>(p[c], 255 - ink));
    }
  }
}

}  // namespace

Status WriteContactSheet(const std::vector<SheetCell>& cells, int columns,
                         const std::string& font_file, const std::string& path, SheetLayout* layout,
                         int max_label_lines) {
  if (cells.empty()) return Status::InvalidArgument("a contact sheet needs at least one image");
  if (columns < 1) return Status::InvalidArgument("columns must be >= 1");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(font_file, ec)) {
    return Status::NotFound("font " + font_file +
                            " not found (Debian package fonts-dejavu-core, tools/install-deps.sh)");
  }
  MM_RETURN_NOT_OK(InitVips());
  int cell_w = 0, image_h = 0;
  for (const SheetCell& c : cells) {
    if (c.pixels == nullptr || c.width < 1 || c.height < 1) {
      return Status::InvalidArgument("a contact sheet cell without pixels");
    }
    cell_w = std::max(cell_w, c.width);
    image_h = std::max(image_h, c.height);
  }
  const int label_h = max_label_lines * kLineHeight;
  const int cell_h = image_h + 4 + label_h;
  columns = std::min<int>(columns, static_cast<int>(cells.size()));
  const int rows = (static_cast<int>(cells.size()) + columns - 1) / columns;
  layout->width = kGap + columns * (cell_w + kGap);
  layout->height = kGap + rows * (cell_h + kGap);
  std::vector<uint8_t> sheet(static_cast<size_t>(layout->width) * layout->height * 3, 255);
  layout->x.clear();
  layout->y.clear();
  for (size_t i = 0; i < cells.size(); ++i) {
    const SheetCell& c = cells[i];
    const int x = kGap + static_cast<int>(i % columns) * (cell_w + kGap);
    const int y = kGap + static_cast<int>(i / columns) * (cell_h + kGap);
    layout->x.push_back(x);
    layout->y.push_back(y);
    for (int row = 0; row < c.height; ++row) {
      std::memcpy(sheet.data() + (static_cast<size_t>(y + row) * layout->width + x) * 3,
                  c.pixels + static_cast<size_t>(row) * c.width * 3,
                  static_cast<size_t>(c.width) * 3);
    }
    MM_ASSIGN_OR_RETURN(Mask mask, RenderLabel(c.label, cell_w, font_file));
    DrawMask(mask, x, y + image_h + 4, label_h, layout->width, layout->height, &sheet);
  }
  return WritePng(sheet.data(), layout->width, layout->height, path);
}

}  // namespace mm::pack
