// image_pipeline.cc: see image_pipeline.h. The only place that reads vips_error_buffer().
#include "image/image_pipeline.h"

#include <turbojpeg.h>
#include <vips/vips.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "text/ascii.h"
#include "mm/internal/c_handles.h"
#include "image/resample.h"

namespace mm::pack {
namespace {

using ImagePtr = VipsImagePtr;

enum class Kind { kUnknown, kJpeg, kPng, kGif, kWebp, kTiff, kBmp };

Kind Sniff(const std::string& b) {
  auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return Kind::kJpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return Kind::kPng;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return Kind::kGif;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return Kind::kWebp;
  if (starts("II*\0", 4) || starts("MM\0*", 4) || starts("II+\0", 4) || starts("MM\0+", 4)) {
    return Kind::kTiff;
  }
  if (starts("BM", 2) && b.size() >= 26) return Kind::kBmp;
  return Kind::kUnknown;
}

uint32_t Le32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

uint32_t Be32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) << 24 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

// The pixel size the file's own header states, read without libvips, so that a huge
// image is refused even when its header is all there is (or libvips' header read would
// already allocate). False when the header is not where the format puts it.
bool PeekSize(Kind kind, const std::string& b, int64_t* w, int64_t* h) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  switch (kind) {
    case Kind::kPng:
      if (b.size() < 24 || b.compare(12, 4, "IHDR") != 0) return false;
      *w = Be32(b, 16);
      *h = Be32(b, 20);
      return true;
    case Kind::kGif:
      if (b.size() < 10) return false;
      *w = u8(6) | u8(7) << 8;
      *h = u8(8) | u8(9) << 8;
      return true;
    case Kind::kBmp: {
      int32_t bw = static_cast<int32_t>(Le32(b, 18)), bh = static_cast<int32_t>(Le32(b, 22));
      *w = std::abs(int64_t{bw});
      *h = std::abs(int64_t{bh});
      return true;
    }
    case Kind::kJpeg: {
      size_t i = 2;
      while (i + 9 < b.size()) {
        if (u8(i) != 0xFF) return false;
        unsigned marker = u8(i + 1);
        if (marker == 0xFF) {
          ++i;
          continue;
        }
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
          i += 2;
          continue;
        }
        size_t len = u8(i + 2) << 8 | u8(i + 3);
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
            marker != 0xCC) {
          *h = u8(i + 5) << 8 | u8(i + 6);
          *w = u8(i + 7) << 8 | u8(i + 8);
          return true;
        }
        if (marker == 0xDA || len < 2) return false;
        i += 2 + len;
      }
      return false;
    }
    default:
      return false;
  }
}

// EXIF orientation (tag 0x0112 of IFD0 in the first "Exif" APP1 segment; TIFF 6.0 / EXIF
// 2.3), 1 when absent or malformed. What libvips (libexif) and Pillow's exif_transpose read.
int JpegExifOrientation(const std::string& b) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  size_t i = 2;
  while (i + 4 <= b.size() && u8(i) == 0xFF) {
    const unsigned marker = u8(i + 1);
    if (marker == 0xDA || marker == 0xD9) break;  // image data: no metadata after this
    const size_t len = u8(i + 2) << 8 | u8(i + 3);
    if (len < 2 || i + 2 + len > b.size()) break;
    if (marker == 0xE1 && len >= 8 && b.compare(i + 4, 6, std::string("Exif\0\0", 6)) == 0) {
      const size_t tiff = i + 10, end = i + 2 + len;
      if (tiff + 8 > end) return 1;
      const bool le = b.compare(tiff, 2, "II") == 0;
      if (!le && b.compare(tiff, 2, "MM") != 0) return 1;
      auto get16 = [&](size_t at) {
        return le ? u8(at) | u8(at + 1) << 8 : u8(at) << 8 | u8(at + 1);
      };
      auto get32 = [&](size_t at) { return le ? Le32(b, at) : Be32(b, at); };
      const size_t ifd = tiff + get32(tiff + 4);
      if (ifd + 2 > end) return 1;
      const unsigned entries = get16(ifd);
      for (unsigned e = 0; e < entries; ++e) {
        const size_t at = ifd + 2 + 12 * static_cast<size_t>(e);
        if (at + 12 > end) return 1;
        if (get16(at) == 0x0112) {
          const unsigned type = get16(at + 2), v = get16(at + 8);
          return type == 3 && v >= 1 && v <= 8 ? static_cast<int>(v) : 1;  // SHORT
        }
      }
      return 1;
    }
    i += 2 + len;
  }
  return 1;
}

