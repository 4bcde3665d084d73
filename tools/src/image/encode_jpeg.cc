// encode_jpeg.cc: EncodeJpeg (image_pipeline.h), the stored image of `mmpack build --codec jpeg`.
#include <turbojpeg.h>

#include <string>
#include <vector>

#include "image/image_pipeline.h"
#include "mm/internal/c_handles.h"

namespace mm::pack {

// TurboJPEG's compressor with 4:2:0 chroma subsampling: what FFCV (OpenCV's imencode), Pillow and
// libjpeg's cjpeg write at quality 90, and smaller than 4:4:4 on photos. The loader's resize
// after a random-resized crop shrinks the image, so the halved chroma resolution is rarely what
// limits the pixels it hands out. Baseline Huffman tables (no progressive, no arithmetic coding:
// every libjpeg, Pillow and browser decodes them), the ISLOW forward DCT.
Result<std::vector<uint8_t>> EncodeJpeg(const uint8_t* rgb, int width, int height, int quality) {
  thread_local TjHandlePtr handle(tjInitCompress());
  tjhandle tj = handle.get();
  if (tj == nullptr) return Status::Internal("TurboJPEG: cannot create a compressor");
  thread_local std::vector<unsigned char> buffer;  // reused: no allocation per image
  buffer.resize(tjBufSize(width, height, TJSAMP_420));
  unsigned char* out = buffer.data();
  unsigned long size = static_cast<unsigned long>(buffer.size());
  if (tjCompress2(tj, rgb, width, /*pitch=*/0, height, TJPF_RGB, &out, &size, TJSAMP_420,
                  quality, TJFLAG_NOREALLOC) != 0) {
    return Status::Internal(std::string("TurboJPEG: ") + tjGetErrorStr2(tj));
  }
  return std::vector<uint8_t>(buffer.data(), buffer.data() + size);
}

}  // namespace mm::pack
