// encode_jpeg.cc: EncodeJpeg and DecodeStoredJpeg (image_pipeline.h): the stored image of
// `mmpack build --codec jpeg`, and its pixels as a reader reads them back.
#include <turbojpeg.h>

#include <string>
#include <vector>

#include "base/c_handles.h"
#include "image/image_pipeline.h"
#include "image/jpeg_encode.h"

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

Result<std::vector<uint8_t>> DecodeStoredJpeg(const std::vector<uint8_t>& jpeg, int width,
                                              int height) {
  thread_local TjHandlePtr handle(tjInitDecompress());
  tjhandle tj = handle.get();
  if (tj == nullptr) return Status::Internal("TurboJPEG: cannot create a decompressor");
  int w = 0, h = 0, subsamp = 0, colourspace = 0;
  const auto size = static_cast<unsigned long>(jpeg.size());
  if (tjDecompressHeader3(tj, jpeg.data(), size, &w, &h, &subsamp, &colourspace) != 0 ||
      w != width || h != height) {
    return Status::Corruption("a stored JPEG's header is not " + std::to_string(width) + "x" +
                              std::to_string(height));
  }
  std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * 3);
  if (tjDecompress2(tj, jpeg.data(), size, pixels.data(), w, 0, h, TJPF_RGB, 0) != 0) {
    return Status::Corruption(std::string("a stored JPEG does not decode: ") + tjGetErrorStr2(tj));
  }
  return pixels;
}

}  // namespace mm::pack
