#!/usr/bin/python3
"""End-to-end: `mmpack build` as a command: failures (one clear line, non-zero exit, nothing
half-written), --overwrite, progress output, determinism across --threads, resize modes and
sizes, --compression none, and `mmpack verify` catching a damaged set."""

import filecmp
import json
import os
import pty
import subprocess
import shutil
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc", "captions.jsonl")
SKIMAGE = os.path.join(u.DATA_DIR, "skimage-micro", "captions.jsonl")


def output_lines(run):
    return [l for l in (run.stdout + "\n" + run.stderr).splitlines() if l.strip()]


class Failures(u.TempDirTest):
    """Bad invocations fail at once with one clear line and leave nothing behind."""

    def assertFailsCleanly(self, run, *words):
        self.assertNotEqual(run.rc, 0, str(run))
        lines = output_lines(run)
        self.assertEqual(len(lines), 1, "want one clear line:\n" + str(run))
        self.assertTrue(lines[0].startswith("mmpack build"), lines[0])
        for w in words:
            self.assertIn(w, lines[0])

    def assertNoLeftovers(self, out):
        """Nothing named after OUT (a staging or temporary folder) is left beside it."""
        parent, name = os.path.split(out)
        left = [f for f in os.listdir(parent) if f.startswith(name) and f != name]
        self.assertEqual(left, [], "left behind beside OUT")

    def test_missing_raw(self):
        out = os.path.join(self.tmp, "out_missing")
        raw = os.path.join(self.tmp, "no_such_input")
        run = u.mmpack("build", raw, "-o", out, "--tokenizer", u.ALBERT, "--lowercase")
        self.assertFailsCleanly(run, "no_such_input")
        self.assertFalse(os.path.exists(out))
        self.assertNoLeftovers(out)

    def test_empty_raw_folder(self):
        raw = os.path.join(self.tmp, "empty_dir")
        os.makedirs(raw)
        out = os.path.join(self.tmp, "out_empty_dir")
        self.assertFailsCleanly(u.mmpack("build", raw, "-o", out, "--tokenizer", u.ALBERT, "--lowercase"))
        self.assertFalse(os.path.exists(out))
        self.assertNoLeftovers(out)

    def test_empty_manifest(self):
        raw = os.path.join(self.tmp, "empty.jsonl")
        open(raw, "w").close()
        out = os.path.join(self.tmp, "out_empty_manifest")
        self.assertFailsCleanly(u.mmpack("build", raw, "-o", out, "--tokenizer", u.ALBERT, "--lowercase"))
        self.assertFalse(os.path.exists(out))

    def test_a_url_as_output_is_refused_and_writes_nothing(self):
        """-o s3://bkt/set used to build a local folder "s3:/bkt/set" and exit 0 (issue 23
        item 2); show and preview wrote "s3:/bkt/x.png" the same way."""
        cwd = os.path.join(self.tmp, "url_cwd")
        os.makedirs(cwd)
        for url in ("s3://bkt/set", "https://example.com/set", "file:///tmp/set"):
            run = u.mmpack("build", SKIMAGE, "-o", url, "--tokenizer", u.ALBERT, "--lowercase",
                           cwd=cwd)
            self.assertFailsCleanly(run, url, "is a URL", "mmpack upload")
        out = os.path.join(self.tmp, "url_set")
        u.build(SKIMAGE, out, "--image-size", "32")
        for command in (["show", out, "0"], ["preview", out]):
            run = u.mmpack(*command, "-o", "s3://bkt/x.png", cwd=cwd)
            self.assertNotEqual(run.rc, 0, str(run))
            self.assertIn("is a URL", run.stderr)
            self.assertEqual(len(output_lines(run)), 1, str(run))
        self.assertEqual(os.listdir(cwd), [], "a URL became a local path")

    def test_a_max_aspect_that_is_no_ratio_is_refused(self):
        """--max-aspect nan was accepted, and compares false with every aspect: no filter at all;
        below 1 every image would be dropped."""
        for value in ("nan", "0.5"):  # (CLI11 refuses inf itself)
            out = os.path.join(self.tmp, "out_aspect")
            run = u.mmpack("build", SKIMAGE, "-o", out, "--tokenizer", u.ALBERT, "--lowercase",
                           "--max-aspect", value)
            self.assertFailsCleanly(run, "--max-aspect")
            self.assertFalse(os.path.exists(out))
            self.assertNoLeftovers(out)

    def test_unwritable_output(self):
        # Tests may run as root, so a chmod'ed folder would still be writable: put OUT under
        # a regular file instead.
        blocker = os.path.join(self.tmp, "a_file")
        with open(blocker, "w") as f:
            f.write("x")
        out = os.path.join(blocker, "sub")
        self.assertFailsCleanly(u.mmpack("build", SKIMAGE, "-o", out, "--tokenizer", u.ALBERT, "--lowercase"))
        self.assertEqual(open(blocker).read(), "x")

    def test_existing_output_needs_overwrite(self):
        out = os.path.join(self.tmp, "out_existing")
        u.build(SKIMAGE, out, "--samples-per-shard", "2")
        before = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        self.assertEqual(len([f for f in before if f.endswith(".h5")]), 3)
        run = u.mmpack("build", COCO, "-o", out, "--tokenizer", u.ALBERT, "--lowercase")
        self.assertFailsCleanly(run, "--overwrite")
        after = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        self.assertEqual(before, after, "a refused build changed OUT")
        # --overwrite replaces the whole set: no shard of the old one is left
        u.build(COCO, out, "--overwrite")
        self.assertEqual(sorted(f for f in os.listdir(out) if f.endswith(".h5")),
                         ["shard-000000.h5"])
        self.assertEqual(u.ShardSet(out).index["totals"]["samples"], 51)
        self.assertEqual(u.mmpack("verify", out).rc, 0)

    def test_no_usable_sample(self):
        raw = os.path.join(self.tmp, "all_bad.jsonl")
        with open(raw, "w") as f:
            f.write('{"image": "missing.jpg", "text": "a caption"}\n')
        out = os.path.join(self.tmp, "out_all_bad")
        self.assertFailsCleanly(u.mmpack("build", raw, "-o", out, "--tokenizer", u.ALBERT, "--lowercase"))
        self.assertFalse(os.path.exists(out))
        self.assertNoLeftovers(out)

    def test_failed_overwrite_keeps_the_old_set(self):
        out = os.path.join(self.tmp, "out_keep")
        u.build(SKIMAGE, out)
        before = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        raw = os.path.join(self.tmp, "all_bad2.jsonl")
        with open(raw, "w") as f:
            f.write('{"image": "missing.jpg", "text": "a caption"}\n')
        self.assertFailsCleanly(u.mmpack("build", raw, "-o", out, "--overwrite",
                                         "--tokenizer", u.ALBERT, "--lowercase"))
        after = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
        self.assertEqual(before, after, "a failed --overwrite build damaged the old set")
        self.assertNoLeftovers(out)

    def test_bad_option_values(self):
        out = os.path.join(self.tmp, "out_bad_opts")
        for opts in (["--image-size", "0"], ["--image-size", "12x"], ["--shard-size", "lots"],
                     ["--resize-mode", "zoom"], ["--tokenizer", os.path.join(self.tmp, "nope.model")]):
            run = u.mmpack("build", SKIMAGE, "-o", out, *opts)
            self.assertNotEqual(run.rc, 0, str(run))
            self.assertFalse(os.path.exists(out), opts)


