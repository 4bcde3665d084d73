// decode_vips.cc: DecodeVips (decode.h), as named steps on one libvips image:
//   Load                  shrink-on-load where the codec can (JPEG `shrink`, WebP `scale`)
//   ConvertEmbeddedProfile  an RGB or grey ICC profile other than sRGB, through lcms
//   ToEightBitSrgb        CMYK through ICC, other colour spaces through vips_colourspace,
//                         alpha onto the background, 8 bits, 1 or 3 bands
//   BoxShrinkLarge        very large loads box-shrunk (streaming) to about twice the target
//   WriteToMemory         the pixels into memory: where libvips runs the pipeline
#include <vips/vips.h>

#include <algorithm>
#include <string>

#include "image/decode.h"
#include "image/jpeg_metadata.h"
#include "image/vips_errors.h"

namespace mm::pack {
namespace {

// One image being transformed: each Step replaces it with a libvips operation's output, or
// records the failure (DecodeFail: the reason from the bytes, libvips' text as the detail).
struct Chain {
  ImageKind kind;
  const std::string& bytes;
  ImageFailure* failure;
  VipsImagePtr image;

  // `op(in, &out)` is a libvips call: 0 on success, `out` then a new reference.
  template <typename Op>
  bool Step(Op op) {
    VipsImage* out = nullptr;
    if (op(image.get(), &out) != 0) return DecodeFail(kind, bytes, failure);
    image.reset(out);
    return true;
  }
};

bool Load(Chain* c, VipsImagePtr header, int shrink) {
  const void* data = c->bytes.data();
  const size_t size = c->bytes.size();
  if (shrink > 1 && c->kind == ImageKind::kJpeg) {
    c->image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                              "fail_on", VIPS_FAIL_ON_TRUNCATED, "shrink", shrink,
                                              nullptr));
  } else if (shrink > 1 && c->kind == ImageKind::kWebp) {
    c->image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                              "fail_on", VIPS_FAIL_ON_TRUNCATED, "scale",
                                              1.0 / shrink, nullptr));
  } else if (header) {
    c->image = std::move(header);
  } else {
    c->image.reset(vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                              "fail_on", VIPS_FAIL_ON_TRUNCATED, nullptr));
  }
  return c->image ? true : DecodeFail(c->kind, c->bytes, c->failure);
}

// An embedded RGB or grey profile other than sRGB: its pixels to 8-bit sRGB through lcms
// (relative colorimetric, as Pillow's ImageCms and browsers do). CMYK goes through ICC in
// ToEightBitSrgb in any case. libvips 8.14 clips a 16-bit alpha to 255 in icc_transform, so
// alpha is split off and scaled by itself. A profile lcms cannot use is ignored (its error text
// dropped): the pixels are kept as decoded, as browsers do.
bool ConvertEmbeddedProfile(Chain* c) {
  VipsImage* image = c->image.get();
  const void* icc = nullptr;
  size_t icc_size = 0;
  if (vips_image_get_typeof(image, VIPS_META_ICC_NAME) == 0 ||
      vips_image_get_blob(image, VIPS_META_ICC_NAME, &icc, &icc_size) != 0) {
    return true;
  }
  const int all_bands = vips_image_get_bands(image);
  const int colour_bands = all_bands - (vips_image_hasalpha(image) ? 1 : 0);
  if ((colour_bands != 1 && colour_bands != 3) ||
      !IccNeedsConversion(static_cast<const uint8_t*>(icc), icc_size, colour_bands == 1)) {
    return true;
  }
  const bool wide_alpha =
      colour_bands < all_bands && vips_image_get_format(image) != VIPS_FORMAT_UCHAR;
  Chain colour{c->kind, c->bytes, c->failure, nullptr};
  Chain alpha{c->kind, c->bytes, c->failure, nullptr};
  colour.image.reset(static_cast<VipsImage*>(g_object_ref(image)));
  if (wide_alpha) {
    alpha.image.reset(static_cast<VipsImage*>(g_object_ref(image)));
    // As vips_flatten's max_alpha: 65535 for 16-bit, else 255.
    const double scale = vips_image_get_format(image) == VIPS_FORMAT_USHORT ? 255.0 / 65535.0 : 1.0;
    if (!colour.Step([&](VipsImage* in, VipsImage** out) {
          return vips_extract_band(in, out, 0, "n", colour_bands, nullptr);
        }) ||
        !alpha.Step([&](VipsImage* in, VipsImage** out) {
          return vips_extract_band(in, out, colour_bands, nullptr);
        }) ||
        !alpha.Step([&](VipsImage* in, VipsImage** out) {
          return vips_linear1(in, out, scale, 0.0, "uchar", TRUE, nullptr);
        })) {
      return false;
    }
  }
  VipsImage* converted = nullptr;
  if (vips_icc_transform(colour.image.get(), &converted, "srgb", "embedded", TRUE, "intent",
                         VIPS_INTENT_RELATIVE, "depth", 8, nullptr) != 0) {
    TakeVipsError();  // an unusable profile: keep the pixels as they are
    return true;
  }
  colour.image.reset(converted);
  if (alpha.image && !colour.Step([&](VipsImage* in, VipsImage** out) {
        return vips_bandjoin2(in, alpha.image.get(), out, nullptr);
      })) {
    return false;
  }
  c->image = std::move(colour.image);
  return true;
}