// The embedded ICC profile of a JPEG: its APP2 "ICC_PROFILE\0" segments (sequence number,
// count, then a piece of the profile) joined in sequence order (ICC.1:2010 Annex B.4).
// Empty when there is none or the pieces do not add up.
std::string JpegIccProfile(const std::string& b) {
  auto u8 = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  static const std::string kTag("ICC_PROFILE\0", 12);
  std::vector<std::string> pieces;
  size_t i = 2;
  while (i + 4 <= b.size() && u8(i) == 0xFF) {
    const unsigned marker = u8(i + 1);
    if (marker == 0xDA || marker == 0xD9) break;  // image data: no metadata after this
    const size_t len = u8(i + 2) << 8 | u8(i + 3);
    if (len < 2 || i + 2 + len > b.size()) break;
    if (marker == 0xE2 && len >= 2 + 14 && b.compare(i + 4, 12, kTag) == 0) {
      const unsigned seq = u8(i + 16), count = u8(i + 17);
      if (count == 0 || seq == 0 || seq > count) return {};
      if (pieces.empty()) pieces.resize(count);
      if (pieces.size() != count) return {};
      pieces[seq - 1] = b.substr(i + 18, len - 16);
    }
    i += 2 + len;
  }
  std::string profile;
  for (const std::string& piece : pieces) {
    if (piece.empty()) return {};
    profile += piece;
  }
  return profile;
}

// The text of an ICC profile's description tag ('desc'; ICC.1:2001 textDescriptionType in
// v2, the first record of a multiLocalizedUnicodeType in v4; non-ASCII as '?'). Empty when
// the profile has none or is malformed.
std::string IccDescription(const uint8_t* p, size_t n) {
  auto be32 = [&](size_t at) {
    return static_cast<uint32_t>(p[at]) << 24 | static_cast<uint32_t>(p[at + 1]) << 16 |
           static_cast<uint32_t>(p[at + 2]) << 8 | p[at + 3];
  };
  if (n < 132) return {};
  const uint32_t tags = be32(128);
  for (uint32_t t = 0; t < tags && 132 + 12 * (size_t{t} + 1) <= n; ++t) {
    const size_t entry = 132 + 12 * size_t{t};
    if (std::memcmp(p + entry, "desc", 4) != 0) continue;
    const size_t at = be32(entry + 4), size = be32(entry + 8);
    if (at > n || size > n - at || size < 12) return {};
    std::string text;
    if (std::memcmp(p + at, "desc", 4) == 0) {
      const size_t len = std::min<size_t>(be32(at + 8), size - 12);
      for (size_t k = 0; k < len && p[at + 12 + k] != 0; ++k) {
        text.push_back(p[at + 12 + k] < 0x80 ? static_cast<char>(p[at + 12 + k]) : '?');
      }
    } else if (std::memcmp(p + at, "mluc", 4) == 0 && size >= 28) {
      const size_t len = be32(at + 20), off = be32(at + 24);
      if (off > size || len > size - off) return {};
      for (size_t k = 0; k + 1 < len; k += 2) {
        const unsigned c = p[at + off + k] << 8 | p[at + off + k + 1];
        if (c == 0) break;
        text.push_back(c < 0x80 ? static_cast<char>(c) : '?');
      }
    }
    return text;
  }
  return {};
}

// Whether pixels tagged with this ICC profile must be converted to be sRGB: the profile is
// well formed, of the image's colour space ('RGB ' or 'GRAY' in the header; a profile that
// does not fit the pixels is ignored, as browsers do), and is not itself sRGB. sRGB is
// recognised by its description naming "sRGB" as a word ("sRGB IEC61966-2.1",
// "sRGB v1.31 (Canon)", "Nikon sRGB 4.0.0.3002"; not "esRGB" or "scRGB"): those pixels are
// stored as decoded, which is what a round trip through lcms would give, less its rounding
// and its cost. 22 of the 51 coco-cc photos carry a profile; 7 need converting (Adobe RGB
// (1998), Camera RGB Profile).
bool IccNeedsConversion(const uint8_t* p, size_t n, bool grey) {
  if (n < 132 || std::memcmp(p + 36, "acsp", 4) != 0) return false;
  if (std::memcmp(p + 16, grey ? "GRAY" : "RGB ", 4) != 0) return false;
  const std::string desc = IccDescription(p, n);
  for (size_t at = desc.find("sRGB"); at != std::string::npos; at = desc.find("sRGB", at + 1)) {
    const bool word_start = at == 0 || !std::isalnum(static_cast<unsigned char>(desc[at - 1]));
    const bool word_end =
        at + 4 == desc.size() || !std::isalnum(static_cast<unsigned char>(desc[at + 4]));
    if (word_start && word_end) return false;
  }
  return true;
}

