"""End-to-end tests of issue 14's curation options of `mmpack build`, and of `mmpack stats`
and `mmpack preview`, on ../shared/data/coco-cc (51 photos, 255 captions) and on duplicates
made from its photos. Expected counts are computed here, independently of mmpack: source
sizes with PIL, token counts with Debian's Python sentencepiece, case with str.lower()."""

import json
import os
import shutil
import sys
import tempfile
import unittest

import h5py
import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.dirname(__file__))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc")
MANIFEST = os.path.join(COCO, "captions.jsonl")


def manifest_rows():
    with open(MANIFEST, "rb") as f:
        return [json.loads(line) for line in f if line.strip()]


def source_sizes():
    """image path as written in the manifest -> (width, height) after EXIF orientation."""
    sizes = {}
    for row in manifest_rows():
        if row["image"] not in sizes:
            im = ImageOps.exif_transpose(Image.open(os.path.join(COCO, row["image"])))
            sizes[row["image"]] = im.size
    return sizes


def unk_rate(captions, lower, max_tokens=77):
    """Fraction of stored ids that are <unk>, as Python's sentencepiece sees the captions."""
    tok = u.Tokenizer(u.ALBERT, lowercase=lower)
    unk = total = 0
    for c in captions:
        ids, _ = tok.expected(c, max_tokens)
        unk += sum(1 for i in ids if i == tok.sp.unk_id())
        total += len(ids)
    return unk / total


