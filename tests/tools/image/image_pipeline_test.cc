// Tests of image_pipeline.h on the real images of ../shared/data and on generated edge cases,
// against Pillow (Debian's /usr/bin/python3) as the reference.
#include "image/image_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ingest/ingest.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// Mean absolute difference (0..255) between `got` and what Pillow makes of `path`:
// EXIF-transposed, alpha over `bg`, RGB, Lanczos (antialiased) resize, then the fit. In
// center-crop mode the crop window may sit one pixel off either way (the resized size can
// round differently: 105.5 rows is 105 for libvips' JPEG shrink, 106 for Pillow): the best
// of those windows counts. `icc`: first convert the pixels from the file's embedded ICC profile
// to sRGB with ImageCms (lcms, relative colorimetric).
double DiffToPillow(const std::vector<uint8_t>& got, const fs::path& path, int w, int h,
                    const std::string& mode, int bg = 255, bool icc = false) {
  TempDir tmp;
  WriteBytes(tmp / "got.raw", std::string(got.begin(), got.end()));
  std::string script = R"(
import numpy as np
from PIL import Image, ImageOps
im = Image.open()" + Py(path) +
                       R"()
icc = im.info.get('icc_profile') if )" +
                       (icc ? "True" : "False") + R"( else None
im = ImageOps.exif_transpose(im)
if icc:  # the embedded profile to sRGB, as the pipeline does
    import io
    from PIL import ImageCms
    im = ImageCms.profileToProfile(im.convert('RGB'), ImageCms.ImageCmsProfile(io.BytesIO(icc)),
                                   ImageCms.createProfile('sRGB'), renderingIntent=1,
                                   outputMode='RGB')
W, H, mode, bg = )" + std::to_string(w) +
                       ", " + std::to_string(h) + ", '" + mode + "', " + std::to_string(bg) + R"(
got = np.fromfile()" + Py(tmp / "got.raw") +
                       R"(, np.uint8).astype(int)
if got.size != W * H * 3:
    print(1e9); raise SystemExit
got = got.reshape(H, W, 3)
if im.mode in ('I;16', 'I;16B', 'I'):
    im = im.point(lambda v: v / 256).convert('L')
if im.mode == 'P':
    im = im.convert('RGBA')
if im.mode in ('RGBA', 'LA', 'PA'):
    im = im.convert('RGBA')
    back = Image.new('RGBA', im.size, (bg, bg, bg, 255))
    im = Image.alpha_composite(back, im)
im = im.convert('RGB')
w, h = im.size
if mode == 'stretch':
    print(np.abs(np.asarray(im.resize((W, H), Image.LANCZOS)).astype(int) - got).mean())
    raise SystemExit
s = max(W / w, H / h) if mode == 'center-crop' else min(W / w, H / h)
nw, nh = max(1, round(w * s)), max(1, round(h * s))
r = np.asarray(im.resize((nw, nh), Image.LANCZOS)).astype(int)
if mode == 'center-crop':
    best = 1e9
    x, y = (nw - W) // 2, (nh - H) // 2
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            c = r[max(0, y + dy):y + dy + H, max(0, x + dx):x + dx + W]
            if c.shape == got.shape:
                best = min(best, np.abs(c - got).mean())
    print(best)
else:
    out = Image.new('RGB', (W, H), (bg, bg, bg))
    out.paste(Image.fromarray(r.astype(np.uint8)), ((W - nw) // 2, (H - nh) // 2))
    print(np.abs(np.asarray(out).astype(int) - got).mean())
)";
  int rc = 0;
  std::string out = RunPython(script, &rc);
  EXPECT_EQ(rc, 0) << out;
  return out.empty() ? 1e9 : std::stod(out);
}

double MeanAbsDiff(const std::vector<uint8_t>& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return 1e9;
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int{a[i]} - int{uint8_t(b[i])});
  return sum / a.size();
}

ProcessedImage MustProcess(const std::string& bytes, const ImageOptions& options) {
  ProcessedImage out;
  ImageFailure failure;
  EXPECT_TRUE(ProcessImage(bytes, options, &out, &failure))
      << failure.reason << ": " << failure.detail;
  return out;
}

ImageFailure MustFail(const std::string& bytes, const ImageOptions& options) {
  ProcessedImage out;
  ImageFailure failure;
  EXPECT_FALSE(ProcessImage(bytes, options, &out, &failure));
  return failure;
}

