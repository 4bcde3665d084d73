// jpeg_encode.cc: see jpeg_encode.h. libjpeg's errors longjmp back to the setjmp in
// Guarded(); the frames between hold no C++ object with a destructor (the output buffer is
// thread_local, grown by the destination manager's callbacks).
#include "image/jpeg_encode.h"

#include <string>

#include "mm/internal/libjpeg_error.h"

namespace mm::image {
namespace {

using mm::reader::internal::InstallJpegErrors;
using mm::reader::internal::JpegErrorManager;

// One compressor per thread, created on first use: creating one costs allocations.
struct Encoder {
  jpeg_compress_struct cinfo{};
  JpegErrorManager err{};
  jpeg_destination_mgr dest{};
  std::vector<uint8_t> out;  // written bytes; grows by doubling
  Encoder() {
    InstallJpegErrors(reinterpret_cast<j_common_ptr>(&cinfo), &err);
    jpeg_create_compress(&cinfo);
    dest.init_destination = [](j_compress_ptr c) {
      auto* e = static_cast<Encoder*>(c->client_data);
      if (e->out.size() < 4096) e->out.resize(4096);
      c->dest->next_output_byte = e->out.data();
      c->dest->free_in_buffer = e->out.size();
    };
    dest.empty_output_buffer = [](j_compress_ptr c) -> boolean {
      auto* e = static_cast<Encoder*>(c->client_data);
      const size_t used = e->out.size();  // libjpeg empties only a full buffer
      e->out.resize(used * 2);
      c->dest->next_output_byte = e->out.data() + used;
      c->dest->free_in_buffer = e->out.size() - used;
      return TRUE;
    };
    dest.term_destination = [](j_compress_ptr) {};
    cinfo.dest = &dest;
    cinfo.client_data = this;
  }
  ~Encoder() { jpeg_destroy_compress(&cinfo); }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
};

// Returns the size written, or 0 after a libjpeg error (the message is in e.err).
size_t Guarded(Encoder& e, const uint8_t* rgb, int width, int height, int quality,
               int restart_mcus) {
  jpeg_compress_struct& c = e.cinfo;
  if (setjmp(e.err.jump) != 0) {
    jpeg_abort_compress(&c);
    return 0;
  }
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);  // YCbCr, 4:2:0 (luma 2x2, chroma 1x1), ISLOW, JFIF, standard tables
  jpeg_set_quality(&c, quality, TRUE);
  c.restart_interval = static_cast<unsigned int>(restart_mcus);
  jpeg_start_compress(&c, TRUE);
  const size_t stride = static_cast<size_t>(width) * 3;
  while (c.next_scanline < c.image_height) {
    // libjpeg does not write through the row pointers: the const_cast is its API's.
    JSAMPROW row = const_cast<uint8_t*>(rgb + stride * c.next_scanline);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  return e.out.size() - c.dest->free_in_buffer;
}

}  // namespace

int JpegRestartMcus(int width) {
  const int mcus = (width + 15) / 16;
  return mcus % 2 == 0 ? 2 : 1;
}

Result<std::vector<uint8_t>> EncodeJpegRgb(const uint8_t* rgb, int width, int height, int quality,
                                           int restart_mcus) {
  if (width < 1 || height < 1 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION) {
    return Status::InvalidArgument("JPEG: cannot encode " + std::to_string(width) + "x" +
                                   std::to_string(height) + " pixels");
  }
  if (quality < 1 || quality > 100 || restart_mcus < 0 || restart_mcus > 65535) {
    return Status::InvalidArgument("JPEG: quality " + std::to_string(quality) +
                                   ", restart interval " + std::to_string(restart_mcus));
  }
  thread_local Encoder encoder;
  const size_t size = Guarded(encoder, rgb, width, height, quality, restart_mcus);
  if (size == 0) return Status::Internal(std::string("JPEG: ") + encoder.err.message);
  return std::vector<uint8_t>(encoder.out.data(), encoder.out.data() + size);
}

}  // namespace mm::image