class Base(unittest.TestCase):
    def setUp(self):
        u.require_environment()
        self.tmp = tempfile.mkdtemp(prefix="mmpack-curate-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def out(self, name):
        return os.path.join(self.tmp, name)


class TextNormalisation(Base):
    def test_unk_warning_and_rate_without_lowercase(self):
        run = u.build(COCO, self.out("cased"), lowercase=False)
        s = u.ShardSet(self.out("cased"))
        captions = [c for smp in s.samples for c in smp["captions"]]
        want = unk_rate(captions, lower=False)
        self.assertGreater(want, 0.01)
        self.assertAlmostEqual(s.index["tokenizer"]["unk_rate"], want, places=9)
        self.assertEqual(s.index["text"], {"lowercase": False, "normalize": "none"})
        warnings = [l for l in run.stderr.splitlines() if "warning" in l and "<unk>" in l]
        self.assertEqual(len(warnings), 1, run.stderr)
        self.assertIn("--lowercase", warnings[0])
        info = u.mmpack("info", self.out("cased"))
        self.assertIn("unk rate:     %.2f%%" % (100 * want), info.stdout)

    def test_lowercase_tokenizes_lowercased_text_and_stores_captions_as_given(self):
        run = u.build(COCO, self.out("lower"), "--lowercase", "--normalize", "nfkc")
        self.assertNotIn("<unk>", run.stderr)
        s = u.ShardSet(self.out("lower"))
        self.assertEqual(s.index["text"], {"lowercase": True, "normalize": "nfkc"})
        given = u.read_manifest_jsonl(MANIFEST)
        tok = u.Tokenizer(u.ALBERT)
        cased = 0
        for smp in s.samples:
            self.assertEqual(smp["captions"], given[smp["source"].decode()])
            for cap, ids in zip(smp["captions"], smp["tokens"]):
                cased += cap != cap.lower()
                want, _ = tok.expected(cap.decode().lower().encode(), 77)
                self.assertEqual(ids, want, cap)
        self.assertGreater(cased, 0, "coco-cc has capitals, stored as given")
        want = unk_rate([c for smp in s.samples for c in smp["captions"]], lower=True)
        self.assertLess(want, 0.01)
        self.assertAlmostEqual(s.index["tokenizer"]["unk_rate"], want, places=9)
        self.assertIn("lowercased, normalize nfkc", u.mmpack("info", self.out("lower")).stdout)


class FieldMapping(Base):
    def write_manifests(self, rows):
        with open(self.out("m.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        with open(self.out("m.csv"), "w") as f:
            f.write("Img,alt,alt2,other\n")
            for r in rows:
                f.write('"%s","%s","%s",x\n' % (r["img"], r["alt"], r["alt2"]))

    def test_image_and_caption_fields_in_jsonl_and_csv(self):
        photos = sorted(os.listdir(os.path.join(COCO, "images")))[:4]
        rows = [{"img": os.path.join(COCO, "images", p), "alt": "first %d" % i,
                 "alt2": "second %d" % i} for i, p in enumerate(photos)]
        rows.append({"img": "https://example.com/cat.jpg", "alt": "remote", "alt2": "x"})
        self.write_manifests(rows)
        for manifest in ("m.jsonl", "m.csv"):
            out = self.out(manifest + ".out")
            u.build(self.out(manifest), out, "--image-field", "img",
                    "--caption-field", "alt,alt2", "--lowercase")
            s = u.ShardSet(out)
            self.assertEqual(len(s.samples), 4, manifest)
            for i, smp in enumerate(s.samples):
                self.assertEqual(smp["captions"], [b"first %d" % i, b"second %d" % i])
            self.assertEqual(s.report["dropped_by_reason"], {"remote_image_not_supported": 1})
            self.assertEqual(s.report["dropped"][0]["reason"], "remote_image_not_supported")
            # Repeated flags are the same as a comma list; one field gives one caption.
            out1 = self.out(manifest + ".one")
            u.build(self.out(manifest), out1, "--image-field", "img", "--caption-field", "alt2",
                    "--lowercase")
            self.assertEqual(u.ShardSet(out1).samples[0]["captions"], [b"second 0"])

    def test_missing_field_is_one_clear_error(self):
        self.write_manifests([{"img": "a.jpg", "alt": "a", "alt2": "b"}])
        run = u.mmpack("build", self.out("m.csv"), "-o", self.out("x"), "--tokenizer", u.ALBERT)
        self.assertNotEqual(run.rc, 0)
        self.assertIn("image column (image, image_path", run.stderr)
        self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)
        # The field options read manifests only: a folder of pairs refuses them in one line.
        pairs = self.out("pairs")
        os.makedirs(pairs)
        photo = sorted(os.listdir(os.path.join(COCO, "images")))[0]
        shutil.copy(os.path.join(COCO, "images", photo), os.path.join(pairs, "a.jpg"))
        with open(os.path.join(pairs, "a.txt"), "w") as f:
            f.write("a photo\n")
        run = u.mmpack("build", pairs, "-o", self.out("y"), "--tokenizer", u.ALBERT,
                       "--caption-field", "alt")
        self.assertNotEqual(run.rc, 0)
        self.assertIn("read as files", run.stderr)
        self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)


class Filters(Base):
    def build_with(self, name, *flags):
        out = self.out(name)
        u.build(COCO, out, "--lowercase", *flags)
        return u.ShardSet(out)

    def test_min_size_and_max_aspect(self):
        sizes = source_sizes()
        small = {p for p, (w, h) in sizes.items() if min(w, h) < 427}
        wide = {p for p, (w, h) in sizes.items() if max(w, h) / min(w, h) > 1.5}
        self.assertTrue(0 < len(small) < len(sizes) and 0 < len(wide) < len(sizes))
        s = self.build_with("size", "--min-size", "427")
        self.assertEqual({x["source"].decode() for x in s.samples}, set(sizes) - small)
        self.assertEqual(s.report["dropped_by_reason"], {"image_too_small": len(small)})
        s = self.build_with("aspect", "--max-aspect", "1.5")
        self.assertEqual({x["source"].decode() for x in s.samples}, set(sizes) - wide)
        self.assertEqual(s.report["dropped_by_reason"], {"aspect_ratio_too_large": len(wide)})

    def test_min_tokens_and_drop_long_captions(self):
        tok = u.Tokenizer(u.ALBERT)
        given = u.read_manifest_jsonl(MANIFEST)
        lengths = {p: [len(tok.sp.encode(c.decode().lower())) for c in caps]
                   for p, caps in given.items()}
        short = sum(1 for ls in lengths.values() for n in ls if n < 10)
        long_ = sum(1 for ls in lengths.values() for n in ls if n > 12)
        self.assertTrue(short > 0 and long_ > 0)
        s = self.build_with("min", "--min-tokens", "10")
        self.assertEqual(s.report["dropped_captions_by_reason"], {"too_few_tokens": short})
        self.assertTrue(all(len(t) >= 10 for x in s.samples for t in x["tokens"]))
        gone = [p for p, ls in lengths.items() if all(n < 10 for n in ls)]
        self.assertEqual(s.report["dropped_by_reason"].get("too_few_tokens", 0), len(gone))
        s = self.build_with("long", "--max-tokens", "12", "--drop-long-captions")
        self.assertEqual(s.report["dropped_captions_by_reason"], {"caption_too_long": long_})
        self.assertEqual(s.report["truncated_captions"], 0)
        kept = sum(1 for ls in lengths.values() for n in ls if n <= 12)
        self.assertEqual(sum(len(x["captions"]) for x in s.samples), kept)

    def test_min_score(self):
        rows = manifest_rows()
        images = list(dict.fromkeys(r["image"] for r in rows))
        score = {p: (i % 10) / 10 for i, p in enumerate(images)}
        with open(self.out("scored.jsonl"), "w") as f:
            for r in rows:
                r = dict(r, image=os.path.join(COCO, r["image"]))
                if images.index(r["image"][len(COCO) + 1:]) != 7:  # sample 7: no score
                    r["clip"] = score[r["image"][len(COCO) + 1:]]
                f.write(json.dumps(r) + "\n")
        out = self.out("score")
        u.build(self.out("scored.jsonl"), out, "--lowercase", "--min-score", "clip=0.5")
        s = u.ShardSet(out)
        want = [p for i, p in enumerate(images) if i != 7 and score[p] >= 0.5]
        self.assertEqual([x["source"].decode() for x in s.samples],
                         [os.path.join(COCO, p) for p in want])
        below = sum(1 for i, p in enumerate(images) if i != 7 and score[p] < 0.5)
        self.assertEqual(s.report["dropped_by_reason"],
                         {"score_below_min": below, "score_missing": 1})


class Dedup(Base):
    """12 distinct coco-cc photos plus copies: a byte copy, a PNG of the decoded photo,
    re-encodes at JPEG q95/75/50/30, crops of 2% and 5% a side re-encoded at q90, and one
    re-encode placed before its original (the first in input order is kept)."""

    def make_input(self):
        photos = sorted(os.listdir(os.path.join(COCO, "images")))[:12]
        src = [os.path.join(COCO, "images", p) for p in photos]
        d = self.out("dups")
        os.makedirs(d)
        entries = []  # (file, is_duplicate_of or None, kind)

        def save(name, im, **kw):
            path = os.path.join(d, name)
            im.save(path, **kw)
            return path

        first = save("early_q75.jpg", Image.open(src[4]).convert("RGB"), quality=75)
        entries.append((first, None, "original"))
        for i, p in enumerate(src):
            entries.append((p, first if i == 4 else None, "near" if i == 4 else "original"))
        shutil.copy(src[0], os.path.join(d, "copy0.jpg"))
        entries.append((os.path.join(d, "copy0.jpg"), src[0], "exact"))
        entries.append((save("png3.png", Image.open(src[3]).convert("RGB")), src[3], "exact"))
        for q in (95, 75, 50, 30):
            entries.append((save("q%d.jpg" % q, Image.open(src[1]).convert("RGB"), quality=q),
                            src[1], "near"))
        # pHash distances of these crops to the original: 6 (2% a side), 14 (5% a side).
        for frac, kind in ((0.02, "near"), (0.05, "near_wide")):
            im = Image.open(src[2]).convert("RGB")
            w, h = im.size
            dx, dy = int(w * frac), int(h * frac)
            entries.append((save("crop%d.jpg" % int(frac * 100), im.crop((dx, dy, w - dx, h - dy)),
                                 quality=90), src[2], kind))
        with open(self.out("dups.jsonl"), "w") as f:
            for path, _, _ in entries:
                f.write(json.dumps({"image": path, "text": "a photo"}) + "\n")
        return entries

    def kept(self, out):
        return [x["source"].decode() for x in u.ShardSet(out).samples]

    def test_exact_and_near(self):
        entries = self.make_input()
        manifest = self.out("dups.jsonl")
        u.build(manifest, self.out("off"), "--lowercase")
        self.assertEqual(len(self.kept(self.out("off"))), len(entries))

        u.build(manifest, self.out("exact"), "--lowercase", "--dedup", "exact")
        exact = [p for p, _, kind in entries if kind == "exact"]
        self.assertEqual(self.kept(self.out("exact")),
                         [p for p, _, _ in entries if p not in exact])
        s = u.ShardSet(self.out("exact"))
        self.assertEqual(s.report["dropped_by_reason"], {"duplicate_exact": len(exact)})

        near = sum(1 for e in entries if e[2] == "near")
        for threads in (1, 2):
            out = self.out("near%d" % threads)
            u.build(manifest, out, "--lowercase", "--dedup", "near", threads=threads)
            self.assertEqual(self.kept(out),
                             [p for p, of, kind in entries if of is None or kind == "near_wide"])
            s = u.ShardSet(out)
            self.assertEqual(s.report["dropped_by_reason"],
                             {"duplicate_exact": len(exact), "duplicate_near": near})
        # A wider threshold also takes the 5% crop, and still no distinct coco-cc photo (their
        # closest pair is 20 bits apart).
        out = self.out("near14")
        u.build(manifest, out, "--dedup", "near", "--dedup-threshold", "14")
        self.assertEqual(self.kept(out), [p for p, of, _ in entries if of is None])
        u.build(COCO, self.out("coco14"), "--dedup", "near", "--dedup-threshold", "14")
        self.assertEqual(len(u.ShardSet(self.out("coco14")).samples), 51)
        with open(os.path.join(self.out("near1"), "report.json")) as a, \
                open(os.path.join(self.out("near2"), "report.json")) as b:
            ra, rb = json.load(a), json.load(b)
        self.assertEqual(ra["dropped"], rb["dropped"])  # the same decisions at any thread count


class StatsAndPreview(Base):
    def test_stats_agree_with_the_shards(self):
        out = self.out("s")
        u.build(COCO, out, "--lowercase")
        run = u.mmpack("stats", out, "--json")
        self.assertEqual(run.rc, 0, str(run))
        st = json.loads(run.stdout)["stats"]
        s = u.ShardSet(out)
        lengths = [len(t) for x in s.samples for t in x["tokens"]]
        chars = [len(c.decode()) for x in s.samples for c in x["captions"]]
        self.assertEqual(st["samples"], len(s.samples))
        self.assertEqual(st["captions"], len(lengths))
        self.assertEqual(st["tokens"], sum(lengths))
        self.assertAlmostEqual(st["caption_tokens"]["mean"], sum(lengths) / len(lengths), places=3)
        self.assertEqual(st["caption_tokens"]["max"], max(lengths))
        self.assertEqual(sum(b["count"] for b in st["caption_tokens"]["histogram"]), len(lengths))
        self.assertEqual(st["caption_chars"]["min"], min(chars))
        self.assertEqual(st["caption_chars"]["max"], max(chars))
        per = [len(x["captions"]) for x in s.samples]
        self.assertEqual(st["captions_per_image"]["max"], max(per))
        shorter = [min(x["original_size"]) for x in s.samples]
        self.assertEqual(st["source_shorter_side"]["min"], min(shorter))
        self.assertAlmostEqual(st["unk_rate"], s.index["tokenizer"]["unk_rate"], places=12)
        text = u.mmpack("stats", out)
        self.assertEqual(text.rc, 0, str(text))
        for line in ("caption tokens: min %d" % min(lengths), "captions per image:",
                     "source aspect (long/short):", "dropped samples: none"):
            self.assertIn(line, text.stdout)

    def find(self, sheet, img):
        """Top-left corners where `img` appears pixel for pixel in `sheet`."""
        h, w, _ = img.shape
        py, px = h // 2, w // 3
        ys, xs = np.where((sheet == img[py, px]).all(axis=2))
        found = []
        for y, x in zip(ys - py, xs - px):
            if 0 <= y <= sheet.shape[0] - h and 0 <= x <= sheet.shape[1] - w:
                if np.array_equal(sheet[y:y + h, x:x + w], img):
                    found.append((int(x), int(y)))
        return found

    def test_preview_sheet_holds_the_sample_images(self):
        out = self.out("p")
        u.build(COCO, out, "--lowercase")
        s = u.ShardSet(out)
        sheet_path = self.out("sheet.png")
        run = u.mmpack("preview", out, "-o", sheet_path, "-n", "6", "--seed", "3")
        self.assertEqual(run.rc, 0, str(run))
        lines = [l.split() for l in run.stdout.splitlines() if l.startswith("sample ")]
        self.assertEqual(len(lines), 6)
        sheet = np.asarray(Image.open(sheet_path).convert("RGB"))
        indices = [int(l[1]) for l in lines]
        self.assertEqual(len(set(indices)), 6)
        for l in lines:
            smp = s.samples[int(l[1])]
            self.assertEqual(l[3], smp["key"].decode())
            x, y = (int(v) for v in l[5].split(","))
            self.assertEqual(self.find(sheet, s.image(smp)), [(x, y)])
            # Text under the image: dark pixels in the label band.
            band = sheet[y + 224 + 4:y + 224 + 4 + 26, x:x + 224]
            self.assertGreater((band.min(axis=2) < 100).sum(), 50)
        again = self.out("sheet2.png")
        u.mmpack("preview", out, "-o", again, "-n", "6", "--seed", "3")
        with open(sheet_path, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())
        first = u.mmpack("preview", out, "-o", self.out("first.png"), "-n", "3", "--first")
        self.assertEqual([int(l.split()[1]) for l in first.stdout.splitlines()
                          if l.startswith("sample ")], [0, 1, 2])


if __name__ == "__main__":
    unittest.main(verbosity=2)