std::vector<fs::path> CocoImages(size_t n) {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(DataDir() / "coco-cc" / "images")) {
    paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.size() > n) paths.resize(n);
  return paths;
}

class ImagePipeline : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(InitVips().ok()); }
  TempDir tmp_;
};

TEST_F(ImagePipeline, CocoJpegsMatchPillowLanczosCenterCrop) {
  ImageOptions options;  // 224x224 center-crop
  for (const fs::path& p : CocoImages(4)) {
    ProcessedImage got = MustProcess(ReadBytes(p), options);
    ASSERT_EQ(got.pixels.size(), 224u * 224 * 3);
    EXPECT_LT(DiffToPillow(got.pixels, p, 224, 224, "center-crop"), 4.0) << p;
    EXPECT_EQ(got.valid_box[2], 224);
    EXPECT_EQ(got.valid_box[3], 224);
    EXPECT_GT(got.original_width, 300);
  }
}

TEST_F(ImagePipeline, NonSquareSizesAndStretchMatchPillow) {
  fs::path p = CocoImages(1)[0];
  ImageOptions options;
  options.width = 160;
  options.height = 96;
  for (auto [mode, name] : {std::pair{format::ResizeMode::kCenterCrop, "center-crop"},
                            std::pair{format::ResizeMode::kStretch, "stretch"},
                            std::pair{format::ResizeMode::kPad, "pad"}}) {
    options.mode = mode;
    ProcessedImage got = MustProcess(ReadBytes(p), options);
    ASSERT_EQ(got.pixels.size(), 160u * 96 * 3) << name;
    EXPECT_LT(DiffToPillow(got.pixels, p, 160, 96, name), 5.0) << name;
  }
}

TEST_F(ImagePipeline, PadModeLetterboxesAndRecordsValidBox) {
  // A 640x427 photo padded into 224x224: 224x149 centred, white above and below.
  fs::path p = CocoImages(1)[0];
  ImageOptions options;
  options.mode = format::ResizeMode::kPad;
  options.background = Rgb{0, 0, 0};
  ProcessedImage got = MustProcess(ReadBytes(p), options);
  const int ow = got.original_width, oh = got.original_height;
  ASSERT_GT(ow, oh) << "the test wants a landscape photo";
  const int bh = static_cast<int>(std::lround(224.0 * oh / ow));
  EXPECT_EQ(got.valid_box[0], 0);
  EXPECT_EQ(got.valid_box[2], 224);
  EXPECT_NEAR(got.valid_box[3], bh, 1);
  EXPECT_NEAR(got.valid_box[1], (224 - bh) / 2, 1);
  // Outside the box: exactly the background; inside: the photo (not all black).
  const int y0 = got.valid_box[1], y1 = y0 + got.valid_box[3];
  int64_t outside_sum = 0, inside_sum = 0;
  for (int y = 0; y < 224; ++y) {
    for (int x = 0; x < 224 * 3; ++x) {
      uint8_t v = got.pixels[y * 224 * 3 + x];
      (y < y0 || y >= y1 ? outside_sum : inside_sum) += v;
    }
  }
  EXPECT_EQ(outside_sum, 0);
  EXPECT_GT(inside_sum, int64_t{224} * bh * 3 * 20);
}

TEST_F(ImagePipeline, AppliesExifOrientation) {
  // Store a photo rotated 90 degrees counter-clockwise with EXIF orientation 6 ("rotate 90
  // clockwise to display"): what mmpack makes of it must match the upright photo.
  fs::path src = CocoImages(1)[0];
  fs::path rotated = tmp_ / "rotated.jpg";
  int rc = 0;
  std::string size = RunPython(R"(
from PIL import Image
im = Image.open()" + Py(src) + R"()
exif = Image.Exif()
exif[0x0112] = 6
im.transpose(Image.ROTATE_90).save()" +
                                   Py(rotated) + R"(, quality=95, exif=exif)
print(im.size[0], im.size[1])
)",
                               &rc);
  ASSERT_EQ(rc, 0);
  int uw = 0, uh = 0;
  std::istringstream(size) >> uw >> uh;
  ASSERT_GT(uw, uh);

  ImageOptions options;
  ProcessedImage want = MustProcess(ReadBytes(src), options);
  ProcessedImage got = MustProcess(ReadBytes(rotated), options);
  EXPECT_EQ(got.original_width, uw);
  EXPECT_EQ(got.original_height, uh);
  std::string want_bytes(want.pixels.begin(), want.pixels.end());
  EXPECT_LT(MeanAbsDiff(got.pixels, want_bytes), 6.0);
  // Pillow agrees (exif_transpose).
  EXPECT_LT(DiffToPillow(got.pixels, rotated, 224, 224, "center-crop"), 5.0);
}

