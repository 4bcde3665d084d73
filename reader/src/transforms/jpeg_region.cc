// jpeg_region.cc: see jpeg_region.h. libjpeg reports errors through error_exit, which must not
// return: it longjmps back to the setjmp in Guarded(); the frames between hold no C++ object
// with a destructor (the scratch buffer is thread_local and resized before decoding starts).
#include "transforms/jpeg_region.h"

// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstdio>
#include <cstring>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <string>
#include <vector>

namespace mm::reader::internal {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

// Level -1 is a warning: libjpeg's name for damaged data it decodes through by painting grey
// ("Corrupt JPEG data", "Premature end of JPEG file"). Stored shards are mmpack's own files:
// any warning means the bytes were damaged, so it is an error. Trace messages (>= 0) are
// dropped.
void EmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) ErrorExit(cinfo);
}

// One decompressor per thread, created on first use and reset (jpeg_abort_decompress) after
// every image: creating one costs allocations that would otherwise come per sample.
struct Decoder {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  Decoder() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = ErrorExit;
    err.pub.emit_message = EmitMessage;
    jpeg_create_decompress(&cinfo);
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

Decoder& ThreadDecoder() {
  thread_local Decoder decoder;
  return decoder;
}

std::vector<uint8_t>& ThreadBuffer() {
  thread_local std::vector<uint8_t> buffer;  // reused: no page faults per image
  return buffer;
}

// What the guarded part learned, or why it stopped.
struct Job {
  const uint8_t* data;
  size_t size;
  int scale_num;  // 0: header only
  int x0, y0, x1, y1;
  JpegRegion* out;
  int expect_w = 0, expect_h = 0;  // > 0: the header must say this size (checked before decoding)
  bool finish = false;  // the whole image: read on to the end (damage after the last row is found)
  int width = 0, height = 0;
  bool unsupported = false;
  bool mismatch = false;
};

// Reads the header; with a scale, decodes the region. Returns false after a libjpeg error
// (the message is in the decoder's ErrorManager). No C++ object with a destructor lives in
// this frame.
bool Guarded(Decoder& d, Job& job) {
  jpeg_decompress_struct& c = d.cinfo;
  if (setjmp(d.err.jump) != 0) {
    jpeg_abort_decompress(&c);
    return false;
  }
  jpeg_mem_src(&c, job.data, static_cast<unsigned long>(job.size));
  jpeg_read_header(&c, TRUE);
  job.width = static_cast<int>(c.image_width);
  job.height = static_cast<int>(c.image_height);
  if (job.scale_num == 0) {
    jpeg_abort_decompress(&c);
    return true;
  }
  if (job.expect_w > 0 && (job.width != job.expect_w || job.height != job.expect_h)) {
    job.mismatch = true;  // a damaged header may state 65535 x 65535: never allocate for it
    jpeg_abort_decompress(&c);
    return true;
  }
  if (c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK) {
    job.unsupported = true;
    jpeg_abort_decompress(&c);
    return true;
  }
  c.out_color_space = JCS_RGB;
  c.scale_num = static_cast<unsigned int>(job.scale_num);
  c.scale_denom = 8;
  c.dct_method = JDCT_ISLOW;
  c.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&c);
  JpegRegion& r = *job.out;
  r.width = job.width;
  r.height = job.height;
  r.scaled_w = static_cast<int>(c.output_width);
  r.scaled_h = static_cast<int>(c.output_height);
  const int x0 = std::clamp(job.x0, 0, r.scaled_w - 1);
  const int x1 = std::clamp(job.x1, x0 + 1, r.scaled_w);
  const int y0 = std::clamp(job.y0, 0, r.scaled_h - 1);
  const int y1 = std::clamp(job.y1, y0 + 1, r.scaled_h);
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), cw = static_cast<JDIMENSION>(x1 - x0);
  if (cw < c.output_width) jpeg_crop_scanline(&c, &xoff, &cw);  // widens to iMCU columns
  r.x0 = static_cast<int>(xoff);
  r.x1 = static_cast<int>(xoff + cw);
  r.y0 = y0;
  r.y1 = y1;
  r.stride = static_cast<int>(c.output_width) * 3;  // output_width is now the cropped width
  std::vector<uint8_t>& buffer = ThreadBuffer();
  buffer.resize(static_cast<size_t>(r.stride) * (y1 - y0));
  if (y0 > 0 &&
      jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(y0)) != static_cast<JDIMENSION>(y0)) {
    ERREXIT(&c, JERR_INPUT_EOF);
  }
  while (static_cast<int>(c.output_scanline) < y1) {
    JSAMPROW row = buffer.data() + static_cast<size_t>(c.output_scanline - y0) * r.stride;
    if (jpeg_read_scanlines(&c, &row, 1) != 1) ERREXIT(&c, JERR_INPUT_EOF);
  }
  r.pixels = buffer.data();
  if (job.finish && c.output_scanline == c.output_height) {
    // The whole image was decoded: read on to EOI, so that damaged entropy data the last rows
    // did not reach ("extraneous bytes before marker") is a warning, hence an error.
    jpeg_finish_decompress(&c);
  } else {
    jpeg_abort_decompress(&c);  // the rows below the region are never decoded
  }
  return true;
}

Status Run(Job& job) {
  Decoder& d = ThreadDecoder();
  if (!Guarded(d, job)) return Status::Corruption(std::string("JPEG: ") + d.err.message);
  if (job.unsupported) return Status::Unsupported("JPEG: CMYK/YCCK images are not supported");
  if (job.mismatch) {
    return Status::Corruption("JPEG is " + std::to_string(job.width) + "x" +
                              std::to_string(job.height) + " pixels, the image_size table says " +
                              std::to_string(job.expect_w) + "x" + std::to_string(job.expect_h));
  }
  return Status::OK();
}

}  // namespace

Status JpegDimensions(const uint8_t* data, size_t size, int* width, int* height) {
  Job job{data, size, 0, 0, 0, 0, 0, nullptr};
  MM_RETURN_NOT_OK(Run(job));
  *width = job.width;
  *height = job.height;
  return Status::OK();
}

Status DecodeJpegRegion(const uint8_t* data, size_t size, int scale_num, int x0, int y0, int x1,
                        int y1, JpegRegion* out, int expect_width, int expect_height) {
  if (scale_num < 1 || scale_num > 8) {
    return Status::InvalidArgument("JPEG: scale " + std::to_string(scale_num) + "/8");
  }
  Job job{data, size, scale_num, x0, y0, x1, y1, out};
  job.expect_w = expect_width;
  job.expect_h = expect_height;
  return Run(job);
}

Status DecodeJpeg(const uint8_t* data, size_t size, int width, int height, uint8_t* dst) {
  JpegRegion r;
  Job job{data, size, 8, 0, 0, width, height, &r};
  job.expect_w = width;
  job.expect_h = height;
  job.finish = true;
  MM_RETURN_NOT_OK(Run(job));
  if (r.x0 != 0 || r.y0 != 0 || r.x1 != width || r.y1 != height) {
    return Status::Corruption("JPEG: decoded region is not the whole image");
  }
  const size_t row = static_cast<size_t>(width) * 3;
  for (int y = 0; y < height; ++y) {
    std::memcpy(dst + row * static_cast<size_t>(y), r.pixels + static_cast<size_t>(r.stride) * y,
                row);
  }
  return Status::OK();
}

}  // namespace mm::reader::internal