// Whether the file's structure says it was cut short. Decided from the bytes alone, so the
// reason does not depend on which thread's libvips message happened to be in the buffer.
bool LooksTruncated(Kind kind, const std::string& b, const std::string& message) {
  switch (kind) {
    case Kind::kJpeg: {
      // Entropy-coded data never holds FF D9 (FF is stuffed), so a complete file has an EOI
      // after its last SOS.
      size_t sos = std::string::npos;
      for (size_t i = b.size(); i-- > 1;) {
        if (static_cast<unsigned char>(b[i - 1]) == 0xFF &&
            static_cast<unsigned char>(b[i]) == 0xDA) {
          sos = i;
          break;
        }
      }
      if (sos == std::string::npos) return b.size() < 1024;
      return b.find("\xFF\xD9", sos) == std::string::npos;
    }
    case Kind::kPng:
      return b.find("IEND", b.size() > 64 ? b.size() - 64 : 0) == std::string::npos;
    case Kind::kGif:
      return b.back() != 0x3B;
    case Kind::kWebp:
      return b.size() >= 12 && static_cast<uint64_t>(Le32(b, 4)) + 8 > b.size();
    case Kind::kBmp:
      return Le32(b, 2) > b.size();
    default:
      break;
  }
  const std::string m = AsciiLower(message);
  return m.find("truncat") != std::string::npos || m.find("premature") != std::string::npos ||
         m.find("unexpected end") != std::string::npos;
}

// libvips' error buffer is process-wide: a failing call appends its lines, and until this
// thread reads them, another thread's failure may add its own or take (and clear) ours. So
// ProcessImage holds this gate shared for each decode, and a decode that failed in libvips is
// run again holding it exclusively, when no other libvips call is running: the buffer then
// holds that file's lines only. Writers go first, so a rerun waits only for the decodes
// already running. Failures are rare; each costs one more decode.
class VipsErrorGate {
 public:
  void lock_shared() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !writing_ && writers_waiting_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--readers_ == 0) changed_.notify_all();
  }
  void lock() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++writers_waiting_;
    changed_.wait(lock, [&] { return !writing_ && readers_ == 0; });
    --writers_waiting_;
    writing_ = true;
  }
  void unlock() {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int readers_ = 0, writers_waiting_ = 0;
  bool writing_ = false;
};
VipsErrorGate g_vips_error_gate;
thread_local bool t_failed_in_vips = false;  // set by DecodeFail: the detail is libvips' text

// Takes (and clears) libvips' error text and returns one line of it for report.json: the
// first that names this file's format, else the first. Only trusted when the caller holds
// g_vips_error_gate exclusively (see there). (The reason never comes from this text: see
// LooksTruncated.)
std::string TakeVipsError(Kind kind = Kind::kUnknown) {
  std::unique_ptr<char, GFreeDeleter> text(vips_error_buffer_copy());
  std::string all = text ? text.get() : "";
  const char* name = nullptr;
  switch (kind) {
    case Kind::kJpeg:
      name = "jpeg";
      break;
    case Kind::kPng:
      name = "png";
      break;
    case Kind::kGif:
      name = "gif";
      break;
    case Kind::kWebp:
      name = "webp";
      break;
    case Kind::kTiff:
      name = "tiff";
      break;
    case Kind::kBmp:
      name = "magick";
      break;
    default:
      break;
  }
  std::string first, match;
  size_t start = 0;
  while (start < all.size()) {
    size_t nl = all.find('\n', start);
    std::string line = all.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? all.size() : nl + 1;
    if (line.empty()) continue;
    if (first.empty()) first = line;
    const std::string lower = AsciiLower(line);
    if (name != nullptr && match.empty() && lower.find(name) != std::string::npos) match = line;
  }
  std::string s = !match.empty() ? match : first;
  if (s.empty()) s = "libvips failed without a message";
  return s;
}

bool Fail(ImageFailure* failure, const char* reason, std::string detail) {
  failure->reason = reason;
  failure->detail = std::move(detail);
  return false;
}