TEST_F(ImagePipeline, AllEightExifOrientationsMatchPillowExifTranspose) {
  // A 120x80 image whose quadrants differ, stored with each EXIF orientation (big- and
  // little-endian EXIF): mmpack must show what Pillow's exif_transpose shows.
  int rc = 0;
  std::string log = RunPython(R"(
import numpy as np
from PIL import Image
a = np.zeros((80, 120, 3), np.uint8)
a[:40, :60] = (220, 20, 20); a[:40, 60:] = (20, 200, 20)
a[40:, :60] = (20, 20, 220); a[40:, 60:] = (230, 230, 30)
im = Image.fromarray(a)
for o in range(1, 9):
    exif = Image.Exif()
    exif[0x0112] = o
    im.save()" + Py(tmp_.path()) + R"( + '/o%d.jpg' % o, quality=95, exif=exif)
)",
                              &rc);
  ASSERT_EQ(rc, 0) << log;
  for (int o = 1; o <= 8; ++o) {
    fs::path p = tmp_ / ("o" + std::to_string(o) + ".jpg");
    ImageOptions options;
    options.mode = format::ResizeMode::kStretch;
    options.width = 96;
    options.height = 64;
    ProcessedImage got = MustProcess(ReadBytes(p), options);
    EXPECT_EQ(got.original_width, o >= 5 ? 80 : 120) << o;
    EXPECT_LT(DiffToPillow(got.pixels, p, 96, 64, "stretch"), 4.0) << "orientation " << o;
  }
}

TEST_F(ImagePipeline, GreyscalePngBecomesThreeEqualBands) {
  fs::path camera = DataDir() / "skimage-micro" / "images" / "camera.png";
  ProcessedImage got = MustProcess(ReadBytes(camera), ImageOptions());
  for (size_t i = 0; i < got.pixels.size(); i += 3) {
    ASSERT_EQ(got.pixels[i], got.pixels[i + 1]);
    ASSERT_EQ(got.pixels[i], got.pixels[i + 2]);
  }
  EXPECT_LT(DiffToPillow(got.pixels, camera, 224, 224, "center-crop"), 4.0);
}

TEST_F(ImagePipeline, AlphaIsCompositedOntoTheBackground) {
  // skimage's coffee/astronaut are RGB; the RGBA one and the clip art carry real alpha.
  int rc = 0;
  std::string listing = RunPython(R"(
import os, sys
from PIL import Image
d = )" + Py(DataDir() / "openclipart-pd" / "images") +
                                      R"(
found = {}
for f in sorted(os.listdir(d)):
    im = Image.open(os.path.join(d, f))
    kind = im.mode + ('+trns' if 'transparency' in im.info else '')
    if kind in ('RGBA', 'P+trns', 'LA', 'L', '1', 'P') and kind not in found and max(im.size) < 1500:
        found[kind] = f
for k, f in sorted(found.items()):
    print(k, os.path.join(d, f))
)",
                                  &rc);
  ASSERT_EQ(rc, 0);
  std::istringstream lines(listing);
  std::string kind, path;
  int checked = 0;
  while (lines >> kind >> path) {
    for (int bg : {255, 0}) {
      ImageOptions options;
      options.background = Rgb{uint8_t(bg), uint8_t(bg), uint8_t(bg)};
      ProcessedImage got = MustProcess(ReadBytes(path), options);
      // Clip art is mostly upscaled here: the resampler filters both ways like Pillow.
      EXPECT_LT(DiffToPillow(got.pixels, path, 224, 224, "center-crop", bg), 4.0)
          << kind << " " << path << " background " << bg;
    }
    ++checked;
  }
  EXPECT_GE(checked, 3) << listing;

  // Fully transparent: nothing but background.
  fs::path clear = tmp_ / "clear.png";
  RunPython(
      "from PIL import Image\nImage.new('RGBA', (8, 8), (0, 0, 0, 0)).save(" + Py(clear) + ")\n",
      &rc);
  ASSERT_EQ(rc, 0);
  ImageOptions options;
  options.background = Rgb{10, 200, 30};
  ProcessedImage got = MustProcess(ReadBytes(clear), options);
  for (size_t i = 0; i < got.pixels.size(); i += 3) {
    ASSERT_EQ(got.pixels[i], 10);
    ASSERT_EQ(got.pixels[i + 1], 200);
    ASSERT_EQ(got.pixels[i + 2], 30);
  }
}

