// jpeg_region.cc: see jpeg_region.h. libjpeg reports errors through error_exit, which must not
// return: it longjmps back to the setjmp in Guarded() (libjpeg_error.h); the frames between hold
// no C++ object with a destructor (the scratch buffers are thread_local and resized before
// decoding starts).
#include "transforms/jpeg_region.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "mm/internal/libjpeg_error.h"

namespace mm::reader::internal {
namespace {

// One decompressor per thread, created on first use and reset (jpeg_abort_decompress) after
// every image: creating one costs allocations that would otherwise come per sample.
struct Decoder {
  jpeg_decompress_struct cinfo{};
  JpegErrorManager err{};
  Decoder() {
    InstallJpegErrors(reinterpret_cast<j_common_ptr>(&cinfo), &err);
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

// What slicing needs of a JPEG's headers (ITU-T T.81 B.2): where the frame header states the
// size, where the entropy-coded data starts, the MCU grid and the restart interval.
struct ScanLayout {
  size_t sof_size_at = 0;  // offset of the frame header's height (2 bytes), then width (2)
  size_t data_at = 0;      // the first entropy-coded byte (after the SOS segment)
  int width = 0, height = 0;
  int mcu_w = 0, mcu_h = 0;    // pixels at full size
  int mcus_x = 0, mcus_y = 0;  // MCU columns and rows
  int interval = 0;            // MCUs per restart interval
};

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// Reads the markers up to the scan. False (the caller decodes the ordinary way) unless the
// image is a baseline or extended sequential, 8-bit, 3-component, interleaved single-scan JPEG
// whose restart intervals never straddle two MCU rows: what mmpack's encoder writes
// (mm/internal/jpeg_encode.h). Every read is bounds-checked: the bytes may be damaged.
bool ParseScanLayout(const uint8_t* d, size_t n, ScanLayout* out) {
  if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return false;
  ScanLayout l;
  int components = 0, hmax = 0, vmax = 0;
  size_t p = 2;
  for (;;) {
    if (p + 4 > n || d[p] != 0xFF) return false;
    while (p + 4 <= n && d[p + 1] == 0xFF) ++p;  // fill bytes before a marker
    if (p + 4 > n) return false;
    const uint8_t m = d[p + 1];
    const size_t len = Be16(d + p + 2);
    if (len < 2 || len > n - p - 2) return false;
    const uint8_t* seg = d + p + 4;
    const size_t seg_len = len - 2;
    if (m == 0xC0 || m == 0xC1) {  // SOF0 baseline, SOF1 extended sequential (Huffman)
      if (components != 0 || seg_len < 6 || seg[0] != 8) return false;
      l.sof_size_at = p + 5;
      l.height = Be16(seg + 1);
      l.width = Be16(seg + 3);
      components = seg[5];
      if (components != 3 || seg_len < 6 + 3 * static_cast<size_t>(components)) return false;
      for (int c = 0; c < components; ++c) {
        const int h = seg[7 + 3 * c] >> 4, v = seg[7 + 3 * c] & 15;
        if (h < 1 || h > 4 || v < 1 || v > 4) return false;
        hmax = std::max(hmax, h);
        vmax = std::max(vmax, v);
      }
    } else if ((m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) || m == 0xDC) {
      return false;          // progressive, lossless, arithmetic, hierarchical; DNL
    } else if (m == 0xDD) {  // DRI
      if (seg_len < 2) return false;
      l.interval = Be16(seg);
    } else if (m == 0xDA) {  // SOS: one scan of every component (interleaved)
      if (components == 0 || seg_len < 1 || seg[0] != components) return false;
      l.data_at = p + 2 + len;
      break;
    } else if ((m >= 0xD0 && m <= 0xD9) || m == 0x01 || m == 0x00) {
      return false;  // a marker without a length where a segment belongs
    }
    p += 2 + len;
  }
  if (l.width < 1 || l.height < 1 || l.interval < 1) return false;
  l.mcu_w = 8 * hmax;
  l.mcu_h = 8 * vmax;
  l.mcus_x = (l.width + l.mcu_w - 1) / l.mcu_w;
  l.mcus_y = (l.height + l.mcu_h - 1) / l.mcu_h;
  if (l.mcus_x % l.interval != 0) return false;
  *out = l;
  return true;
}

// Where each restart interval's entropy-coded bytes are: [begin[i], end[i]). False when the
// scan does not hold exactly the intervals the layout implies, numbered RST0..7 in turn, and
// ends with EOI (damage: the caller decodes the ordinary way, and libjpeg names it).
bool FindIntervals(const uint8_t* d, size_t n, const ScanLayout& l, std::vector<uint32_t>* begin,
                   std::vector<uint32_t>* end) {
  const size_t expected = static_cast<size_t>(l.mcus_x) * static_cast<size_t>(l.mcus_y) /
                          static_cast<size_t>(l.interval);
  if (n > UINT32_MAX) return false;
  begin->clear();
  end->clear();
  begin->push_back(static_cast<uint32_t>(l.data_at));
  size_t p = l.data_at;
  for (;;) {
    const void* ff = p < n ? std::memchr(d + p, 0xFF, n - p) : nullptr;
    if (ff == nullptr) return false;
    p = static_cast<size_t>(static_cast<const uint8_t*>(ff) - d);
    if (p + 1 >= n) return false;
    const uint8_t m = d[p + 1];
    if (m == 0x00) {  // a stuffed 0xFF data byte
      p += 2;
      continue;
    }
    if (m == 0xFF) {  // a fill byte
      ++p;
      continue;
    }
    if (m >= 0xD0 && m <= 0xD7) {
      if (static_cast<size_t>(m - 0xD0) != (end->size() & 7) || end->size() + 1 >= expected) {
        return false;
      }
      end->push_back(static_cast<uint32_t>(p));
      begin->push_back(static_cast<uint32_t>(p + 2));
      p += 2;
      continue;
    }
    if (m != 0xD9) return false;  // EOI ends the scan; any other marker is not ours
    end->push_back(static_cast<uint32_t>(p));
    return end->size() == expected;
  }
}

// A JPEG of MCU columns [c0, c1) and rows [r0, r1) of the one `l` describes, made without
// decoding anything: the headers with the frame's size changed, then those rows' restart
// intervals of those columns, renumbered. Restart intervals are independent (T.81 F.1.2.3: DC
// predictions reset, data byte-aligned), so it decodes to exactly the MCUs it was cut from.
void CutJpeg(const uint8_t* d, const ScanLayout& l, const std::vector<uint32_t>& begin,
             const std::vector<uint32_t>& end, int c0, int c1, int r0, int r1,
             std::vector<uint8_t>* out) {
  out->assign(d, d + l.data_at);
  const int w = std::min(l.width, c1 * l.mcu_w) - c0 * l.mcu_w;
  const int h = std::min(l.height, r1 * l.mcu_h) - r0 * l.mcu_h;
  uint8_t* size_at = out->data() + l.sof_size_at;
  size_at[0] = static_cast<uint8_t>(h >> 8);
  size_at[1] = static_cast<uint8_t>(h);
  size_at[2] = static_cast<uint8_t>(w >> 8);
  size_at[3] = static_cast<uint8_t>(w);
  const int per_row = l.mcus_x / l.interval;
  int k = 0;
  for (int r = r0; r < r1; ++r) {
    for (int i = r * per_row + c0 / l.interval; i < r * per_row + c1 / l.interval; ++i) {
      if (k > 0) {
        out->push_back(0xFF);
        out->push_back(static_cast<uint8_t>(0xD0 + ((k - 1) & 7)));
      }
      out->insert(out->end(), d + begin[i], d + end[i]);
      ++k;
    }
  }
  out->push_back(0xFF);
  out->push_back(0xD9);
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
  // Restart intervals that never straddle two MCU rows (mmpack's stored JPEGs): only the MCUs
  // the region covers are decoded, Huffman decoding included, from a JPEG cut out of this one.
  // Anything else, damage included, takes the ordinary path below, which names the damage.
  ScanLayout l;
  // The header must state the table's size, as on the ordinary path (else that path says so).
  if (ParseScanLayout(data, size, &l) &&
      (expect_width <= 0 || (l.width == expect_width && l.height == expect_height))) {
    const int sw = JpegScaled(l.width, scale_num), sh = JpegScaled(l.height, scale_num);
    // An MCU of mcu_w pixels is mcu_w * num / 8 scaled pixels (blocks of 8 become num).
    const int mw = l.mcu_w * scale_num / 8, mh = l.mcu_h * scale_num / 8;
    const int cx0 = std::clamp(x0, 0, sw - 1), cx1 = std::clamp(x1, cx0 + 1, sw);
    const int cy0 = std::clamp(y0, 0, sh - 1), cy1 = std::clamp(y1, cy0 + 1, sh);
    int c0 = cx0 / mw / l.interval * l.interval;
    int c1 = std::min(l.mcus_x, (cx1 + mw * l.interval - 1) / (mw * l.interval) * l.interval);
    // At least 3 MCUs wide (or the whole width): libjpeg upsamples chroma with its triangle
    // filter only where a component's row is more than 2 samples wide, and with a box filter
    // below that, so a cut 1 or 2 MCUs wide (a crop inside a narrow last MCU column) would
    // decode to other pixels than the same MCUs of the whole image. Found by an adversarial
    // pass: width 36 at 8/8, a region in x 32..36.
    while (c1 - c0 < 3 && (c0 > 0 || c1 < l.mcus_x)) {
      if (c1 < l.mcus_x) {
        c1 = std::min(l.mcus_x, c1 + l.interval);
      } else {
        c0 = std::max(0, c0 - l.interval);
      }
    }
    const int r0 = cy0 / mh, r1 = std::min(l.mcus_y, (cy1 + mh - 1) / mh);
    thread_local std::vector<uint32_t> begin, end;
    thread_local std::vector<uint8_t> cut;
    if ((c0 > 0 || c1 < l.mcus_x || r0 > 0 || r1 < l.mcus_y) &&
        FindIntervals(data, size, l, &begin, &end)) {
      CutJpeg(data, l, begin, end, c0, c1, r0, r1, &cut);
      const int ox = c0 * mw, oy = r0 * mh;
      Job job{cut.data(), cut.size(), scale_num, cx0 - ox, cy0 - oy, cx1 - ox, cy1 - oy, out};
      MM_RETURN_NOT_OK(Run(job));
      out->x0 += ox;
      out->x1 += ox;
      out->y0 += oy;
      out->y1 += oy;
      out->scaled_w = sw;
      out->scaled_h = sh;
      out->width = l.width;
      out->height = l.height;
      return Status::OK();
    }
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
