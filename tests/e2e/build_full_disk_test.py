#!/usr/bin/python3
"""End-to-end: a full disk is an error, not a crash.

The disk is real: a small tmpfs, mounted in a private mount namespace of an unprivileged user
namespace (`unshare -r -m`, no root needed), so writes fail with ENOSPC exactly as on a full
disk, through the same write() calls of libhdf5's sec2 driver, and nothing outside the test
sees the mount. (RLIMIT_FSIZE was the other candidate: it fails writes with EFBIG and raises
SIGXFSZ, a per-file limit rather than a full file system, so it would not show what a full
disk does to the files written beside a shard.)

In each run the tmpfs first receives a small valid set (two coco-cc photos), then a larger
build of twenty photos with --overwrite and 4 samples a shard, which cannot fit. The tmpfs's
size is swept so that the space runs out at different points: the tokenizer copy, an image
chunk, a shard's tables while it closes, and the index. Before the fix, running out while a
shard closed killed mmpack with SIGSEGV inside libhdf5 (an object whose close failed was
closed again by libhdf5's exit handler), and HDF5's error stack was printed over stderr.

Checked for every size: mmpack exits 1 (no signal) with one `mmpack build:` line that names
the file it could not write and says why; the old set is still there, byte for byte, and
`mmpack verify` accepts it; nothing unfinished is left in the file system (no .tmp file):
the staging folder is gone, or, when shards were finished before the space ran out, holds just
those shards, their checkpoints and the tokenizer, for --resume.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc", "images")
# tmpfs sizes in KiB: the old set and the tokenizer take about 1.1 MB, the new set about
# 3.5 MB.
SIZES_KIB = list(range(400, 4000, 120))


def inner(mnt, size_kib, old_raw, new_raw):
    """Runs inside the namespace: mounts the tmpfs, builds the old set, then the new one;
    prints one JSON object with what happened."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dk" % size_kib, "tmpfs", mnt],
                   check=True)
    out = os.path.join(mnt, "out")
    common = ["--threads", "2", "--tokenizer", u.ALBERT, "--lowercase", "-q",
              "--compression-level", "1"]
    old = subprocess.run([u.MMPACK, "build", old_raw, "-o", out] + common,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    result = {"old_rc": old.returncode, "old_stderr": old.stderr.decode("utf-8", "replace")}
    if old.returncode != 0:
        print(json.dumps(result))
        return

    def snapshot():
        files = {}
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name), "rb") as f:
                files[name] = hashlib.sha256(f.read()).hexdigest()
        return files

    result["before"] = snapshot()
    new = subprocess.run([u.MMPACK, "build", new_raw, "-o", out, "--overwrite",
                          "--samples-per-shard", "4"] + common,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    result["new_rc"] = new.returncode
    result["new_stderr"] = new.stderr.decode("utf-8", "replace")
    result["after"] = snapshot()
    result["left"] = sorted(os.listdir(mnt))
    partial = out + ".mmpack-partial"
    if os.path.isdir(partial):
        result["partial"] = sorted(os.listdir(partial))
    verify = subprocess.run([u.MMPACK, "verify", out], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    result["verify_rc"] = verify.returncode
    result["verify"] = verify.stdout.decode("utf-8", "replace")[-2000:]
    print(json.dumps(result))


def have_user_namespaces():
    try:
        return subprocess.run(["unshare", "-r", "-m", "true"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class FullDisk(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not have_user_namespaces():
            raise unittest.SkipTest("`unshare -r -m` is not permitted here: no private tmpfs")
        photos = sorted(os.listdir(COCO))[:20]
        cls.old_raw = cls.raw("old", photos[:2], 1)
        # Captions of 40 KB: a shard's tables, written while it closes, are then as large as
        # its image chunks, so the sweep runs out of space in both.
        cls.new_raw = cls.raw("new", photos, 8000)
        cls.mnt = os.path.join(cls.tmp, "mnt")
        os.makedirs(cls.mnt)

    @classmethod
    def raw(cls, name, photos, words):
        raw = os.path.join(cls.tmp, name)
        os.makedirs(raw)
        for p in photos:
            shutil.copy(os.path.join(COCO, p), raw)
            with open(os.path.join(raw, p[:-4] + ".txt"), "w") as f:
                f.write("a photo named " + p + " word" * words)
        return raw

    def run_at(self, size_kib):
        proc = subprocess.run(
            ["unshare", "-r", "-m", sys.executable, os.path.abspath(__file__), "--inner",
             self.mnt, str(size_kib), self.old_raw, self.new_raw],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr.decode("utf-8", "replace"))
        return json.loads(proc.stdout.decode("utf-8").strip().splitlines()[-1])

    def test_every_point_of_failure_is_an_error_and_keeps_the_old_set(self):
        failures_seen = set()
        for size in SIZES_KIB:
            with self.subTest(tmpfs_kib=size):
                r = self.run_at(size)
                if r["old_rc"] != 0:
                    continue  # the old set itself does not fit: too small to say anything
                self.assertIn(r["new_rc"], (0, 1), "killed by a signal? " + r["new_stderr"])
                if r["new_rc"] == 0:
                    continue  # the new set fitted
                lines = r["new_stderr"].strip().splitlines()
                self.assertEqual(len(lines), 1, r["new_stderr"])
                self.assertTrue(lines[0].startswith("mmpack build: "), lines[0])
                self.assertIn("No space left on device", lines[0])
                self.assertRegex(lines[0], r"(cannot write|creating) /\S+")
                if "H5Dwrite_chunk" in lines[0]:
                    failures_seen.add("image chunk")
                elif ".h5.tmp" in lines[0]:
                    failures_seen.add("shard close")
                else:
                    failures_seen.add("other")
                self.assertEqual(r["after"], r["before"], "the old set changed")
                self.assertEqual(r["verify_rc"], 0, r["verify"])
                # Shards finished before the disk filled are kept for --resume, and the line
                # says so; nothing unfinished is left.
                kept = "finished shard(s)" in lines[0]
                left = ["out"] + (["out.mmpack-partial"] if kept else [])
                if "out.mmpack-lock" in r["left"]:
                    left.append("out.mmpack-lock")
                self.assertEqual(r["left"], sorted(left))
                if kept:
                    failures_seen.add("kept finished shards")
                    self.assertIn("--resume", lines[0])
                    for name in r["partial"]:
                        self.assertTrue(name in (".resume", "tokenizer.model") or
                                        re.fullmatch(r"shard-\d{6}\.h5", name), name)
                    self.assertIn("shard-000000.h5", r["partial"])
        # The sweep ran out of space while image chunks were written and while a shard closed.
        print("full disk: failed at", sorted(failures_seen), file=sys.stderr)
        self.assertIn("image chunk", failures_seen)
        self.assertIn("shard close", failures_seen)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        inner(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        unittest.main()