TEST_F(ImagePipeline, SixteenBitAndCmykAndPaletteBecomeEightBitSrgb) {
  int rc = 0;
  RunPython(R"(
import numpy as np
from PIL import Image
d = )" + Py(tmp_.path()) +
                R"(
Image.new('CMYK', (64, 48), (0, 255, 255, 0)).save(d + '/red_cmyk.jpg', quality=95)
a = np.full((40, 50), 0x8000, dtype=np.uint16)
Image.fromarray(a).save(d + '/grey16.png')
p = Image.new('P', (30, 20))
p.putpalette([0, 0, 255] * 256)
p.save(d + '/palette.gif')
p.save(d + '/palette.png')
Image.new('RGB', (33, 17), (200, 100, 50)).save(d + '/flat.webp', lossless=True)
Image.new('RGB', (33, 17), (200, 100, 50)).save(d + '/flat.tif')
Image.new('RGB', (33, 17), (200, 100, 50)).save(d + '/flat.bmp')
)",
            &rc);
  ASSERT_EQ(rc, 0);
  auto mean = [](const ProcessedImage& im, int band) {
    double s = 0;
    for (size_t i = band; i < im.pixels.size(); i += 3) s += im.pixels[i];
    return s / (im.pixels.size() / 3);
  };
  ImageOptions options;
  ProcessedImage cmyk = MustProcess(ReadBytes(tmp_ / "red_cmyk.jpg"), options);
  EXPECT_GT(mean(cmyk, 0), 180);
  EXPECT_LT(mean(cmyk, 1), 80);
  EXPECT_LT(mean(cmyk, 2), 80);
  ProcessedImage grey16 = MustProcess(ReadBytes(tmp_ / "grey16.png"), options);
  EXPECT_NEAR(mean(grey16, 0), 128, 1.5);
  EXPECT_NEAR(mean(grey16, 2), 128, 1.5);
  for (const char* f : {"palette.gif", "palette.png"}) {
    ProcessedImage pal = MustProcess(ReadBytes(tmp_ / f), options);
    EXPECT_NEAR(mean(pal, 2), 255, 1) << f;
    EXPECT_NEAR(mean(pal, 0), 0, 1) << f;
  }
  for (const char* f : {"flat.webp", "flat.tif", "flat.bmp"}) {
    ProcessedImage flat = MustProcess(ReadBytes(tmp_ / f), options);
    EXPECT_NEAR(mean(flat, 0), 200, 1.5) << f;
    EXPECT_NEAR(mean(flat, 1), 100, 1.5) << f;
    EXPECT_NEAR(mean(flat, 2), 50, 1.5) << f;
  }
}

