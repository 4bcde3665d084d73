#!/usr/bin/python3
"""End-to-end: `mmpack build` on generated hostile inputs (edge cases only; real data elsewhere).

Every bad sample (missing, empty, truncated, random bytes, wrong type, over --max-pixels, empty
or whitespace or invalid-UTF-8 caption) is skipped, listed in OUT/report.json with its path and
reason and counted by reason on stderr; the build exits 0 and every good sample is in the
shards with its caption byte-for-byte (Chinese, Arabic, emoji, combining marks, odd spacing)
and its pixels right (EXIF rotation, CMYK, 16-bit, grey+alpha, palette+tRNS, animated GIF,
1x1, 2000x3, webp/tiff/bmp).
"""

import json
import os
import random
import shutil
import sys
import unittest

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc", "images")


def raw_with_photos(parent, n):
    """PARENT/raw holding the first N coco-cc photos (sorted by name); returns (raw, names)."""
    raw = os.path.join(parent, "raw")
    os.makedirs(raw)
    names = sorted(os.listdir(COCO))[:n]
    for name in names:
        shutil.copy(os.path.join(COCO, name), raw)
    return raw, names


# The reasons FORMAT.md names; a hostile file may fairly be classed in any reason of its set.
UNREADABLE = {"unreadable", "corrupt_image", "unsupported_format", "empty_file"}
TRUNCATED = {"corrupt_image", "truncated_image"}

MULTILINGUAL = [
    "一只猫坐在窗台上，看着外面的雨。",
    "قطة تجلس على حافة النافذة",
    "Кошка сидит на подоконнике",
    "🐱🏠 a cat at home 👩‍👩‍👧 with family 🇯🇵",
    "cafe\u0301 (NFD) and caf\u00e9 (NFC) and Z\u0351\u0334a\u0352l\u0315g\u035co",
    "  leading and trailing spaces  ",
    "tab\tinside and a\nnewline and \"quotes\" and \\backslash",
    "ह बिल्ली खिड़की पर बैठी है। ไทย ᄒᆞᆫ글 ελληνικά",
]


