// jpeg_metadata.h: what a JPEG's metadata says about its pixels, read from its segments
// without decoding (private to image/): the EXIF orientation that ProcessImage applies after
// the resize (image_pipeline.cc, fit.h), and the embedded ICC profile that decides whether the
// pixels must go through a colour conversion to be sRGB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mm::pack {

/// The EXIF orientation, 1..8 (tag 0x0112 of IFD0 in the first "Exif" APP1 segment; TIFF 6.0
/// / EXIF 2.3), 1 when absent or malformed. What libvips (libexif) and Pillow's
/// exif_transpose read.
int JpegExifOrientation(const std::string& jpeg);

/// The embedded ICC profile: its APP2 "ICC_PROFILE\0" segments joined in sequence order
/// (ICC.1:2010 Annex B.4). Empty when there is none or the pieces do not add up.
std::string JpegIccProfile(const std::string& jpeg);

/// Whether pixels tagged with the ICC profile `p` (`n` bytes, of any image type) must be
/// converted to be sRGB: the profile is well formed, of the image's colour space ('RGB ' or,
/// with `grey`, 'GRAY'; a profile that does not fit the pixels is ignored, as browsers do),
/// and is not itself sRGB (its description names "sRGB" as a word).
bool IccNeedsConversion(const uint8_t* p, size_t n, bool grey);

}  // namespace mm::pack