// Images tagged with a made-up-here ROMM-RGB (ProPhoto) profile: primaries far outside sRGB,
// gamma 1.8. Stored pixels must be the sRGB ones Pillow's ImageCms (lcms, relative
// colorimetric) makes of them, in every format that carries a profile, on the TurboJPEG path
// (224 px, no shrink) and on libvips' shrink-on-load path (448 px), with a 16-bit alpha kept
// (libvips' icc_transform alone clips it). An sRGB-tagged JPEG is stored as if it had no
// profile.
TEST_F(ImagePipeline, NonSrgbIccProfilesAreConvertedToSrgb) {
  int rc = 0;
  const std::string expected = RunPython(R"(
import io, struct, zlib
import numpy as np
from PIL import Image, ImageCms
d = )" + Py(tmp_.path()) + R"(

def s15(v):
    return struct.pack('>i', round(v * 65536))

def profile(desc, primaries, gamma):
    """A v2 RGB matrix/TRC display profile (ICC.1:2001), PCS XYZ D50."""
    text = desc.encode() + b'\0'
    tags = [(b'desc', b'desc\0\0\0\0' + struct.pack('>I', len(text)) + text + bytes(78)),
            (b'wtpt', b'XYZ \0\0\0\0' + s15(0.9642) + s15(1.0) + s15(0.8249))]
    for sig, xyz in zip((b'rXYZ', b'gXYZ', b'bXYZ'), primaries):
        tags.append((sig, b'XYZ \0\0\0\0' + b''.join(s15(v) for v in xyz)))
    curv = b'curv\0\0\0\0' + struct.pack('>IH', 1, round(gamma * 256)) + b'\0\0'
    tags += [(b'rTRC', curv), (b'gTRC', curv), (b'bTRC', curv)]
    table, data, at = b'', b'', 128 + 4 + 12 * len(tags)
    for sig, body in tags:
        body += bytes(-len(body) % 4)
        table += sig + struct.pack('>II', at + len(data), len(body))
        data += body
    head = (struct.pack('>I', at + len(data)) + bytes(4) + struct.pack('>I', 0x02100000) +
            b'mntrRGB XYZ ' + bytes(12) + b'acsp' + bytes(28) + s15(0.9642) + s15(1.0) +
            s15(0.8249) + bytes(48))
    assert len(head) == 128
    return head + struct.pack('>I', len(tags)) + table + data

romm = profile('ROMM-RGB', [(0.7977, 0.2880, 0.0), (0.1352, 0.7119, 0.0),
                            (0.0313, 0.0001, 0.8249)], 1.8)
srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile('sRGB')).tobytes()
colours = [(180, 120, 60), (60, 140, 200), (200, 80, 90), (100, 100, 100)]
for size in (224, 448):
    a = np.zeros((size, size, 3), np.uint8)
    h = size // 2
    a[:h, :h], a[:h, h:], a[h:, :h], a[h:, h:] = colours
    im = Image.fromarray(a)
    im.save('%s/romm%d.jpg' % (d, size), quality=95, icc_profile=romm)
    if size == 224:
        im.save(d + '/romm.png', icc_profile=romm)
        im.save(d + '/romm.tif', icc_profile=romm)
        im.save(d + '/romm.webp', lossless=True, icc_profile=romm)
        im.save(d + '/srgb.jpg', quality=95, icc_profile=srgb)
        im.save(d + '/plain.jpg', quality=95)
# 16-bit RGBA PNG, half transparent, written by hand (Pillow writes no 16-bit RGBA)
def chunk(tag, data):
    return struct.pack('>I', len(data)) + tag + data + struct.pack('>I', zlib.crc32(tag + data))
row = b'\0' + struct.pack('>HHHH', 40000, 30000, 20000, 32768) * 224
with open(d + '/romm16a.png', 'wb') as f:
    f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 224, 224, 16, 6, 0, 0, 0)) +
            chunk(b'iCCP', b'ROMM\0\0' + zlib.compress(romm)) +
            chunk(b'IDAT', zlib.compress(row * 224)) + chunk(b'IEND', b''))