bool DecodeFail(Kind kind, const std::string& bytes, ImageFailure* failure) {
  t_failed_in_vips = true;
  std::string detail = TakeVipsError(kind);
  return Fail(failure, LooksTruncated(kind, bytes, detail) ? "truncated_image" : "corrupt_image",
              std::move(detail));
}

// Largest k in {1, 2, 4, 8} with k <= limit.
int PowerOfTwoShrink(double limit) {
  int k = 1;
  while (k < 8 && 2.0 * k <= limit + 1e-9) k *= 2;
  return k;
}

std::once_flag g_vips_once;
bool g_vips_ok = false;
std::string g_vips_error;

// Pixels of one decoded image: [height, width, bands] uint8, bands 1 (grey) or 3 (sRGB).
struct Decoded {
  const uint8_t* pixels = nullptr;
  int width = 0, height = 0, bands = 0;
  GMemoryPtr vips_mem;  // libvips output
};

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
        (tjGetErrorCode(tj) != TJERR_WARNING && LooksTruncated(Kind::kJpeg, bytes, message));
    return Fail(failure, truncated ? "truncated_image" : "corrupt_image", "TurboJPEG: " + message),
           -1;
  }
  out->pixels = buffer.data();  // valid until this thread's next decode
  out->width = sw;
  out->height = sh;
  out->bands = bands;
  return 1;
}

