// png.cc: see png.h.
#include "image/png.h"

#include <vips/vips.h>

#include "base/c_handles.h"
#include "image/image_pipeline.h"
#include "image/vips_errors.h"

namespace mm::pack {

Status WritePng(const uint8_t* pixels, int width, int height, const std::string& path) {
  MM_RETURN_NOT_OK(InitVips());
  const size_t bytes = static_cast<size_t>(width) * height * 3;
  VipsImagePtr image(
      vips_image_new_from_memory(pixels, bytes, width, height, 3, VIPS_FORMAT_UCHAR));
  if (!image) return Status::Internal("vips_image_new_from_memory: " + TakeVipsError());
  image->Type = VIPS_INTERPRETATION_sRGB;
  if (vips_pngsave(image.get(), path.c_str(), nullptr) != 0) {
    return Status::IOError(path + ": " + TakeVipsError());
  }
  return Status::OK();
}

}  // namespace mm::pack