class OutputPaths(u.TempDirTest):
    """OUT is normalised ("out/" is "out") and --overwrite deletes only an mmpack shard set."""

    def run_in(self, cwd, *args):
        proc = subprocess.run([u.MMPACK] + [str(a) for a in args], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=u.TIMEOUT_S)
        return u.Run([str(a) for a in args], proc)

    def canary_dir(self, name):
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        with open(os.path.join(d, "canary.txt"), "w") as f:
            f.write("alive")
        return d

    def assertCanary(self, d):
        with open(os.path.join(d, "canary.txt")) as f:
            self.assertEqual(f.read(), "alive")

    def test_current_directory_is_refused(self):
        cwd = self.canary_dir("cwd_dot")
        for out in (".", "./", os.path.join("..", "cwd_dot"), ".."):
            for extra in ([], ["--overwrite"]):
                run = self.run_in(cwd, "build", SKIMAGE, "-o", out, "--tokenizer", u.ALBERT, "--lowercase",
                                  *extra)
                self.assertNotEqual(run.rc, 0, str(run))
                lines = output_lines(run)
                self.assertEqual(len(lines), 1, str(run))
                self.assertCanary(cwd)
                self.assertEqual(sorted(os.listdir(cwd)), ["canary.txt"])
        run = self.run_in(cwd, "build", SKIMAGE, "-o", ".", "--overwrite", "--tokenizer",
                          u.ALBERT)
        self.assertIn("current directory", run.stderr)

    def test_root_and_input_parent_are_refused(self):
        run = u.mmpack("build", SKIMAGE, "-o", "/", "--overwrite", "--tokenizer", u.ALBERT, "--lowercase")
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("root", run.stderr)
        # OUT holding RAW (a copy, never the shared data) is refused, with and without "/"
        raw_dir = os.path.join(self.tmp, "raw_copy")
        shutil.copytree(os.path.dirname(SKIMAGE), raw_dir)
        raw = os.path.join(raw_dir, "captions.jsonl")
        for out in (raw_dir, raw_dir + "/", os.path.join(raw_dir, "images", "..")):
            run = u.mmpack("build", raw, "-o", out, "--overwrite", "--tokenizer", u.ALBERT, "--lowercase")
            self.assertNotEqual(run.rc, 0, str(run))
            self.assertIn("lies inside output", run.stderr)
            self.assertTrue(os.path.exists(raw))

    def test_trailing_slash_gives_the_same_set(self):
        a = os.path.join(self.tmp, "slash_a")
        b = os.path.join(self.tmp, "slash_b")
        u.build(SKIMAGE, a, "--samples-per-shard", "2")
        u.build(SKIMAGE, b + "/", "--samples-per-shard", "2")
        names = sorted(os.listdir(a))
        self.assertEqual(names, sorted(os.listdir(b)))
        for f in names:
            if f == "report.json":  # names the input as given
                continue
            self.assertTrue(filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False), f)
        self.assertEqual(u.mmpack("verify", b).rc, 0)
        self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("slash_b")],
                         ["slash_b"])
        # --overwrite through "OUT/" replaces the set (it used to delete it and then fail)
        u.build(COCO, b + "/", "--overwrite")
        self.assertEqual(u.ShardSet(b).index["totals"]["samples"], 51)
        self.assertEqual(u.mmpack("verify", b).rc, 0)
        self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("slash_b")],
                         ["slash_b"])

    def test_overwrite_refuses_a_folder_that_is_not_a_shard_set(self):
        d = self.canary_dir("not_a_set")
        for out in (d, d + "/"):
            run = u.mmpack("build", SKIMAGE, "-o", out, "--overwrite", "--tokenizer", u.ALBERT, "--lowercase")
            self.assertNotEqual(run.rc, 0, str(run))
            lines = output_lines(run)
            self.assertEqual(len(lines), 1, str(run))
            self.assertIn("not an mmpack shard set", lines[0])
            self.assertCanary(d)
            self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("not_a_set")],
                             ["not_a_set"])
        # a regular file in OUT's place is not replaced either
        f = os.path.join(self.tmp, "a_plain_file")
        with open(f, "w") as fh:
            fh.write("keep")
        run = u.mmpack("build", SKIMAGE, "-o", f, "--overwrite", "--tokenizer", u.ALBERT, "--lowercase")
        self.assertNotEqual(run.rc, 0, str(run))
        with open(f) as fh:
            self.assertEqual(fh.read(), "keep")

    def test_overwrite_replaces_an_empty_folder_and_a_set(self):
        out = os.path.join(self.tmp, "empty_then_set")
        os.makedirs(out)
        u.build(SKIMAGE, out, "--overwrite", "--samples-per-shard", "2")
        self.assertEqual(u.mmpack("verify", out).rc, 0)
        u.build(COCO, out, "--overwrite")
        self.assertEqual(sorted(f for f in os.listdir(out) if f.endswith(".h5")),
                         ["shard-000000.h5"])
        self.assertEqual(u.mmpack("verify", out).rc, 0)
        self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("empty_then_set")],
                         ["empty_then_set"])