// Colour to 8-bit sRGB (grey stays one band until after the resize: a third the work), alpha
// flattened onto `background`, at most 3 bands.
bool ToEightBitSrgb(Chain* c, Rgb background) {
  VipsImage* image = c->image.get();
  const VipsInterpretation interp = vips_image_guess_interpretation(image);
  const bool plain_uchar =
      vips_image_get_format(image) == VIPS_FORMAT_UCHAR && !vips_image_hasalpha(image);
  const int bands = vips_image_get_bands(image);
  if (plain_uchar && ((bands == 3 && interp == VIPS_INTERPRETATION_sRGB) ||
                      (bands == 1 && interp == VIPS_INTERPRETATION_B_W))) {
    return true;
  }
  if (interp == VIPS_INTERPRETATION_CMYK) {
    // Embedded profile if any, else libvips' default CMYK profile.
    if (!c->Step([](VipsImage* in, VipsImage** out) {
          return vips_icc_transform(in, out, "srgb", "embedded", TRUE, "input_profile", "cmyk",
                                    "intent", VIPS_INTENT_RELATIVE, nullptr);
        })) {
      return false;
    }
  } else if (interp != VIPS_INTERPRETATION_sRGB ||
             vips_image_get_format(image) != VIPS_FORMAT_UCHAR) {
    if (!c->Step([](VipsImage* in, VipsImage** out) {
          return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, nullptr);
        })) {
      return false;
    }
  }
  if (vips_image_hasalpha(c->image.get())) {
    const double max_alpha =
        vips_image_get_format(c->image.get()) == VIPS_FORMAT_USHORT ? 65535.0 : 255.0;
    if (!c->Step([&](VipsImage* in, VipsImage** out) {
          VipsArrayDouble* bg = vips_array_double_newv(3, static_cast<double>(background.r),
                                                       static_cast<double>(background.g),
                                                       static_cast<double>(background.b));
          int r = vips_flatten(in, out, "background", bg, "max_alpha", max_alpha, nullptr);
          vips_area_unref(VIPS_AREA(bg));
          return r;
        })) {
      return false;
    }
  }
  if (vips_image_get_format(c->image.get()) != VIPS_FORMAT_UCHAR &&
      !c->Step([](VipsImage* in, VipsImage** out) { return vips_cast_uchar(in, out, nullptr); })) {
    return false;
  }
  const int nb = vips_image_get_bands(c->image.get());
  if (nb > 3) {
    return c->Step([](VipsImage* in, VipsImage** out) {
      return vips_extract_band(in, out, 0, "n", 3, nullptr);
    });
  }
  if (nb == 2) {
    return c->Step(
        [](VipsImage* in, VipsImage** out) { return vips_extract_band(in, out, 0, nullptr); });
  }
  return true;
}

// Very large loads (PNGs have no shrink-on-load) are first box-shrunk by an integer factor,
// streaming, to about twice the target, so no huge buffer is ever held.
bool BoxShrinkLarge(Chain* c, int64_t need_w, int64_t need_h) {
  const int lw = vips_image_get_width(c->image.get());
  const int lh = vips_image_get_height(c->image.get());
  const int kx = static_cast<int>(std::max<int64_t>(1, lw / (2 * need_w)));
  const int ky = static_cast<int>(std::max<int64_t>(1, lh / (2 * need_h)));
  if ((kx == 1 && ky == 1) || int64_t{lw} * lh <= (int64_t{1} << 22)) return true;
  return c->Step(
      [&](VipsImage* in, VipsImage** out) { return vips_shrink(in, out, kx, ky, nullptr); });
}

bool WriteToMemory(Chain* c, Decoded* out) {
  const int lw = vips_image_get_width(c->image.get());
  const int lh = vips_image_get_height(c->image.get());
  const int nb = vips_image_get_bands(c->image.get());
  size_t got = 0;
  out->vips_mem.reset(vips_image_write_to_memory(c->image.get(), &got));
  if (!out->vips_mem) return DecodeFail(c->kind, c->bytes, c->failure);
  if (got != static_cast<size_t>(lw) * lh * nb || (nb != 1 && nb != 3)) {
    return Fail(c->failure, "corrupt_image",
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

bool DecodeVips(VipsImagePtr header, ImageKind kind, const std::string& bytes,
                const ImageOptions& opt, int shrink, int64_t need_w, int64_t need_h, Decoded* out,
                ImageFailure* failure) {
  Chain c{kind, bytes, failure, nullptr};
  return Load(&c, std::move(header), shrink) && ConvertEmbeddedProfile(&c) &&
         ToEightBitSrgb(&c, opt.background) && BoxShrinkLarge(&c, need_w, need_h) &&
         WriteToMemory(&c, out);
}

}  // namespace mm::pack
