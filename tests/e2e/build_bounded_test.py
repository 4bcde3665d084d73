#!/usr/bin/python3
"""End-to-end: one sample never ends `mmpack build`, and no sample costs unbounded memory
(issue 9 item 6).

Generated hostile samples beside real coco-cc photos, in one JSONL manifest: a 513-byte
1x100000 PNG turned by EXIF 6, a 3,963-byte 1x1,000,000 PNG, a 15 KB 3x60000 JPEG turned by
EXIF 6, a 1x10,000,000 PNG whose rows ramp from black to white, a 40 MB and a 10 MB caption.
Before the fix the thin images aborted the build with std::bad_alloc or took 6 to 8 GB (the
fit resized them to 224 x 224,000,000 and more), the 1x10M PNG came out stretched (int
overflow in the fit), and the long captions ended the build or took 2.4 GB in the tokenizer.

Checked: the build exits 0; the thin images are written, cropped to their middle; the long
captions are dropped as caption_too_large (the limit is --max-caption-bytes); every good photo
is written; the set verifies; and the build's peak resident memory (getrusage of a wrapper's
children: a memory bound, not a timing) stays within a fixed margin of a build of the good
photos alone, measured in the same run.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import unittest

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc", "images")

# A build that takes longer than this, or more address space, fails the test instead of
# stalling ctest or exhausting a shared machine (before the fix: 72 s and 7.9 GB).
QUICK_S = 120
ADDRESS_SPACE = 6 << 30
# The most resident memory the hostile samples may add to a build of the good photos alone.
# The 40 MB caption line is read whole by the manifest reader (a few copies of it); every
# image here decodes to at most 30 MB.
MARGIN_BYTES = 400 << 20

# Runs argv[1:] with an address-space limit and prints the child's peak RSS in KiB
# (RUSAGE_CHILDREN of a process that has no other child) after its exit code.
PEAK_RSS = r"""
import resource, subprocess, sys
limit = int(sys.argv[1])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.run(sys.argv[2:], preexec_fn=cap, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
sys.stdout.buffer.write(proc.stderr[-4000:])
print("\nRC %d PEAK_KIB %d" % (proc.returncode,
                                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
"""


def build_with_peak(raw, out, *extra):
    """`mmpack build RAW -o OUT ...` under QUICK_S and ADDRESS_SPACE; (rc, peak bytes, log)."""
    args = [u.MMPACK, "build", raw, "-o", out, "--threads", "2", "--tokenizer", u.ALBERT,
            "--lowercase", "--compression-level", "1"] + list(extra)
    try:
        proc = subprocess.run(["/usr/bin/python3", "-c", PEAK_RSS, str(ADDRESS_SPACE)] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=QUICK_S)
    except subprocess.TimeoutExpired:
        raise AssertionError("mmpack build did not finish in %d s" % QUICK_S)
    log = proc.stdout.decode("utf-8", "replace")
    last = log.rstrip().splitlines()[-1].split()
    return int(last[1]), int(last[3]) * 1024, log


def exif(orientation):
    e = Image.Exif()
    e[0x0112] = orientation
    return e.tobytes()


class HostileSizes(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.photos = sorted(os.listdir(COCO))[:4]
        cls.good_raw = cls.make_raw("good", hostile=False)
        cls.raw = cls.make_raw("hostile", hostile=True)
        cls.base_rc, cls.base_peak, cls.base_log = build_with_peak(
            os.path.join(cls.good_raw, "manifest.jsonl"), os.path.join(cls.tmp, "good_out"))
        cls.out = os.path.join(cls.tmp, "out")
        cls.rc, cls.peak, cls.log = build_with_peak(os.path.join(cls.raw, "manifest.jsonl"),
                                                    cls.out)
        print("peak RSS: good photos alone %.0f MiB, with the hostile samples %.0f MiB" %
              (cls.base_peak / 2**20, cls.peak / 2**20), file=sys.stderr)

    @classmethod
    def make_raw(cls, name, hostile):
        raw = os.path.join(cls.tmp, name)
        os.makedirs(raw)
        rows = []
        for p in cls.photos:
            shutil.copy(os.path.join(COCO, p), raw)
            rows.append({"image": p, "caption": "a photo named " + p})
        if hostile:
            Image.new("RGB", (1, 100000), (200, 10, 10)).save(
                os.path.join(raw, "thin_rot.png"), exif=exif(6))
            Image.new("RGB", (1, 1000000), (10, 200, 10)).save(os.path.join(raw, "tall1m.png"))
            Image.new("RGB", (3, 60000), (10, 10, 200)).save(
                os.path.join(raw, "rot3x60000.jpg"), exif=exif(6), quality=90)
            n = 10000000
            ramp = (np.arange(n, dtype=np.int64) * 256 // n).astype(np.uint8).reshape(n, 1)
            Image.fromarray(ramp).save(os.path.join(raw, "tall10m.png"))
            for f in ("thin_rot.png", "tall1m.png", "rot3x60000.jpg", "tall10m.png"):
                rows.append({"image": f, "caption": "a thin image " + f})
            shutil.copy(os.path.join(COCO, cls.photos[0]), os.path.join(raw, "long40.jpg"))
            shutil.copy(os.path.join(COCO, cls.photos[1]), os.path.join(raw, "long10.jpg"))
            rows.append({"image": "long40.jpg", "caption": "word " * (8 << 20)})  # 40 MiB
            rows.append({"image": "long10.jpg", "caption": "word " * (2 << 20)})  # 10 MiB
        with open(os.path.join(raw, "manifest.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        return raw

    def report(self):
        with open(os.path.join(self.out, "report.json")) as f:
            return json.load(f)

    def test_build_succeeds(self):
        self.assertEqual(self.base_rc, 0, self.base_log)
        self.assertEqual(self.rc, 0, self.log)

    def test_thin_images_are_written_and_long_captions_dropped(self):
        self.assertEqual(self.rc, 0, self.log)
        s = u.ShardSet(self.out)
        names = set(s.by_basename())
        for f in ["thin_rot.png", "tall1m.png", "rot3x60000.jpg", "tall10m.png"] + self.photos:
            self.assertIn(f, names)
        dropped = {os.path.basename(d["source"]): d["reason"] for d in self.report()["dropped"]}
        self.assertEqual(dropped, {"long40.jpg": "caption_too_large",
                                   "long10.jpg": "caption_too_large"})

    def test_thin_images_are_cropped_to_their_middle(self):
        self.assertEqual(self.rc, 0, self.log)
        s = u.ShardSet(self.out)
        by_name = s.by_basename()
        ramp = s.image(by_name["tall10m.png"]).astype(int)
        # A stretched ramp runs from 0 to 255 down the image; the middle of it is 128.
        self.assertGreaterEqual(ramp.min(), 126)
        self.assertLessEqual(ramp.max(), 130)
        for name, colour in [("thin_rot.png", (200, 10, 10)), ("tall1m.png", (10, 200, 10)),
                             ("rot3x60000.jpg", (10, 10, 200))]:
            img = s.image(by_name[name]).astype(int)
            self.assertLess(np.abs(img - np.array(colour)).max(), 12, name)

    def test_the_set_verifies(self):
        self.assertEqual(self.rc, 0, self.log)
        run = u.mmpack("verify", self.out)
        self.assertEqual(run.rc, 0, str(run))

    def test_peak_memory_stays_within_a_margin_of_the_good_build(self):
        self.assertEqual(self.base_rc, 0, self.base_log)
        self.assertEqual(self.rc, 0, self.log)
        self.assertLess(self.peak, self.base_peak + MARGIN_BYTES,
                        "peak RSS %d MiB against %d MiB for the good photos alone" %
                        (self.peak >> 20, self.base_peak >> 20))

    def test_max_caption_bytes_is_an_option(self):
        out = os.path.join(self.tmp, "small_limit")
        rc, _, log = build_with_peak(os.path.join(self.good_raw, "manifest.jsonl"), out,
                                     "--max-caption-bytes", "20")
        # "a photo named 000000xxxxxx.jpg" is 31 bytes: every sample goes.
        self.assertNotEqual(rc, 0, log)
        self.assertIn("caption_too_large", log)


def build_capped(raw_manifest, out, address_space):
    """`mmpack build` at 2048 px, one thread, under an address-space limit; a u.Run."""
    args = [u.MMPACK, "build", raw_manifest, "-o", out, "--overwrite", "--threads", "1",
            "--image-size", "2048", "--tokenizer", u.ALBERT, "--lowercase", "-q"]

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, preexec_fn=cap, timeout=QUICK_S)
    return u.Run(args[1:], proc)


class OutOfMemory(u.TempDirTest):
    """A sample whose decode cannot get its memory is dropped as out_of_memory; the build goes
    on. The memory is really refused: RLIMIT_AS set just above what a build of the good photos
    needs (found by bisection in the same run), so that a 65500x1365 JPEG (1.4 MB; 268 MB
    decoded: --image-size 2048 enlarges it, so it is decoded at full size) cannot be decoded.
    Before, the std::bad_alloc ended the whole build ("mmpack: std::bad_alloc")."""

    def test_a_sample_that_cannot_get_its_memory_is_dropped(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        good = sorted(os.listdir(COCO))[:2]
        rows = []
        for p in good:
            shutil.copy(os.path.join(COCO, p), raw)
            rows.append({"image": p, "caption": "a photo named " + p})
        Image.new("RGB", (65500, 1365), (120, 30, 200)).save(os.path.join(raw, "huge.jpg"),
                                                             quality=90)
        good_manifest = os.path.join(raw, "good.jsonl")
        all_manifest = os.path.join(raw, "all.jsonl")
        with open(good_manifest, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        with open(all_manifest, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in [rows[0], {"image": "huge.jpg",
                                                                  "caption": "huge"}, rows[1]])
        out = os.path.join(self.tmp, "out")
        # The least address space (to 8 MiB) in which the good photos build.
        lo, hi = 32 << 20, 2 << 30
        self.assertEqual(build_capped(good_manifest, out, hi).rc, 0)
        while hi - lo > 8 << 20:
            mid = (lo + hi) // 2
            if build_capped(good_manifest, out, mid).rc == 0:
                hi = mid
            else:
                lo = mid
        run = build_capped(all_manifest, out, hi + (100 << 20))
        self.assertEqual(run.rc, 0, "%s (good photos alone: %d MiB)" % (run, hi >> 20))
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        self.assertEqual([(os.path.basename(d["source"]), d["reason"]) for d in report["dropped"]],
                         [("huge.jpg", "out_of_memory")])
        self.assertEqual(report["samples_written"], 2)


if __name__ == "__main__":
    unittest.main()
