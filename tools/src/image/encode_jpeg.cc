// encode_jpeg.cc: EncodeJpeg (image_pipeline.h), the stored image of `mmpack build --codec jpeg`.
#include "mm/internal/jpeg_encode.h"

#include <vector>

#include "image/image_pipeline.h"

namespace mm::pack {

// 4:2:0 chroma subsampling: what FFCV (OpenCV's imencode), Pillow and libjpeg's cjpeg write at
// quality 90, and smaller than 4:4:4 on photos. The loader's resize after a random-resized crop
// shrinks the image, so the halved chroma resolution is rarely what limits the pixels it hands
// out. Baseline Huffman tables (no progressive, no arithmetic coding: every libjpeg, Pillow and
// browser decodes them), the ISLOW forward DCT. Restart markers every JpegRestartMcus(width)
// MCUs, so that the loader's crops decode only the MCUs they cover (FORMAT.md "Stored JPEGs").
Result<std::vector<uint8_t>> EncodeJpeg(const uint8_t* rgb, int width, int height, int quality) {
  return image::EncodeJpegRgb(rgb, width, height, quality, image::JpegRestartMcus(width));
}

}  // namespace mm::pack