// Everything else (and JPEGs TurboJPEG leaves alone) through libvips: shrink-on-load where
// the codec can, colour to 8-bit sRGB (grey stays one band), alpha flattened onto the
// background, then the pixels into memory (this is where libvips runs the pipeline).
// `need_w` x `need_h`: the size the caller resizes to, in the stored orientation.
bool DecodeVips(ImagePtr header, Kind kind, const std::string& bytes, const ImageOptions& opt,
                int shrink, int need_w, int need_h, Decoded* out, ImageFailure* failure) {
  const void* data = bytes.data();
  const size_t size = bytes.size();
  ImagePtr image;
  if (shrink > 1 && kind == Kind::kJpeg) {
    image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                           "fail_on", VIPS_FAIL_ON_TRUNCATED, "shrink", shrink,
                                           nullptr));
  } else if (shrink > 1 && kind == Kind::kWebp) {
    image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                           "fail_on", VIPS_FAIL_ON_TRUNCATED, "scale", 1.0 / shrink,
                                           nullptr));
  } else if (header) {
    image = std::move(header);
  } else {
    image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                           "fail_on", VIPS_FAIL_ON_TRUNCATED, nullptr));
  }
  if (!image) return DecodeFail(kind, bytes, failure);
  header.reset();

  VipsImage* tmp = nullptr;
  // An embedded RGB or grey profile other than sRGB: its pixels to 8-bit sRGB through lcms
  // (relative colorimetric, as Pillow's ImageCms and browsers do). CMYK goes through ICC
  // below in any case. libvips 8.14 clips a 16-bit alpha to 255 in icc_transform, so alpha is
  // split off and scaled by itself. A profile lcms cannot use is ignored (its error text
  // dropped): the pixels are kept as decoded, as browsers do.
  const void* icc = nullptr;
  size_t icc_size = 0;
  if (vips_image_get_typeof(image.get(), VIPS_META_ICC_NAME) != 0 &&
      vips_image_get_blob(image.get(), VIPS_META_ICC_NAME, &icc, &icc_size) == 0) {
    const int all_bands = vips_image_get_bands(image.get());
    const int colour_bands = all_bands - (vips_image_hasalpha(image.get()) ? 1 : 0);
    if ((colour_bands == 1 || colour_bands == 3) &&
        IccNeedsConversion(static_cast<const uint8_t*>(icc), icc_size, colour_bands == 1)) {
      const bool wide_alpha =
          colour_bands < all_bands && vips_image_get_format(image.get()) != VIPS_FORMAT_UCHAR;
      ImagePtr colour, alpha;
      if (wide_alpha) {
        if (vips_extract_band(image.get(), &tmp, 0, "n", colour_bands, nullptr) != 0) {
          return DecodeFail(kind, bytes, failure);
        }
        colour.reset(tmp);
        if (vips_extract_band(image.get(), &tmp, colour_bands, nullptr) != 0) {
          return DecodeFail(kind, bytes, failure);
        }
        alpha.reset(tmp);
        // As vips_flatten's max_alpha below: 65535 for 16-bit, else 255.
        const double scale =
            vips_image_get_format(image.get()) == VIPS_FORMAT_USHORT ? 255.0 / 65535.0 : 1.0;
        if (vips_linear1(alpha.get(), &tmp, scale, 0.0, "uchar", TRUE, nullptr) != 0) {
          return DecodeFail(kind, bytes, failure);
        }
        alpha.reset(tmp);
      } else {
        colour.reset(static_cast<VipsImage*>(g_object_ref(image.get())));
      }
      if (vips_icc_transform(colour.get(), &tmp, "srgb", "embedded", TRUE, "intent",
                             VIPS_INTENT_RELATIVE, "depth", 8, nullptr) != 0) {
        TakeVipsError();  // an unusable profile: keep the pixels as they are
      } else {
        colour.reset(tmp);
        if (alpha) {
          if (vips_bandjoin2(colour.get(), alpha.get(), &tmp, nullptr) != 0) {
            return DecodeFail(kind, bytes, failure);
          }
          colour.reset(tmp);
        }
        image = std::move(colour);
      }
    }
  }

  // Colour to 8-bit sRGB (grey stays one band until after the resize: a third the work).
  VipsInterpretation interp = vips_image_guess_interpretation(image.get());
  const bool alpha = vips_image_hasalpha(image.get());
  const bool plain_uchar = vips_image_get_format(image.get()) == VIPS_FORMAT_UCHAR && !alpha;
  const int bands = vips_image_get_bands(image.get());
  const bool plain_rgb = plain_uchar && bands == 3 && interp == VIPS_INTERPRETATION_sRGB;
  const bool plain_grey = plain_uchar && bands == 1 && interp == VIPS_INTERPRETATION_B_W;
  if (!plain_rgb && !plain_grey) {
    if (interp == VIPS_INTERPRETATION_CMYK) {
      // Embedded profile if any, else libvips' default CMYK profile.
      if (vips_icc_transform(image.get(), &tmp, "srgb", "embedded", TRUE, "input_profile", "cmyk",
                             "intent", VIPS_INTENT_RELATIVE, nullptr) != 0) {
        return DecodeFail(kind, bytes, failure);
      }
      image.reset(tmp);
    } else if (interp != VIPS_INTERPRETATION_sRGB ||
               vips_image_get_format(image.get()) != VIPS_FORMAT_UCHAR) {
      if (vips_colourspace(image.get(), &tmp, VIPS_INTERPRETATION_sRGB, nullptr) != 0) {
        return DecodeFail(kind, bytes, failure);
      }
      image.reset(tmp);
    }
    if (vips_image_hasalpha(image.get())) {
      VipsArrayDouble* bg = vips_array_double_newv(3, static_cast<double>(opt.background.r),
                                                   static_cast<double>(opt.background.g),
                                                   static_cast<double>(opt.background.b));
      double max_alpha = vips_image_get_format(image.get()) == VIPS_FORMAT_USHORT ? 65535.0 : 255.0;
      int r = vips_flatten(image.get(), &tmp, "background", bg, "max_alpha", max_alpha, nullptr);
      vips_area_unref(VIPS_AREA(bg));
      if (r != 0) return DecodeFail(kind, bytes, failure);
      image.reset(tmp);
    }
    if (vips_image_get_format(image.get()) != VIPS_FORMAT_UCHAR) {
      if (vips_cast_uchar(image.get(), &tmp, nullptr) != 0) {
        return DecodeFail(kind, bytes, failure);
      }
      image.reset(tmp);
    }
    int nb = vips_image_get_bands(image.get());
    if (nb > 3) {
      if (vips_extract_band(image.get(), &tmp, 0, "n", 3, nullptr) != 0) {
        return DecodeFail(kind, bytes, failure);
      }
      image.reset(tmp);
    } else if (nb == 2) {
      if (vips_extract_band(image.get(), &tmp, 0, nullptr) != 0) {
        return DecodeFail(kind, bytes, failure);
      }
      image.reset(tmp);
    }
  }

  // Very large loads (PNGs have no shrink-on-load) are first box-shrunk by an integer
  // factor, streaming, to about twice the target, so no huge buffer is ever held.
  {
    const int lw = vips_image_get_width(image.get());
    const int lh = vips_image_get_height(image.get());
    const int kx = std::max(1, lw / (2 * need_w)), ky = std::max(1, lh / (2 * need_h));
    if ((kx > 1 || ky > 1) && int64_t{lw} * lh > (int64_t{1} << 22)) {
      if (vips_shrink(image.get(), &tmp, kx, ky, nullptr) != 0) {
        return DecodeFail(kind, bytes, failure);
      }
      image.reset(tmp);
    }
  }
  const int lw = vips_image_get_width(image.get());
  const int lh = vips_image_get_height(image.get());
  const int nb = vips_image_get_bands(image.get());
  size_t got = 0;
  out->vips_mem.reset(vips_image_write_to_memory(image.get(), &got));
  if (!out->vips_mem) return DecodeFail(kind, bytes, failure);
  if (got != static_cast<size_t>(lw) * lh * nb || (nb != 1 && nb != 3)) {
    return Fail(failure, "corrupt_image",
                "internal: decoded " + std::to_string(got) + " bytes for " + std::to_string(lw) +
                    "x" + std::to_string(lh) + "x" + std::to_string(nb));
  }
  out->pixels = static_cast<const uint8_t*>(out->vips_mem.get());
  out->width = lw;
  out->height = lh;
  out->bands = nb;
  return true;
}

}  // namespace