class DuplicateKeys(u.TempDirTest):
    """A set never repeats a key (verify would reject it)."""

    def test_coco_ids_with_the_same_file_build_one_sample_that_verifies(self):
        images = os.path.join(os.path.dirname(SKIMAGE), "images")
        names = sorted(os.listdir(images))[:2]
        raw_dir = os.path.join(self.tmp, "coco_dup")
        os.makedirs(raw_dir)
        for n in names:
            shutil.copy(os.path.join(images, n), raw_dir)
        doc = {"images": [{"id": 10, "file_name": names[0]}, {"id": 11, "file_name": names[1]},
                          {"id": 12, "file_name": names[0]}],
               "annotations": [{"id": 1, "image_id": 10, "caption": "the first caption"},
                               {"id": 2, "image_id": 11, "caption": "another picture"},
                               {"id": 3, "image_id": 12, "caption": "the same picture again"}]}
        raw = os.path.join(raw_dir, "captions.json")
        with open(raw, "w") as f:
            json.dump(doc, f)
        out = os.path.join(self.tmp, "coco_dup_out")
        u.build(raw, out, "--input-format", "coco")
        run = u.mmpack("verify", out)
        self.assertEqual(run.rc, 0, str(run))
        idx = u.ShardSet(out).index
        self.assertEqual(idx["totals"]["samples"], 2)
        self.assertEqual(idx["totals"]["captions"], 3)