for f in ('romm224.jpg', 'romm448.jpg', 'romm.png', 'romm.tif', 'romm.webp', 'romm16a.png'):
    im = Image.open(d + '/' + f)
    ref = ImageCms.profileToProfile(im.convert('RGB'), ImageCms.ImageCmsProfile(io.BytesIO(romm)),
                                    ImageCms.createProfile('sRGB'), renderingIntent=1,
                                    outputMode='RGB')
    r = np.asarray(ref).astype(float)
    if f == 'romm16a.png':  # over the white background
        a = 32768 / 65535
        r = np.rint(r * a + 255 * (1 - a)).astype(int)
    q = im.size[0] // 4
    print(f, ' '.join('%d %d %d' % tuple(r[y, x]) for y in (q, 3 * q) for x in (q, 3 * q)))
)",
                                         &rc);
  ASSERT_EQ(rc, 0) << expected;
  std::istringstream lines(expected);
  std::string file;
  int checked = 0;
  while (lines >> file) {
    ProcessedImage got = MustProcess(ReadBytes(tmp_ / file), ImageOptions());
    ASSERT_EQ(got.pixels.size(), 224u * 224 * 3) << file;
    for (int y : {56, 168}) {
      for (int x : {56, 168}) {
        for (int band = 0; band < 3; ++band) {
          int want = 0;
          lines >> want;
          EXPECT_NEAR(int{got.pixels[(static_cast<size_t>(y) * 224 + x) * 3 + band]}, want, 3)
              << file << " at (" << x << ", " << y << ") band " << band;
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);
  // sRGB-tagged: the same pixels as untagged (no colour transform, the fast path).
  EXPECT_EQ(MustProcess(ReadBytes(tmp_ / "srgb.jpg"), ImageOptions()).pixels,
            MustProcess(ReadBytes(tmp_ / "plain.jpg"), ImageOptions()).pixels);
}

// The coco-cc photos tagged Adobe RGB (1998) or "Camera RGB Profile" (7 of 51) match Pillow
// with the embedded profile applied by ImageCms.
TEST_F(ImagePipeline, CocoPhotosWithWideGamutProfilesMatchPillowImageCms) {
  int rc = 0;
  const std::string list = RunPython(R"(
import glob, io, os, re
from PIL import Image, ImageCms
for f in sorted(glob.glob(os.path.join()" +
                                         Py(DataDir() / "coco-cc" / "images") + R"(, '*'))):
    icc = Image.open(f).info.get('icc_profile')
    if icc:
        desc = ImageCms.getProfileDescription(ImageCms.ImageCmsProfile(io.BytesIO(icc)))
        if not re.search(r'(?<![A-Za-z0-9])sRGB(?![A-Za-z0-9])', desc):
            print(f)
)",
                                     &rc);
  ASSERT_EQ(rc, 0) << list;
  std::istringstream lines(list);
  std::string path;
  int n = 0;
  while (std::getline(lines, path) && n < 3) {  // 3 are enough; each costs a Python run
    ProcessedImage got = MustProcess(ReadBytes(path), ImageOptions());
    EXPECT_LT(DiffToPillow(got.pixels, path, 224, 224, "center-crop", 255, /*icc=*/true), 4.0)
        << path;
    ++n;
  }
  EXPECT_EQ(n, 3) << list;
}

TEST_F(ImagePipeline, AnimatedGifGivesItsFirstFrame) {
  int rc = 0;
  RunPython(R"(
from PIL import Image
frames = [Image.new('RGB', (20, 20), c) for c in ((250, 0, 0), (0, 250, 0), (0, 0, 250))]
frames[0].save()" +
                Py(tmp_ / "anim.gif") + R"(, save_all=True, append_images=frames[1:], duration=100)
)",
            &rc);
  ASSERT_EQ(rc, 0);
  ProcessedImage got = MustProcess(ReadBytes(tmp_ / "anim.gif"), ImageOptions());
  EXPECT_GT(got.pixels[0], 240);
  EXPECT_LT(got.pixels[1], 10);
  EXPECT_EQ(got.original_height, 20);
}

// A PNG signature and IHDR claiming width x height; no pixel data follows.
std::string PngHeaderOnly(uint32_t width, uint32_t height) {
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  std::string ihdr = "IHDR" + be32(width) + be32(height) + std::string("\x08\x02\x00\x00\x00", 5);
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : ihdr) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + ihdr + be32(~crc);
}

TEST_F(ImagePipeline, MaxPixelsIsCheckedFromTheHeaderBeforeDecoding) {
  // 30000 x 30000 claimed, no data: only a header check can name the reason too_many_pixels
  // (a decode would fail as truncated first).
  ImageFailure f = MustFail(PngHeaderOnly(30000, 30000), ImageOptions());
  EXPECT_EQ(f.reason, "too_many_pixels") << f.detail;
  // A real photo over a small limit.
  ImageOptions small;
  small.max_pixels = 1000;
  EXPECT_EQ(MustFail(ReadBytes(CocoImages(1)[0]), small).reason, "too_many_pixels");
}

TEST_F(ImagePipeline, BadFilesFailWithTheirReason) {
  std::string jpeg = ReadBytes(CocoImages(1)[0]);
  EXPECT_EQ(MustFail(jpeg.substr(0, jpeg.size() * 6 / 10), ImageOptions()).reason,
            "truncated_image");
  EXPECT_EQ(MustFail(jpeg.substr(0, jpeg.size() - 2), ImageOptions()).reason,
            "truncated_image");  // only the EOI marker missing
  EXPECT_EQ(MustFail("", ImageOptions()).reason, "corrupt_image");
  EXPECT_EQ(MustFail(std::string(5000, 'x'), ImageOptions()).reason, "unsupported_format");
  EXPECT_EQ(MustFail("<svg xmlns=\"http://www.w3.org/2000/svg\"/>", ImageOptions()).reason,
            "unsupported_format");
  // A JPEG whose header is fine and whose body is garbage.
  std::string garbage = jpeg.substr(0, 600) + std::string(4000, '\x07');
  ImageFailure g = MustFail(garbage, ImageOptions());
  EXPECT_TRUE(g.reason == "corrupt_image" || g.reason == "truncated_image") << g.reason;
  // 2000 pseudo-random bytes in the middle of the entropy-coded data: libjpeg would paint
  // over the damage with a warning; mmpack refuses the image.
  std::string damaged = jpeg;
  unsigned seed = 11;
  for (size_t i = damaged.size() / 2; i < damaged.size() / 2 + 2000; ++i) {
    seed = seed * 1103515245u + 12345u;
    damaged[i] = static_cast<char>(seed >> 16);
  }
  EXPECT_EQ(MustFail(damaged, ImageOptions()).reason, "corrupt_image");
  // Stray bytes before the EOI marker (libjpeg: "3 extraneous bytes before marker 0xd9"),
  // as a few real COCO photos have: harmless, the image is decoded.
  std::string stray = jpeg.substr(0, jpeg.size() - 2) + std::string(3, '\0') + "\xFF\xD9";
  ProcessedImage decoded = MustProcess(stray, ImageOptions());
  ProcessedImage clean = MustProcess(jpeg, ImageOptions());
  EXPECT_EQ(decoded.pixels, clean.pixels);
  // A PNG cut in half.
  int rc = 0;
  RunPython("from PIL import Image\nImage.open(" + Py(CocoImages(1)[0]) + ").save(" +
                Py(tmp_ / "full.png") + ")\n",
            &rc);
  std::string png = ReadBytes(tmp_ / "full.png");
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(MustFail(png.substr(0, png.size() / 2), ImageOptions()).reason, "truncated_image");
}

// libvips' error buffer is process-wide. With several threads failing at once, each
// failure's detail must still be its own file's message: the one it gets alone.
TEST_F(ImagePipeline, FailureDetailIsTheFilesOwnWhenThreadsFailTogether) {
  int rc = 0;
  RunPython(R"(
import io, struct, zlib
from PIL import Image
d = )" + Py(tmp_.path()) +
                R"(
def png(name, mutate):
    b = io.BytesIO()
    Image.new('RGB', (300, 200), (10, 200, 30)).save(b, 'PNG')
    open(d + '/' + name, 'wb').write(mutate(bytearray(b.getvalue())))
def bad_ihdr_crc(b):
    b[29] ^= 0xFF
    return b
def bad_idat_crc(b):
    i = b.index(b'IDAT')
    n = struct.unpack('>I', b[i - 4:i])[0]
    b[i + 4 + n] ^= 0xFF
    return b
def bad_zlib(b):
    i = b.index(b'IDAT')
    b[i + 4] ^= 0xFF  # zlib header
    return b
png('ihdr_crc.png', bad_ihdr_crc)
png('idat_crc.png', bad_idat_crc)
png('zlib.png', bad_zlib)
open(d + '/bad.webp', 'wb').write(b'RIFF' + struct.pack('<I', 4096) + b'WEBPVP8 ' + bytes(4092))
open(d + '/bad.tif', 'wb').write(b'II*\0' + struct.pack('<I', 8) + b'\xff' * 4000)
g = io.BytesIO()
Image.new('P', (300, 200)).save(g, 'GIF')
gb = bytearray(g.getvalue())
gb[13 + 3 * 256 + 10:] = b'\x2c' + b'\x00' * 9 + b'\x09' + b'\xff' * 200 + b'\x3b'
open(d + '/bad.gif', 'wb').write(gb)
)",
            &rc);
  ASSERT_EQ(rc, 0);
  std::vector<std::string> names = {"ihdr_crc.png", "idat_crc.png", "zlib.png",
                                    "bad.webp",     "bad.tif",      "bad.gif"};
  std::vector<std::string> files, alone;
  for (const std::string& n : names) {
    files.push_back(ReadBytes(tmp_ / n));
    alone.push_back(MustFail(files.back(), ImageOptions()).detail);
  }
  const int kThreads = 6, kRounds = 60;
  std::vector<std::vector<std::string>> wrong(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const size_t i = (t + r) % files.size();
        ProcessedImage out;
        ImageFailure failure;
        if (ProcessImage(files[i], ImageOptions(), &out, &failure) || failure.detail != alone[i]) {
          wrong[t].push_back(names[i] + ": '" + failure.detail + "'");
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  size_t n_wrong = 0;
  std::string example;
  for (const auto& w : wrong) {
    n_wrong += w.size();
    if (example.empty() && !w.empty()) example = w.front();
  }
  EXPECT_EQ(n_wrong, 0u) << "of " << kThreads * kRounds << ", e.g. " << example;
}

TEST_F(ImagePipeline, TinyAndExtremeAspectImages) {
  int rc = 0;
  RunPython(R"(
from PIL import Image
d = )" + Py(tmp_.path()) +
                R"(
Image.new('RGB', (1, 1), (10, 200, 30)).save(d + '/one.png')
Image.new('RGB', (2000, 3), (0, 0, 128)).save(d + '/wide.png')
)",
            &rc);
  ASSERT_EQ(rc, 0);
  for (format::ResizeMode mode :
       {format::ResizeMode::kCenterCrop, format::ResizeMode::kPad, format::ResizeMode::kStretch}) {
    ImageOptions options;
    options.mode = mode;
    ProcessedImage one = MustProcess(ReadBytes(tmp_ / "one.png"), options);
    EXPECT_EQ(one.original_width, 1);
    EXPECT_NEAR(one.pixels[224 * 3 * 112 + 112 * 3 + 1], 200, 2);
    ProcessedImage wide = MustProcess(ReadBytes(tmp_ / "wide.png"), options);
    EXPECT_EQ(wide.original_width, 2000);
    const int row = mode == format::ResizeMode::kPad ? wide.valid_box[1] : 112;
    EXPECT_NEAR(wide.pixels[224 * 3 * row + 112 * 3 + 2], 128, 2);
    if (mode == format::ResizeMode::kPad) {
      EXPECT_EQ(wide.valid_box[2], 224);
      EXPECT_LE(wide.valid_box[3], 2);
      EXPECT_GE(wide.valid_box[3], 1);
    }
  }
}