Result<Rgb> ParseColour(const std::string& text_in) {
  std::string text;
  for (char c : text_in) {
    if (c != ' ') text.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  auto bad = [&] {
    return Status::InvalidArgument(
        "--background must be white, black, gray, #rrggbb or r,g,b; "
        "got '" +
        text_in + "'");
  };
  Rgb c;
  if (text == "white") return Rgb{255, 255, 255};
  if (text == "black") return Rgb{0, 0, 0};
  if (text == "gray" || text == "grey") return Rgb{128, 128, 128};
  if (!text.empty() && text[0] == '#') {
    std::string hex = text.substr(1);
    if (hex.size() == 3) hex = {hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]};
    if (hex.size() != 6 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return bad();
    }
    unsigned long v = std::strtoul(hex.c_str(), nullptr, 16);
    c.r = static_cast<uint8_t>(v >> 16);
    c.g = static_cast<uint8_t>(v >> 8);
    c.b = static_cast<uint8_t>(v);
    return c;
  }
  int r, g, b;
  char tail;
  if (std::sscanf(text.c_str(), "%d,%d,%d%c", &r, &g, &b, &tail) == 3 && r >= 0 && r <= 255 &&
      g >= 0 && g <= 255 && b >= 0 && b <= 255) {
    return Rgb{static_cast<uint8_t>(r), static_cast<uint8_t>(g), static_cast<uint8_t>(b)};
  }
  return bad();
}

std::string ColourHex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

Status InitVips() {
  std::call_once(g_vips_once, [] {
    if (VIPS_INIT("mmpack") != 0) {
      g_vips_error = TakeVipsError();
      return;
    }
    // Decode problems become ImageFailures; libvips' own warnings would only repeat them.
    g_log_set_handler(
        "VIPS", G_LOG_LEVEL_WARNING, [](const gchar*, GLogLevelFlags, const gchar*, gpointer) {},
        nullptr);
    vips_concurrency_set(1);  // parallelism is across samples (TBB), not inside one
    vips_cache_set_max(0);    // no operation cache: memory must not grow with the input
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    g_vips_ok = true;
  });
  if (!g_vips_ok) return Status::Internal("cannot start libvips: " + g_vips_error);
  return Status::OK();
}

