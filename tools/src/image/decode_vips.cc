// decode_vips.cc: DecodeVips (decode.h).
#include <vips/vips.h>

#include <algorithm>
#include <string>

#include "image/decode.h"
#include "image/jpeg_metadata.h"
#include "image/vips_errors.h"

namespace mm::pack {

// Everything else (and JPEGs TurboJPEG leaves alone) through libvips: shrink-on-load where
// the codec can, colour to 8-bit sRGB (grey stays one band), alpha flattened onto the
// background, then the pixels into memory (this is where libvips runs the pipeline).
// `need_w` x `need_h`: the size the caller resizes to, in the stored orientation.
bool DecodeVips(VipsImagePtr header, ImageKind kind, const std::string& bytes,
                const ImageOptions& opt, int shrink, int need_w, int need_h, Decoded* out,
                ImageFailure* failure) {
  const void* data = bytes.data();
  const size_t size = bytes.size();
  VipsImagePtr image;
  if (shrink > 1 && kind == ImageKind::kJpeg) {
    image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                           "fail_on", VIPS_FAIL_ON_TRUNCATED, "shrink", shrink,
                                           nullptr));
  } else if (shrink > 1 && kind == ImageKind::kWebp) {
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
      VipsImagePtr colour, alpha;
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

}  // namespace mm::pack