class Progress(u.TempDirTest):
    """Not a terminal: plain lines, no carriage returns or escapes; --quiet: the summary only."""

    def test_plain_lines_when_not_a_terminal(self):
        run = u.build(SKIMAGE, os.path.join(self.tmp, "plain"))
        text = run.stdout + run.stderr
        self.assertNotIn("\r", text)
        self.assertNotIn("\x1b", text)
        self.assertGreaterEqual(len(output_lines(run)), 1)

    def run_on_terminal(self, *args):
        """Runs mmpack with stdout and stderr on a pseudo-terminal; returns (rc, text)."""
        master, slave = pty.openpty()
        proc = subprocess.Popen([u.MMPACK] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                                stdout=slave, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        return proc.wait(timeout=u.TIMEOUT_S), b"".join(chunks).decode("utf-8", "replace")

    def test_progress_bar_on_a_terminal(self):
        rc, text = self.run_on_terminal("build", COCO, "-o", os.path.join(self.tmp, "tty"),
                                        "--tokenizer", u.ALBERT, "--lowercase", "--threads", "2")
        self.assertEqual(rc, 0, text)
        self.assertIn("\r", text, "no bar redrawn in place")
        self.assertRegex(text, r"51/51")
        self.assertRegex(text, r"samples/s")
        self.assertIn("ETA", text)

    def test_quiet_on_a_terminal_draws_no_bar(self):
        rc, text = self.run_on_terminal("build", COCO, "-o", os.path.join(self.tmp, "tty_quiet"),
                                        "--tokenizer", u.ALBERT, "--lowercase", "--quiet")
        self.assertEqual(rc, 0, text)
        self.assertNotIn("ETA", text)
        self.assertNotIn("\x1b", text)
        self.assertLessEqual(len([l for l in text.splitlines() if l.strip()]), 3, text)

    def test_quiet_prints_only_the_summary(self):
        loud = u.build(SKIMAGE, os.path.join(self.tmp, "loud"))
        quiet = u.build(SKIMAGE, os.path.join(self.tmp, "quiet"), "--quiet")
        text = quiet.stdout + quiet.stderr
        self.assertNotIn("\r", text)
        self.assertNotIn("\x1b", text)
        self.assertLessEqual(len(output_lines(quiet)), 3, text)
        self.assertLessEqual(len(output_lines(quiet)), len(output_lines(loud)))
        self.assertRegex(text, r"\b6\b", "the summary should give the sample count")


class Determinism(u.TempDirTest):
    """The same input and options give byte-identical shards and index whatever --threads is."""

    def test_threads_1_and_2_give_identical_files(self):
        a, b = os.path.join(self.tmp, "t1"), os.path.join(self.tmp, "t2")
        u.build(COCO, a, "--samples-per-shard", "20", threads=1)
        u.build(COCO, b, "--samples-per-shard", "20", threads=2)
        shards = sorted(f for f in os.listdir(a) if f.endswith(".h5"))
        self.assertEqual(shards, ["shard-000000.h5", "shard-000001.h5", "shard-000002.h5"])
        self.assertEqual(shards, sorted(f for f in os.listdir(b) if f.endswith(".h5")))
        for f in shards + ["index.json", "tokenizer.model"]:
            self.assertTrue(filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False), f)
        idx = u.ShardSet(a).index
        self.assertEqual([s["samples"] for s in idx["shards"]], [20, 20, 11])

    def test_shard_size_closes_shards(self):
        out = os.path.join(self.tmp, "small_shards")
        u.build(COCO, out, "--shard-size", "2MB")
        s = u.ShardSet(out)
        self.assertGreater(len(s.index["shards"]), 1)
        self.assertEqual(s.index["totals"]["samples"], 51)
        # every shard but the last reached the limit; none is far past it (one sample ~ 130 KB)
        for e in s.index["shards"][:-1]:
            self.assertGreaterEqual(e["bytes"] + 200_000, 2_000_000, e)
            self.assertLess(e["bytes"], 2_000_000 + 400_000, e)
        self.assertEqual(u.mmpack("verify", out).rc, 0)


