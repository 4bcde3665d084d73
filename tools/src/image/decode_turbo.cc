// decode_turbo.cc: DecodeJpegTurbo (decode.h).
#include <turbojpeg.h>

#include <string>
#include <vector>

#include "image/decode.h"
#include "image/vips_errors.h"

namespace mm::pack {

// JPEG through TurboJPEG (libjpeg-turbo's DCT scaling straight into packed RGB or grey):
// the same library libvips' jpegload calls, without the pipeline around it, which costs
// about as much again as the decode at these sizes. 1: decoded; 0: not handled here (CMYK,
// YCCK, a header TurboJPEG refuses), use libvips; -1: failed (`failure` says why).
int DecodeJpegTurbo(const std::string& bytes, int shrink, Decoded* out, ImageFailure* failure) {
  thread_local TjHandlePtr handle(tjInitDecompress());
  tjhandle tj = handle.get();
  if (tj == nullptr) return 0;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned long size = static_cast<unsigned long>(bytes.size());
  int w = 0, h = 0, subsamp = 0, colourspace = 0;
  if (tjDecompressHeader3(tj, data, size, &w, &h, &subsamp, &colourspace) != 0) return 0;
  if (colourspace != TJCS_RGB && colourspace != TJCS_YCbCr && colourspace != TJCS_GRAY) return 0;
  const tjscalingfactor scale = {1, shrink};
  const int sw = TJSCALED(w, scale), sh = TJSCALED(h, scale);
  const int bands = colourspace == TJCS_GRAY ? 1 : 3;
  thread_local std::vector<uint8_t> buffer;  // reused: no page faults per image
  buffer.resize(static_cast<size_t>(sw) * sh * bands);
  // Stop at the first warning: libjpeg "survives" damaged entropy data by painting grey,
  // which would put a broken image in the shards.
  if (tjDecompress2(tj, data, size, buffer.data(), sw, /*pitch=*/0, sh,
                    bands == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
    std::string message = tjGetErrorStr2(tj);
    if (tjGetErrorCode(tj) == TJERR_WARNING &&
        message.find("extraneous bytes") != std::string::npos) {
      // Stray bytes between segments (a few COCO photos have them): harmless. libvips decodes
      // these through, as it does with every warning except truncation.
      return 0;
    }
    const bool truncated =
        message.find("Premature end") != std::string::npos ||
        (tjGetErrorCode(tj) != TJERR_WARNING && LooksTruncated(ImageKind::kJpeg, bytes, message));
    return Fail(failure, truncated ? "truncated_image" : "corrupt_image", "TurboJPEG: " + message),
           -1;
  }
  out->pixels = buffer.data();  // valid until this thread's next decode
  out->width = sw;
  out->height = sh;
  out->bands = bands;
  return 1;
}

}  // namespace mm::pack