TEST_F(ImagePipeline, AOneByTenMillionPngIsCroppedToItsMiddleNotStretched) {
  // Grey 1x10,000,000 whose rows run from black to white: covering 224x224 resizes it to
  // 224 x 2,240,000,000 (past 2^31: int geometry overflowed and stretched the whole ramp into
  // the output) and keeps the middle, where the ramp is at 128. The same turned by EXIF 6
  // (shown 10,000,000 x 1) keeps the middle columns: 128 too.
  int rc = 0;
  std::string log = RunPython(R"(
import numpy as np
from PIL import Image
n = 10000000
ramp = (np.arange(n, dtype=np.int64) * 256 // n).astype(np.uint8).reshape(n, 1)
im = Image.fromarray(ramp)
d = )" + Py(tmp_.path()) + R"(
im.save(d + '/tall.png')
exif = Image.Exif()
exif[0x0112] = 6
im.save(d + '/turned.png', exif=exif)
)",
                              &rc);
  ASSERT_EQ(rc, 0) << log;
  for (const char* name : {"tall.png", "turned.png"}) {
    ProcessedImage got = MustProcess(ReadBytes(tmp_ / name), ImageOptions());
    ASSERT_EQ(got.pixels.size(), 224u * 224 * 3) << name;
    const auto [lo, hi] = std::minmax_element(got.pixels.begin(), got.pixels.end());
    EXPECT_GE(*lo, 126) << name;  // a stretched ramp reaches 0 and 255
    EXPECT_LE(*hi, 130) << name;
  }
}

TEST(ParseColour, AcceptsNamesHexAndTriples) {
  EXPECT_EQ(ColourHex(*ParseColour("white")), "#ffffff");
  EXPECT_EQ(ColourHex(*ParseColour("#0a0B0c")), "#0a0b0c");
  EXPECT_EQ(ColourHex(*ParseColour("#abc")), "#aabbcc");
  EXPECT_EQ(ColourHex(*ParseColour("1, 2,3")), "#010203");
  EXPECT_FALSE(ParseColour("#12345").ok());
  EXPECT_FALSE(ParseColour("256,0,0").ok());
  EXPECT_FALSE(ParseColour("mauve").ok());
}

}  // namespace
}  // namespace mm::pack