class EnvScript(u.TempDirTest):
    """`eval "$(mmpack env)"` is all a user needs before h5dump / h5py read the zstd chunks."""

    def test_h5dump_and_h5py_after_eval_env(self):
        out = os.path.join(self.tmp, "set")
        u.build(SKIMAGE, out, "--compression", "zstd")
        shard = os.path.join(out, "shard-000000.h5")
        env = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
        script = ('eval "$("$0" env)" && h5dump -d /images -s 0,10,10,0 -c 1,1,2,3 "$1" && '
                  '/usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1]); '
                  'print(\'SUM\', int(f[\'images\'][0].sum()))" "$1"')
        proc = subprocess.run(["bash", "-c", script, u.MMPACK, shard], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        text = proc.stdout.decode() + proc.stderr.decode()
        self.assertEqual(proc.returncode, 0, text)
        s = u.ShardSet(out)
        img = s.image(s.samples[0])
        self.assertIn("SUM %d" % int(img.sum()), text)
        self.assertIn("(0,10,10,0): %d, %d, %d" % tuple(int(v) for v in img[10, 10]), text)


class ResizeModes(u.TempDirTest):
    """pad (letterbox, valid_box, --background), stretch, WxH sizes, --compression none."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.set_dir = os.path.dirname(SKIMAGE)

    def path(self, sample):
        return os.path.join(self.set_dir, sample["source"].decode("utf-8"))

    def test_pad_keeps_aspect_and_fills_background(self):
        out = os.path.join(self.tmp, "pad")
        u.build(SKIMAGE, out, "--resize-mode", "pad", "--image-size", "160x96",
                "--background", "black")
        s = u.ShardSet(out)
        self.assertEqual(s.index["image"]["width"], 160)
        self.assertEqual(s.index["image"]["height"], 96)
        self.assertEqual(s.index["image"]["resize_mode"], "pad")
        self.assertEqual((int(s.attrs[0]["image_width"]), int(s.attrs[0]["image_height"])), (160, 96))
        for sample in s.samples:
            img = s.image(sample)
            self.assertEqual(img.shape, (96, 160, 3))
            w, h = sample["original_size"]
            x, y, bw, bh = sample["valid_box"]
            scale = min(160 / w, 96 / h)
            self.assertLessEqual(abs(bw - w * scale), 1.01, sample)
            self.assertLessEqual(abs(bh - h * scale), 1.01, sample)
            self.assertLessEqual(abs(x - (160 - bw) / 2), 1, sample)
            self.assertLessEqual(abs(y - (96 - bh) / 2), 1, sample)
            mask = np.ones((96, 160), bool)
            mask[y:y + bh, x:x + bw] = False
            self.assertTrue(np.all(img[mask] == 0), "background not black outside valid_box")
            ref = u.reference_image(self.path(sample), 160, 96, "pad", background=(0, 0, 0))
            self.assertLess(u.mean_abs_diff(img[y:y + bh, x:x + bw], ref[y:y + bh, x:x + bw]), 12,
                            sample["source"])

    def test_background_colour_forms(self):
        for text, rgb in (("#102030", (16, 32, 48)), ("200,100,50", (200, 100, 50))):
            out = os.path.join(self.tmp, "bg_%d" % rgb[0])
            u.build(SKIMAGE, out, "--resize-mode", "pad", "--image-size", "64x32",
                    "--background", text)
            s = u.ShardSet(out)
            for sample in s.samples:
                img = s.image(sample)
                x, y, bw, bh = sample["valid_box"]
                mask = np.ones(img.shape[:2], bool)
                mask[y:y + bh, x:x + bw] = False
                self.assertTrue(mask.any(), sample["source"])
                self.assertTrue(np.all(img[mask] == np.array(rgb)), (text, sample["source"]))
                ref = u.reference_image(self.path(sample), 64, 32, "pad", background=rgb)
                self.assertLess(u.mean_abs_diff(img, ref), 12, (text, sample["source"]))

    def test_stretch_matches_pil_resize(self):
        out = os.path.join(self.tmp, "stretch")
        u.build(SKIMAGE, out, "--resize-mode", "stretch", "--image-size", "128")
        s = u.ShardSet(out)
        for sample in s.samples:
            img = s.image(sample)
            self.assertEqual(img.shape, (128, 128, 3))
            self.assertEqual(sample["valid_box"], (0, 0, 128, 128))
            ref = u.reference_image(self.path(sample), 128, 128, "stretch")
            self.assertLess(u.mean_abs_diff(img, ref), 6, sample["source"])

    def test_center_crop_to_a_wide_size(self):
        out = os.path.join(self.tmp, "wide")
        u.build(SKIMAGE, out, "--image-size", "320x96")
        s = u.ShardSet(out)
        for sample in s.samples:
            img = s.image(sample)
            self.assertEqual(img.shape, (96, 320, 3))
            self.assertEqual(sample["valid_box"], (0, 0, 320, 96))
            ref = u.reference_image(self.path(sample), 320, 96, "center-crop")
            self.assertLess(u.mean_abs_diff(img, ref), 6, sample["source"])

    def test_uncompressed_shards_hold_the_same_pixels(self):
        a, b = os.path.join(self.tmp, "zstd"), os.path.join(self.tmp, "none")
        u.build(SKIMAGE, a, "--compression", "zstd")
        u.build(SKIMAGE, b, "--compression", "none")
        sa, sb = u.ShardSet(a), u.ShardSet(b)
        self.assertEqual(sb.index["compression"]["codec"], "none")
        for x, y in zip(sa.samples, sb.samples):
            self.assertTrue(np.array_equal(sa.image(x), sb.image(y)), x["source"])
        self.assertEqual(u.mmpack("verify", b).rc, 0)

    def test_default_compression_is_none_and_zstd_level_minus_1(self):
        """Raw chunks are uncompressed by default (issue 30, FORMAT.md: a crop then reads only
        the rows it covers): no filter, and h5py reads them with no plugin. With zstd, level -1
        (zstd --fast=1) is the default level (FORMAT.md: ~5% larger than level 1, 2.7x its
        decompression speed); the index, the filter's cd_values[0] (two's complement) and
        --help say so, and h5py reads the pixels through the plugin. A level alone means
        zstd."""
        plain = os.path.join(self.tmp, "default")
        u.build(SKIMAGE, plain)
        p = u.ShardSet(plain)
        self.assertEqual(p.index["compression"], {"codec": "none", "level": 0,
                                                  "hdf5_filter_id": 0})
        with h5py.File(os.path.join(plain, p.index["shards"][0]["file"]), "r") as f:
            self.assertEqual(f["images"].id.get_create_plist().get_nfilters(), 0)
            self.assertEqual(f.attrs["compression"], "none")
        self.assertRegex(u.mmpack("build", "--help").stdout, r"--compression TEXT[^\n]*=none\b")
        out = os.path.join(self.tmp, "default_level")
        u.build(SKIMAGE, out, "--compression", "zstd")
        s = u.ShardSet(out)
        self.assertEqual(s.index["compression"]["codec"], "zstd")
        self.assertEqual(s.index["compression"]["level"], -1)
        with h5py.File(os.path.join(out, s.index["shards"][0]["file"]), "r") as f:
            plist = f["images"].id.get_create_plist()
            filters = [plist.get_filter(i) for i in range(plist.get_nfilters())]
            first = f["images"][0]
        self.assertEqual([(code, tuple(values)) for code, _, values, _ in filters],
                         [(32015, (2**32 - 1,))])
        self.assertRegex(u.mmpack("build", "--help").stdout, r"--compression-level INT[^\n]*=-1\b")
        # The same pixels at level 3 and at a faster level: only the bytes on disk differ.
        for level in ("3", "-5"):
            other = os.path.join(self.tmp, "level" + level)
            u.build(SKIMAGE, other, "--compression-level=" + level)
            o = u.ShardSet(other)
            self.assertEqual(o.index["compression"]["codec"], "zstd")
            self.assertEqual(o.index["compression"]["level"], int(level))
            self.assertTrue(np.array_equal(o.image(o.samples[0]), first), level)
            self.assertEqual(u.mmpack("verify", other).rc, 0, level)

    def test_plugin_writes_with_a_negative_level_from_h5py(self):
        """A user writing through the plugin with cd_values[0] = -3 (two's complement) gets
        a dataset that reads back equal."""
        path = os.path.join(self.tmp, "user.h5")
        data = (np.arange(64 * 64 * 3) % 251).astype(np.uint8).reshape(64, 64, 3)
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=data, chunks=(16, 64, 3), compression=32015,
                             compression_opts=(2**32 - 3,))
        with h5py.File(path, "r") as f:
            self.assertTrue(np.array_equal(f["x"][...], data))


class VerifyCatchesDamage(u.TempDirTest):
    """`mmpack verify` exits non-zero and names the shard when a set is damaged."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.good = os.path.join(cls.tmp, "good")
        u.build(COCO, cls.good, "--samples-per-shard", "20")

    def damaged_copy(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(self.good, out)
        return out

    def test_flipped_byte_in_an_image_chunk(self):
        out = self.damaged_copy("flip")
        path = os.path.join(out, "shard-000001.h5")
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0xFF]))
        run = u.mmpack("verify", out)
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("shard-000001", run.stdout + run.stderr)
        # The checksum is checked before libhdf5 parses a byte: a changed file
        # is reported by its XXH3 and never parsed, so no sample is named.
        self.assertIn("xxh3_64", run.stdout + run.stderr)
        self.assertIn("not parsed", run.stdout + run.stderr)

    def test_truncated_shard(self):
        out = self.damaged_copy("cut")
        path = os.path.join(out, "shard-000002.h5")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        run = u.mmpack("verify", out)
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("shard-000002", run.stdout + run.stderr)

    def test_index_count_disagrees(self):
        out = self.damaged_copy("count")
        idx_path = os.path.join(out, "index.json")
        idx = json.load(open(idx_path))
        idx["shards"][0]["samples"] += 1
        idx["totals"]["samples"] += 1
        with open(idx_path, "w") as f:
            json.dump(idx, f)
        run = u.mmpack("verify", out)
        self.assertNotEqual(run.rc, 0, str(run))

    def test_checksums_in_index_are_xxh3_of_the_files(self):
        idx = u.ShardSet(self.good).index
        for s in idx["shards"]:
            self.assertEqual(s["xxh3_64"], u.xxh3_64_file(os.path.join(self.good, s["file"])))

    def edited_copy(self, name, edit):
        """A copy whose shard-000001.h5 went through edit(h5py.File), index resealed."""
        out = self.damaged_copy(name)
        with h5py.File(os.path.join(out, "shard-000001.h5"), "r+") as f:
            edit(f)
        u.reseal_index(out)
        return out

    def test_resealed_copy_still_verifies(self):
        # the control for the edits below: resealing alone does not upset verify
        out = self.damaged_copy("resealed")
        u.reseal_index(out)
        run = u.mmpack("verify", out)
        self.assertEqual(run.rc, 0, str(run))

    def test_wrong_format_version(self):
        def edit(f):
            f.attrs["format_version"] = np.int32(99)
        run = u.mmpack("verify", self.edited_copy("version", edit))
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("99", run.stdout + run.stderr)

    def test_missing_dataset(self):
        def edit(f):
            del f["captions"]
        run = u.mmpack("verify", self.edited_copy("no_captions", edit))
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("captions", run.stdout + run.stderr)

    def test_caption_offsets_out_of_order(self):
        def edit(f):
            off = f["caption_offsets"][()]
            off[3], off[4] = off[4], off[3]
            f["caption_offsets"][...] = off
        run = u.mmpack("verify", self.edited_copy("offsets", edit))
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("shard-000001", run.stdout + run.stderr)

    def test_token_offsets_past_the_tokens(self):
        def edit(f):
            off = f["token_offsets"][()]
            off[-1] += 1000
            f["token_offsets"][...] = off
        run = u.mmpack("verify", self.edited_copy("tok_offsets", edit))
        self.assertNotEqual(run.rc, 0, str(run))

    def test_missing_shard(self):
        out = self.damaged_copy("gone")
        os.remove(os.path.join(out, "shard-000000.h5"))
        run = u.mmpack("verify", out)
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn("shard-000000", run.stdout + run.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