def _quadrants(w, h):
    """An RGB image whose four quadrants differ (red, green / blue, yellow): rotation shows."""
    a = np.zeros((h, w, 3), np.uint8)
    a[:h // 2, :w // 2] = (220, 20, 20)
    a[:h // 2, w // 2:] = (20, 200, 20)
    a[h // 2:, :w // 2] = (20, 20, 220)
    a[h // 2:, w // 2:] = (230, 230, 30)
    return Image.fromarray(a)


class Hostile(u.TempDirTest):
    """One JSONL manifest mixing good and bad samples; one build; many checks."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        raw = os.path.join(cls.tmp, "raw")
        img = os.path.join(raw, "images")
        os.makedirs(os.path.join(img, "sub", "dir"))
        photos = sorted(os.listdir(COCO))
        rows = []  # (image path as written in the manifest, caption str)
        cls.good = {}  # manifest path -> [caption bytes]
        cls.bad = {}  # manifest path -> set of acceptable reasons

        def good(path, caption):
            rows.append((path, caption))
            cls.good.setdefault(path, []).append(caption.encode("utf-8"))

        def bad(path, caption, reasons):
            rows.append((path, caption))
            cls.bad[path] = reasons

        # --- good: odd colour modes, orientation, shapes, containers
        exif = Image.Exif()
        exif[0x0112] = 6  # rotate 90 degrees clockwise to display
        _quadrants(240, 120).save(os.path.join(img, "exif6.jpg"), quality=95, exif=exif)
        good("images/exif6.jpg", "exif orientation 6")
        cmyk = Image.new("CMYK", (64, 48), (0, 255, 255, 0))  # red
        cmyk.paste((255, 255, 0, 0), (32, 0, 64, 48))  # blue on the right
        cmyk.save(os.path.join(img, "cmyk.jpg"), quality=95)
        good("images/cmyk.jpg", "a CMYK JPEG, red left and blue right")
        x = np.linspace(0, 65535, 300).astype(">u2")
        rgb16 = np.stack([np.tile(x, (200, 1)), np.tile(x[::-1], (200, 1)),
                          np.full((200, 300), 30000, ">u2")], -1).astype(">u2")  # PNG: big-endian
        with open(os.path.join(img, "rgb16.png"), "wb") as f:
            f.write(u.png_bytes(300, 200, lambda y: rgb16[y].tobytes(), bit_depth=16, color_type=2))
        good("images/rgb16.png", "a 16-bit RGB PNG gradient")
        grey16 = np.tile(np.linspace(0, 65535, 256).astype(np.uint16), (256, 1))
        Image.fromarray(grey16, "I;16").save(os.path.join(img, "grey16.png"))
        good("images/grey16.png", "a 16-bit grey PNG gradient")
        la = np.zeros((100, 100, 2), np.uint8)
        la[:, :50] = (0, 0)  # black but fully transparent: must come out white
        la[:, 50:] = (100, 255)
        Image.fromarray(la, "LA").save(os.path.join(img, "sub", "dir", "grey_alpha.png"))
        good("images/sub/dir/grey_alpha.png", "grey plus alpha, left half transparent")
        pal = Image.new("P", (100, 100), 0)
        pal.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
        pal.paste(1, (50, 0, 100, 100))
        pal.save(os.path.join(img, "palette_trns.png"), transparency=0)
        good("images/palette_trns.png", "palette with tRNS, left half transparent")
        frames = [Image.new("RGB", (80, 60), c) for c in ((255, 0, 0), (0, 0, 255), (0, 255, 0))]
        frames[0].save(os.path.join(img, "anim.gif"), save_all=True, append_images=frames[1:],
                       duration=100, loop=0)
        good("images/anim.gif", "an animated GIF whose first frame is red")
        Image.new("RGB", (1, 1), (10, 200, 30)).save(os.path.join(img, "one.png"))
        good("images/one.png", "a single green pixel")
        wide = np.zeros((3, 2000, 3), np.uint8)
        wide[:, :, 0] = np.linspace(0, 255, 2000).astype(np.uint8)
        wide[:, :, 2] = 128
        Image.fromarray(wide).save(os.path.join(img, "wide.png"))
        good("images/wide.png", "an extreme aspect ratio, 2000 by 3")
        base = Image.open(os.path.join(COCO, photos[0])).convert("RGB")
        base.save(os.path.join(img, "photo.webp"), quality=90)
        good("images/photo.webp", "a WebP photo")
        base.save(os.path.join(img, "photo.tiff"))
        good("images/photo.tiff", "a TIFF photo")
        base.save(os.path.join(img, "photo.bmp"))
        good("images/photo.bmp", "a BMP photo")
        for i, caption in enumerate(MULTILINGUAL):
            name = "images/multi_%d.jpg" % i
            shutil.copy(os.path.join(COCO, photos[1 + i]), os.path.join(raw, name))
            good(name, caption)
        # several captions of one image, one line each
        shutil.copy(os.path.join(COCO, photos[10]), os.path.join(img, "several.jpg"))
        for caption in ("first caption", "second caption", "third 第三"):
            good("images/several.jpg", caption)
        # an absolute path is taken as it is
        absolute = os.path.join(cls.tmp, "elsewhere.jpg")
        shutil.copy(os.path.join(COCO, photos[11]), absolute)
        good(absolute, "an image given by its absolute path")
        # a file name with spaces and Cyrillic; a caption line that comes back much later
        shutil.copy(os.path.join(COCO, photos[12]), os.path.join(img, "фото 1.jpg"))
        good("images/фото 1.jpg", "a file name with a space and Cyrillic letters")
        # a caption far longer than --max-tokens (77): truncated, counted
        good("images/photo.webp", "a very long caption " + "with many many words " * 60)
        # more decodable oddities: grey JPEG, progressive JPEG, 16-bit RGBA PNG, WebP with alpha
        Image.open(os.path.join(COCO, photos[13])).convert("L").save(os.path.join(img, "grey.jpg"))
        good("images/grey.jpg", "a one-channel grey JPEG")
        Image.open(os.path.join(COCO, photos[14])).save(os.path.join(img, "progressive.jpg"),
                                                         progressive=True, quality=90)
        good("images/progressive.jpg", "a progressive JPEG")
        rgba16 = np.zeros((64, 64, 4), ">u2")
        rgba16[:, :, 1] = 65535  # green
        rgba16[:, 32:, 3] = 65535  # right half opaque, left half transparent
        with open(os.path.join(img, "rgba16.png"), "wb") as f:
            f.write(u.png_bytes(64, 64, lambda y: rgba16[y].tobytes(), bit_depth=16, color_type=6))
        good("images/rgba16.png", "a 16-bit RGBA PNG, left half transparent")
        rgba = np.zeros((64, 64, 4), np.uint8)
        rgba[:, :, 2] = 255  # blue
        rgba[:, 32:, 3] = 255
        Image.fromarray(rgba, "RGBA").save(os.path.join(img, "alpha.webp"), lossless=True)
        good("images/alpha.webp", "a WebP with alpha, left half transparent")

        # --- bad: each must be skipped and reported
        bad("images/missing.jpg", "a missing file", {"missing_file"})
        open(os.path.join(img, "empty.jpg"), "wb").close()
        bad("images/empty.jpg", "a 0-byte file", UNREADABLE)
        data = open(os.path.join(COCO, photos[2]), "rb").read()
        with open(os.path.join(img, "truncated.jpg"), "wb") as f:
            f.write(data[:len(data) * 6 // 10])
        bad("images/truncated.jpg", "a JPEG cut at 60%", TRUNCATED)
        Image.open(os.path.join(COCO, photos[3])).save(os.path.join(img, "full.png"))
        data = open(os.path.join(img, "full.png"), "rb").read()
        os.remove(os.path.join(img, "full.png"))
        with open(os.path.join(img, "truncated.png"), "wb") as f:
            f.write(data[:len(data) // 2])
        bad("images/truncated.png", "a PNG cut in half", TRUNCATED)
        with open(os.path.join(img, "random.jpg"), "wb") as f:
            f.write(random.Random(7).randbytes(5000))
        bad("images/random.jpg", "random bytes named .jpg", UNREADABLE)
        with open(os.path.join(img, "text.png"), "w") as f:
            f.write("this is not a picture\n" * 20)
        bad("images/text.png", "a text file named .png", UNREADABLE)
        with open(os.path.join(img, "drawing.svg"), "w") as f:
            f.write('<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">'
                    '<rect width="64" height="64" fill="red"/></svg>\n')
        bad("images/drawing.svg", "an SVG drawing", {"unsupported_format"})
        Image.new("RGB", (32, 32), (0, 0, 255)).save(os.path.join(img, "icon.ico"))
        bad("images/icon.ico", "a Windows icon", {"unsupported_format"})
        # 10000 x 10000 = 1e8 pixels > the default 89478485, in a 12 KB 1-bit PNG
        with open(os.path.join(img, "huge.png"), "wb") as f:
            f.write(u.png_bytes(10000, 10000, bytes(1250), bit_depth=1, color_type=0))
        bad("images/huge.png", "ten thousand squared", {"too_many_pixels"})
        # a header claiming 30000 x 30000 and pixel data cut short: only the header may be read
        with open(os.path.join(img, "huge_header.png"), "wb") as f:
            f.write(u.png_bytes(30000, 4, bytes(90000), color_type=2, header_height=30000))
        bad("images/huge_header.png", "a header claiming 30000 squared", {"too_many_pixels"})
        shutil.copy(os.path.join(COCO, photos[4]), os.path.join(img, "empty_caption.jpg"))
        bad("images/empty_caption.jpg", "", {"empty_caption"})
        shutil.copy(os.path.join(COCO, photos[5]), os.path.join(img, "blank_caption.jpg"))
        bad("images/blank_caption.jpg", " \t  \r\n ", {"empty_caption"})
        shutil.copy(os.path.join(COCO, photos[15]), os.path.join(img, "nbsp_caption.jpg"))
        bad("images/nbsp_caption.jpg", "\u00a0\u00a0 \u00a0", {"empty_caption"})
        shutil.copy(os.path.join(COCO, photos[16]), os.path.join(img, "ideographic_caption.jpg"))
        bad("images/ideographic_caption.jpg", "\u3000\u3000", {"empty_caption"})

        cls.raw = raw
        with open(os.path.join(raw, "pairs.jsonl"), "w", encoding="utf-8") as f:
            for path, caption in rows:
                f.write(json.dumps({"image": path, "text": caption}, ensure_ascii=False) + "\n")
        cls.out = os.path.join(cls.tmp, "out")
        cls.build_run = u.build(os.path.join(raw, "pairs.jsonl"), cls.out)
        cls.shards = u.ShardSet(cls.out)
        cls.tok = u.Tokenizer(u.ALBERT)

    def sample(self, path):
        for s in self.shards.samples:
            if s["source"] == path.encode("utf-8"):
                return s
        self.fail("%s not in the shards (report: %s)" % (path, self.shards.report))

    def image(self, path):
        return self.shards.image(self.sample(path)).astype(np.int16)

    def test_every_good_sample_written_with_captions_byte_for_byte(self):
        got = {s["source"].decode("utf-8"): s["captions"] for s in self.shards.samples}
        self.assertEqual(got, self.good)
        self.assertEqual([s["source"].decode("utf-8") for s in self.shards.samples],
                         list(self.good), "input order")

    def test_tokens_of_multilingual_captions_match_sentencepiece(self):
        truncated = 0
        for s in self.shards.samples:
            for cap, toks in zip(s["captions"], s["tokens"]):
                want, cut = self.tok.expected(cap, 77)
                truncated += cut
                self.assertEqual(toks, want, cap.decode("utf-8"))
        self.assertGreaterEqual(truncated, 1)
        self.assertEqual(self.shards.report["truncated_captions"], truncated)

    def test_every_bad_sample_reported_with_path_and_reason(self):
        report = self.shards.report
        self.assertIsNotNone(report, "no report.json")
        dropped = {d["source"]: d for d in report["dropped"]}
        self.assertEqual(set(dropped), set(self.bad), report)
        for path, reasons in self.bad.items():
            self.assertIn(dropped[path]["reason"], reasons, dropped[path])
        counts = {}
        for d in report["dropped"]:
            counts[d["reason"]] = counts.get(d["reason"], 0) + 1
        self.assertEqual(report["dropped_by_reason"], counts)
        self.assertEqual(report["samples_written"], len(self.good))
        self.assertEqual(report["samples_seen"], len(self.good) + len(self.bad))
        idx = self.shards.index["dropped"]
        self.assertEqual(idx["total"], len(self.bad))
        self.assertEqual(idx["by_reason"], counts)

    def test_stderr_counts_dropped_by_reason(self):
        lines = self.build_run.stderr.splitlines() + self.build_run.stdout.splitlines()
        for reason, n in self.shards.report["dropped_by_reason"].items():
            self.assertTrue(any(reason in l and str(n) in l for l in lines),
                            "no line counting %s=%d in:\n%s" % (reason, n, self.build_run.stderr))

    def test_info_shows_dropped_by_reason(self):
        run = u.mmpack("info", self.out)
        self.assertEqual(run.rc, 0, str(run))
        self.assertRegex(run.stdout, r"\b%d\b" % len(self.good))
        for reason in self.shards.report["dropped_by_reason"]:
            self.assertIn(reason, run.stdout)

    def test_verify_accepts_the_set(self):
        run = u.mmpack("verify", self.out)
        self.assertEqual(run.rc, 0, str(run))

    def test_same_files_with_one_thread(self):
        one = os.path.join(self.tmp, "one_thread")
        u.build(os.path.join(self.raw, "pairs.jsonl"), one, threads=1)
        names = sorted(os.listdir(self.out))
        self.assertEqual(names, sorted(os.listdir(one)))
        for name in names:
            with open(os.path.join(self.out, name), "rb") as a, open(os.path.join(one, name), "rb") as b:
                self.assertTrue(a.read() == b.read(), name + " differs between --threads 2 and 1")

    def test_exif_orientation_applied(self):
        s = self.sample("images/exif6.jpg")
        self.assertEqual(s["original_size"], (120, 240))
        got = self.image("images/exif6.jpg")
        path = os.path.join(self.raw, "images/exif6.jpg")
        rotated = u.reference_image(path, 224, 224)
        unrotated = np.asarray(Image.open(path).convert("RGB").resize((224, 224)))
        self.assertLess(u.mean_abs_diff(got, rotated), 12)
        self.assertGreater(u.mean_abs_diff(got, unrotated), 40)

    def test_cmyk_converted_to_rgb(self):
        got = self.image("images/cmyk.jpg")
        left, right = got[:, 20:90].mean((0, 1)), got[:, 134:204].mean((0, 1))
        self.assertGreater(left[0], 150, left)
        self.assertLess(max(left[1], left[2]), 100, left)
        self.assertGreater(right[2], 100, right)
        self.assertLess(right[0], 100, right)

    def test_16_bit_pngs_scaled_to_8_bit(self):
        for name in ("images/rgb16.png", "images/grey16.png"):
            got = self.image(name)
            ref = u.reference_image(os.path.join(self.raw, name), 224, 224)
            self.assertLess(u.mean_abs_diff(got, ref), 6, name)
            self.assertGreater(got.std(), 30, name)

    def test_alpha_composited_on_white(self):
        for name, right in (("images/sub/dir/grey_alpha.png", (100, 100, 100)),
                            ("images/palette_trns.png", (255, 0, 0))):
            got = self.image(name)
            self.assertTrue(np.all(np.abs(got[:, :100] - 255) <= 2), name)
            self.assertTrue(np.all(np.abs(got[:, 124:] - np.array(right)) <= 2), name)

    def test_more_alpha_and_jpeg_kinds(self):
        for name, right in (("images/rgba16.png", (0, 255, 0)), ("images/alpha.webp", (0, 0, 255))):
            got = self.image(name)
            self.assertTrue(np.all(np.abs(got[:, :100] - 255) <= 2), name)
            self.assertTrue(np.all(np.abs(got[:, 124:] - np.array(right)) <= 2), name)
        for name in ("images/grey.jpg", "images/progressive.jpg"):
            ref = u.reference_image(os.path.join(self.raw, name), 224, 224)
            self.assertLess(u.mean_abs_diff(self.image(name), ref), 8, name)
        grey = self.image("images/grey.jpg")
        self.assertTrue(np.array_equal(grey[:, :, 0], grey[:, :, 1]))
        self.assertTrue(np.array_equal(grey[:, :, 0], grey[:, :, 2]))

    def test_animated_gif_first_frame(self):
        got = self.image("images/anim.gif")
        self.assertTrue(np.all(np.abs(got - np.array((255, 0, 0))) <= 3), got.mean((0, 1)))

    def test_tiny_and_extreme_aspect_images(self):
        one = self.image("images/one.png")
        self.assertTrue(np.all(np.abs(one - np.array((10, 200, 30))) <= 2))
        self.assertEqual(self.sample("images/one.png")["original_size"], (1, 1))
        wide = self.sample("images/wide.png")
        self.assertEqual(wide["original_size"], (2000, 3))
        got = self.image("images/wide.png")
        self.assertEqual(got.shape, (224, 224, 3))
        self.assertTrue(np.all(np.abs(got[:, :, 2] - 128) <= 2))
        self.assertLess(u.mean_abs_diff(got, u.reference_image(
            os.path.join(self.raw, "images/wide.png"), 224, 224)), 6)

    def test_other_containers_decode_like_pil(self):
        for name in ("images/photo.webp", "images/photo.tiff", "images/photo.bmp"):
            ref = u.reference_image(os.path.join(self.raw, name), 224, 224)
            self.assertLess(u.mean_abs_diff(self.image(name), ref), 8, name)


class HostileFilesLayout(u.TempDirTest):
    """A folder of pairs: invalid UTF-8 and empty .txt captions, an explicit --max-pixels."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        raw = os.path.join(cls.tmp, "raw")
        os.makedirs(os.path.join(raw, "a", "b"))
        photos = sorted(os.listdir(COCO))

        def pair(key, photo, caption_bytes):
            shutil.copy(os.path.join(COCO, photo), os.path.join(raw, key + ".jpg"))
            with open(os.path.join(raw, key + ".txt"), "wb") as f:
                f.write(caption_bytes)

        pair("good", photos[0], "a good caption, naïve café".encode("utf-8"))
        pair("a/b/nested", photos[1], "日本語のキャプション".encode("utf-8"))
        pair("bad_utf8", photos[2], b"caf\xff\xfe latte")
        pair("a/lone_continuation", photos[3], b"abc \x80 def")
        pair("overlong", photos[4], b"slash \xc0\xaf here")
        pair("empty", photos[5], b"")
        Image.new("RGB", (1200, 1000), (9, 9, 9)).save(os.path.join(raw, "big.png"))
        with open(os.path.join(raw, "big.txt"), "w") as f:
            f.write("1.2 megapixels, over the limit of this build")
        cls.out = os.path.join(cls.tmp, "out")
        cls.build_run = u.build(raw, cls.out, "--max-pixels", "1000000")
        cls.shards = u.ShardSet(cls.out)

    def test_good_pairs_written(self):
        got = {os.path.basename(s["source"].decode()): s["captions"] for s in self.shards.samples}
        self.assertEqual(set(got), {"good.jpg", "nested.jpg"})
        self.assertEqual(got["good.jpg"], ["a good caption, naïve café".encode("utf-8")])
        self.assertEqual(got["nested.jpg"], ["日本語のキャプション".encode("utf-8")])

    def test_bad_pairs_reported(self):
        reasons = {os.path.basename(d["source"]): d["reason"] for d in self.shards.report["dropped"]}
        self.assertEqual(reasons, {"bad_utf8.jpg": "invalid_utf8",
                                   "lone_continuation.jpg": "invalid_utf8",
                                   "overlong.jpg": "invalid_utf8",
                                   "empty.jpg": "empty_caption",
                                   "big.png": "too_many_pixels"})


class LargeRotatedPhotos(u.TempDirTest):
    """Phone-sized photos (4000x3000, shrink-on-load at 1/8) with EXIF orientations 6 and 8 and
    3 (180 degrees), packed to a non-square size: an axis swapped between shrink, resize and
    rotation shows up as a wrong shape or wrong pixels."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.raw = os.path.join(cls.tmp, "raw")
        os.makedirs(cls.raw)
        photo = Image.open(os.path.join(COCO, sorted(os.listdir(COCO))[7])).convert("RGB")
        big = photo.resize((4000, 3000), Image.BILINEAR)
        # quadrant marks so that a wrong rotation cannot look right
        marks = np.asarray(big).copy()
        marks[:600, :800] = (255, 0, 0)
        marks[-600:, -800:] = (0, 0, 255)
        big = Image.fromarray(marks)
        cls.names = []
        with open(os.path.join(cls.raw, "m.jsonl"), "w") as f:
            for orientation in (3, 6, 8):
                exif = Image.Exif()
                exif[0x0112] = orientation
                name = "big_o%d.jpg" % orientation
                big.save(os.path.join(cls.raw, name), quality=90, exif=exif)
                cls.names.append(name)
                f.write(json.dumps({"image": name, "text": "orientation %d" % orientation}) + "\n")
        cls.out = os.path.join(cls.tmp, "out")
        u.build(os.path.join(cls.raw, "m.jsonl"), cls.out, "--image-size", "300x200")
        cls.shards = u.ShardSet(cls.out)

    def test_sizes_and_pixels_follow_the_orientation(self):
        self.assertEqual(len(self.shards.samples), 3, self.shards.report)
        for sample, name in zip(self.shards.samples, self.names):
            want_size = (4000, 3000) if name == "big_o3.jpg" else (3000, 4000)
            self.assertEqual(sample["original_size"], want_size, name)
            img = self.shards.image(sample)
            self.assertEqual(img.shape, (200, 300, 3))
            ref = u.reference_image(os.path.join(self.raw, name), 300, 200)
            self.assertLess(u.mean_abs_diff(img, ref), 8, name)


class JpegGeometry(u.TempDirTest):
    """JPEGs at the edges of DCT scaling and cropping: odd sizes, sizes just above and below
    the 1/2 and 1/4 scale thresholds, smaller than the target (upscale), 4:4:4 / 4:2:2 /
    4:2:0 chroma; packed in each resize mode and compared with PIL."""

    SIZES = [(641, 479), (449, 449), (447, 600), (896, 897), (895, 1200), (224, 224),
             (223, 300), (1000, 225), (225, 1000), (97, 61)]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.raw = os.path.join(cls.tmp, "raw")
        os.makedirs(cls.raw)
        photos = sorted(os.listdir(COCO))
        cls.names = []
        with open(os.path.join(cls.raw, "m.jsonl"), "w") as f:
            for i, (w, h) in enumerate(cls.SIZES):
                im = Image.open(os.path.join(COCO, photos[20 + i])).convert("RGB")
                im = im.resize((w, h), Image.LANCZOS)
                name = "j%02d_%dx%d.jpg" % (i, w, h)
                im.save(os.path.join(cls.raw, name), quality=92, subsampling=i % 3)
                cls.names.append(name)
                f.write(json.dumps({"image": name, "text": name}) + "\n")
        cls.outs = {}
        for mode in ("center-crop", "pad", "stretch"):
            out = os.path.join(cls.tmp, mode)
            u.build(os.path.join(cls.raw, "m.jsonl"), out, "--resize-mode", mode)
            cls.outs[mode] = u.ShardSet(out)

    def check(self, mode):
        s = self.outs[mode]
        self.assertEqual([x["source"].decode() for x in s.samples], self.names)
        for x, (w, h) in zip(s.samples, self.SIZES):
            self.assertEqual(x["original_size"], (w, h))
            img = s.image(x)
            ref = u.reference_image(os.path.join(self.raw, x["source"].decode()), 224, 224, mode)
            d = u.mean_abs_diff(img, ref)
            self.assertLess(d, 6, "%s %s: %.1f" % (mode, x["source"], d))
            if os.environ.get("MM_E2E_PRINT"):
                print(mode, x["source"].decode(), round(d, 2))

    def test_center_crop(self):
        self.check("center-crop")

    def test_pad(self):
        self.check("pad")
        for x, (w, h) in zip(self.outs["pad"].samples, self.SIZES):
            scale = min(224 / w, 224 / h)
            _, _, bw, bh = x["valid_box"]
            self.assertLessEqual(abs(bw - w * scale), 1.01, x["source"])
            self.assertLessEqual(abs(bh - h * scale), 1.01, x["source"])

    def test_stretch(self):
        self.check("stretch")


class CorruptData(u.TempDirTest):
    """Files whose headers are fine but whose compressed data is damaged in the middle (2000
    random bytes in a JPEG's entropy-coded data; 50 in a PNG's IDAT): skipped as corrupt, each
    with its own decoder's message, and the good image after them written."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.raw = os.path.join(cls.tmp, "raw")
        os.makedirs(cls.raw)
        photos = sorted(os.listdir(COCO))
        rng = random.Random(11)
        data = bytearray(open(os.path.join(COCO, photos[0]), "rb").read())
        mid = len(data) // 2
        data[mid:mid + 2000] = rng.randbytes(2000)
        with open(os.path.join(cls.raw, "damaged.jpg"), "wb") as f:
            f.write(data)
        Image.open(os.path.join(COCO, photos[1])).save(os.path.join(cls.raw, "full.png"))
        data = bytearray(open(os.path.join(cls.raw, "full.png"), "rb").read())
        os.remove(os.path.join(cls.raw, "full.png"))
        mid = len(data) // 2
        data[mid:mid + 50] = rng.randbytes(50)
        with open(os.path.join(cls.raw, "damaged.png"), "wb") as f:
            f.write(data)
        shutil.copy(os.path.join(COCO, photos[2]), os.path.join(cls.raw, "fine.jpg"))
        with open(os.path.join(cls.raw, "m.jsonl"), "w") as f:
            for name in ("damaged.jpg", "damaged.png", "fine.jpg"):
                f.write(json.dumps({"image": name, "text": "caption of " + name}) + "\n")
        cls.out = os.path.join(cls.tmp, "out")
        u.build(os.path.join(cls.raw, "m.jsonl"), cls.out, threads=1)
        cls.shards = u.ShardSet(cls.out)

    def test_only_the_good_image_written(self):
        self.assertEqual([s["source"] for s in self.shards.samples], [b"fine.jpg"])

    def test_each_drop_carries_its_own_decoder_message(self):
        dropped = {d["source"]: d for d in self.shards.report["dropped"]}
        self.assertIn("damaged.png", dropped)
        self.assertEqual(dropped["damaged.png"]["reason"], "corrupt_image")
        self.assertNotIn("JPEG", dropped["damaged.png"]["detail"],
                         "a PNG's drop reports another file's JPEG message")
        self.assertIn("damaged.jpg", dropped, "a JPEG with damaged entropy data was written")
        self.assertEqual(dropped["damaged.jpg"]["reason"], "corrupt_image")


class NulInCaption(u.TempDirTest):
    """A caption holding U+0000 (valid UTF-8, and legal JSON as \\u0000) must either come back
    byte-for-byte or be dropped and reported; never silently cut at the NUL."""

    def test_nul_caption_kept_whole_or_reported(self):
        raw, photos = raw_with_photos(self.tmp, 2)
        with open(os.path.join(raw, "m.jsonl"), "w") as f:
            f.write(json.dumps({"image": photos[0], "text": "before\u0000after"}) + "\n")
            f.write(json.dumps({"image": photos[1], "text": "fine"}) + "\n")
        out = os.path.join(self.tmp, "out")
        u.build(os.path.join(raw, "m.jsonl"), out)
        s = u.ShardSet(out)
        got = {x["source"].decode(): x["captions"] for x in s.samples}
        self.assertEqual(got[photos[1]], [b"fine"])
        if photos[0] in got:
            self.assertEqual(got[photos[0]], [b"before\0after"])
        else:
            self.assertEqual([d["source"] for d in s.report["dropped"]], [photos[0]])


class MalformedManifestLines(u.TempDirTest):
    """A JSONL manifest with a broken line, a line without text, a line without image, a blank
    line and a CRLF line: the broken ones are reported, every good line is built."""

    def test_good_lines_survive_bad_ones(self):
        raw, photos = raw_with_photos(self.tmp, 3)
        with open(os.path.join(raw, "m.jsonl"), "wb") as f:
            f.write(b'{"image": "%s", "text": "one"}\n' % photos[0].encode())
            f.write(b'{"image": "%s", "text": "cut short\n' % photos[1].encode())
            f.write(b'{"image": "%s"}\n' % photos[1].encode())
            f.write(b'{"text": "no image here"}\n')
            f.write(b'\n')
            f.write(b'{"image": "%s", "text": "windows line"}\r\n' % photos[2].encode())
        out = os.path.join(self.tmp, "out")
        u.build(os.path.join(raw, "m.jsonl"), out)
        s = u.ShardSet(out)
        self.assertEqual([(x["source"].decode(), x["captions"]) for x in s.samples],
                         [(photos[0], [b"one"]), (photos[2], [b"windows line"])])
        self.assertGreaterEqual(len(s.report["dropped"]), 2, s.report)


class InvalidUtf8InJsonl(u.TempDirTest):
    """Raw invalid UTF-8 bytes inside a JSONL caption: that sample is dropped, the rest built."""

    def test_bad_line_dropped_rest_built(self):
        raw, photos = raw_with_photos(self.tmp, 3)
        with open(os.path.join(raw, "m.jsonl"), "wb") as f:
            f.write(b'{"image": "%s", "text": "fine one"}\n' % photos[0].encode())
            f.write(b'{"image": "%s", "text": "caf\xff\xfe bad bytes"}\n' % photos[1].encode())
            f.write(b'{"image": "%s", "text": "fine two"}\n' % photos[2].encode())
        out = os.path.join(self.tmp, "out")
        u.build(os.path.join(raw, "m.jsonl"), out)
        s = u.ShardSet(out)
        self.assertEqual([x["captions"] for x in s.samples], [[b"fine one"], [b"fine two"]])
        self.assertEqual(len(s.report["dropped"]), 1, s.report)


if __name__ == "__main__":
    unittest.main(verbosity=2)