namespace {

// ProcessImage, without the error gate.
bool ProcessImageOnce(const std::string& bytes, const ImageOptions& opt, ProcessedImage* out,
                      ImageFailure* failure) {
  if (bytes.empty()) return Fail(failure, "corrupt_image", "empty file");
  const Kind kind = Sniff(bytes);
  if (kind == Kind::kUnknown) {
    return Fail(failure, "unsupported_format",
                "not a JPEG, PNG, GIF, WebP, TIFF or BMP file (magic bytes)");
  }
  const void* data = bytes.data();
  const size_t size = bytes.size();
  auto too_many = [&](int64_t w, int64_t h) {
    return Fail(failure, "too_many_pixels",
                std::to_string(w) + "x" + std::to_string(h) + " = " + std::to_string(w * h) +
                    " pixels > --max-pixels " + std::to_string(opt.max_pixels));
  };
  if (int64_t w = 0, h = 0; PeekSize(kind, bytes, &w, &h) && w * h > opt.max_pixels) {
    return too_many(w, h);
  }

  // 1. Header only: nothing is decoded until pixels are asked for. JPEGs: size from the SOF
  // segment and orientation from EXIF, read here (libvips' header costs as much as a tenth of
  // the decode); everything else: libvips' header.
  ImagePtr header;
  int raw_w = 0, raw_h = 0, orientation = 1;
  int64_t peek_w = 0, peek_h = 0;
  if (kind == Kind::kJpeg && PeekSize(kind, bytes, &peek_w, &peek_h) && peek_w > 0 && peek_h > 0) {
    raw_w = static_cast<int>(peek_w);
    raw_h = static_cast<int>(peek_h);
    orientation = JpegExifOrientation(bytes);
  } else {
    header.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                            "fail_on", VIPS_FAIL_ON_TRUNCATED, nullptr));
    if (!header) return DecodeFail(kind, bytes, failure);
    raw_w = vips_image_get_width(header.get());
    raw_h = vips_image_get_height(header.get());
    if (vips_image_get_typeof(header.get(), VIPS_META_ORIENTATION)) {
      if (vips_image_get_int(header.get(), VIPS_META_ORIENTATION, &orientation) != 0) {
        orientation = 1;
      }
      if (orientation < 1 || orientation > 8) orientation = 1;
    }
  }
  if (raw_w <= 0 || raw_h <= 0) return Fail(failure, "corrupt_image", "zero-sized image");
  const int64_t pixels = int64_t{raw_w} * raw_h;
  if (pixels > opt.max_pixels) return too_many(raw_w, raw_h);
  const bool swap = orientation >= 5;   // 90 or 270 degrees
  const int ow = swap ? raw_h : raw_w;  // oriented source size
  const int oh = swap ? raw_w : raw_h;
  out->original_width = ow;
  out->original_height = oh;

  const double sx_full = static_cast<double>(opt.width) / ow;
  const double sy_full = static_cast<double>(opt.height) / oh;
  const double cover = std::max(sx_full, sy_full);
  const double fit_scale = opt.mode == ResizeMode::kPad ? std::min(sx_full, sy_full) : cover;

  // The size the source is resized to before the fit (oriented frame), from its full size.
  int tw, th;  // oriented frame
  if (opt.mode == ResizeMode::kStretch) {
    tw = opt.width;
    th = opt.height;
  } else {
    tw = std::max(1, static_cast<int>(std::lround(ow * fit_scale)));
    th = std::max(1, static_cast<int>(std::lround(oh * fit_scale)));
    if (opt.mode == ResizeMode::kCenterCrop) {
      tw = std::max(tw, opt.width);
      th = std::max(th, opt.height);
    } else {
      tw = std::min(tw, opt.width);
      th = std::min(th, opt.height);
    }
  }

  // 2. Decode at a shrink factor that keeps the target covered after rounding down
  // (427 / 4 = 106), so the resize below always shrinks: no near-1 upscale that would shift
  // the content.
  int shrink = fit_scale < 1.0 ? PowerOfTwoShrink(1.0 / fit_scale) : 1;
  const int need_w = swap ? th : tw, need_h = swap ? tw : th;  // stored orientation
  while (shrink > 1 && (raw_w / shrink < need_w || raw_h / shrink < need_h)) shrink /= 2;
  Decoded decoded;
  int turbo = 0;
  if (kind == Kind::kJpeg) {
    // A JPEG tagged with a non-sRGB profile is converted by libvips (DecodeVips), not here.
    const std::string icc = JpegIccProfile(bytes);
    const auto* p = reinterpret_cast<const uint8_t*>(icc.data());
    const bool convert = IccNeedsConversion(p, icc.size(), /*grey=*/false) ||
                         IccNeedsConversion(p, icc.size(), /*grey=*/true);
    if (!convert) turbo = DecodeJpegTurbo(bytes, shrink, &decoded, failure);
  }
  if (turbo < 0) return false;
  if (turbo == 0 &&
      !DecodeVips(std::move(header), kind, bytes, opt, shrink, need_w, need_h, &decoded, failure)) {
    return false;
  }
  const int lw = decoded.width, lh = decoded.height, nb = decoded.bands;

  // 3. Resize with Lanczos-3 in the stored orientation (resample.h: about 3x faster than
  // vips_resize at these sizes).
  // 4. Orientation (EXIF 1..8) and fit into [height, width, 3]: the oriented [th, tw] image
  // is centred; what overhangs is cropped (center-crop), the rest is background (pad).
  const int x = (opt.width - tw) / 2;
  const int y = (opt.height - th) / 2;
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(opt.width, x + tw), y1 = std::min(opt.height, y + th);
  // Upright images are resized only inside the window that is kept.
  int win_x = 0, win_y = 0, win_w = need_w, win_h = need_h;
  if (orientation == 1) {
    win_x = x0 - x;
    win_y = y0 - y;
    win_w = x1 - x0;
    win_h = y1 - y0;
  }
  thread_local std::vector<uint8_t> resized;  // reused: no page faults per image
  const uint8_t* small = decoded.pixels;
  if (lw != need_w || lh != need_h || win_w != need_w || win_h != need_h) {
    ResizeLanczos3(small, lw, lh, lw * nb, nb, need_w, need_h, win_x, win_y, win_w, win_h,
                   &resized);
    small = resized.data();
  }

  const size_t out_bytes = static_cast<size_t>(opt.width) * opt.height * 3;
  out->pixels.resize(out_bytes);
  uint8_t* dst = out->pixels.data();
  if (opt.mode == ResizeMode::kPad && (tw != opt.width || th != opt.height)) {
    for (size_t i = 0; i < out_bytes; i += 3) {
      dst[i] = opt.background.r;
      dst[i + 1] = opt.background.g;
      dst[i + 2] = opt.background.b;
    }
  }
  // Displayed pixel (dx, dy) of the oriented image -> pixel of `small` ([win_h, win_w]).
  const int sw = need_w, sh = need_h;
  auto stored = [&](int dx, int dy) -> const uint8_t* {
    int sx, sy;
    switch (orientation) {
      case 2:
        sx = sw - 1 - dx;
        sy = dy;
        break;
      case 3:
        sx = sw - 1 - dx;
        sy = sh - 1 - dy;
        break;
      case 4:
        sx = dx;
        sy = sh - 1 - dy;
        break;
      case 5:
        sx = dy;
        sy = dx;
        break;
      case 6:
        sx = dy;
        sy = sh - 1 - dx;
        break;
      case 7:
        sx = sw - 1 - dy;
        sy = sh - 1 - dx;
        break;
      case 8:
        sx = sw - 1 - dy;
        sy = dx;
        break;
      default:
        sx = dx - win_x;
        sy = dy - win_y;
        break;
    }
    return small + (static_cast<size_t>(sy) * win_w + sx) * nb;
  };
  for (int oy = y0; oy < y1; ++oy) {
    uint8_t* row = dst + (static_cast<size_t>(oy) * opt.width) * 3;
    const int dy = oy - y;
    if (orientation == 1 && nb == 3) {
      std::memcpy(row + x0 * 3, stored(x0 - x, dy), static_cast<size_t>(x1 - x0) * 3);
      continue;
    }
    for (int ox = x0; ox < x1; ++ox) {
      const uint8_t* p = stored(ox - x, dy);
      uint8_t* q = row + ox * 3;
      if (nb == 3) {
        q[0] = p[0];
        q[1] = p[1];
        q[2] = p[2];
      } else {
        q[0] = q[1] = q[2] = p[0];
      }
    }
  }
  if (opt.mode == ResizeMode::kPad) {
    out->valid_box[0] = x0;
    out->valid_box[1] = y0;
    out->valid_box[2] = x1 - x0;
    out->valid_box[3] = y1 - y0;
  } else {
    out->valid_box[0] = 0;
    out->valid_box[1] = 0;
    out->valid_box[2] = opt.width;
    out->valid_box[3] = opt.height;
  }
  return true;
}

}  // namespace

bool ProcessImage(const std::string& bytes, const ImageOptions& opt, ProcessedImage* out,
                  ImageFailure* failure) {
  if (Status st = InitVips(); !st.ok()) return Fail(failure, "unreadable", st.message());
  t_failed_in_vips = false;
  {
    std::shared_lock<VipsErrorGate> shared(g_vips_error_gate);
    if (ProcessImageOnce(bytes, opt, out, failure)) return true;
  }
  if (!t_failed_in_vips) return false;  // the detail is not libvips' text
  // Again, alone: libvips' error buffer then holds this file's lines only (VipsErrorGate).
  std::unique_lock<VipsErrorGate> alone(g_vips_error_gate);
  vips_error_clear();
  return ProcessImageOnce(bytes, opt, out, failure);
}

}  // namespace mm::pack
