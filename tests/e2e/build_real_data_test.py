#!/usr/bin/python3
"""End-to-end: `mmpack build` on the three real sets in MM_SHARED_DIR/data, then `mmpack verify`,
`mmpack info`, `h5dump` and h5py read back exactly what the input holds.

Each class builds once (setUpClass) and checks one set: coco-cc through captions.jsonl and
through captions_coco.json, openclipart-pd, skimage-micro; with the real ALBERT tokenizer and
with a tokenizer that mmpack trains on the captions.
"""

import json
import os
import re
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

DATASETS = ["images", "keys", "sources", "original_size", "valid_box", "caption_offsets",
            "captions", "token_offsets", "tokens"]


class RealSetChecks:
    """Checks shared by every real-set build. Subclasses set SET, MANIFEST, EXTRA, TOKENIZER and
    IMAGE_STEP (check every IMAGE_STEP-th image against PIL; 1 = all)."""

    SET = "coco-cc"
    MANIFEST = "captions.jsonl"
    EXTRA = ()
    TOKENIZER = u.ALBERT
    IMAGE_STEP = 1
    MAX_TOKENS = 77

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.set_dir = os.path.join(u.DATA_DIR, cls.SET)
        cls.expected = u.read_manifest_jsonl(os.path.join(cls.set_dir, "captions.jsonl"))
        cls.out = os.path.join(cls.tmp, "out")
        cls.build_run = u.build(os.path.join(cls.set_dir, cls.MANIFEST), cls.out, *cls.EXTRA,
                          tokenizer=cls.TOKENIZER)
        cls.shards = u.ShardSet(cls.out)
        model = cls.TOKENIZER or os.path.join(cls.out, "tokenizer.model")
        cls.tok = u.Tokenizer(model)

    def expected_source(self, image_path):
        """The source mmpack must store for a manifest image path (as the input gave it)."""
        return image_path.encode("utf-8")

    def test_verify_exits_zero(self):
        run = u.mmpack("verify", self.out)
        self.assertEqual(run.rc, 0, str(run))

    def test_info_shows_counts(self):
        run = u.mmpack("info", self.out)
        self.assertEqual(run.rc, 0, str(run))
        n_samples = len(self.expected)
        n_captions = sum(len(c) for c in self.expected.values())
        self.assertRegex(run.stdout, r"\b%d\b" % n_samples, "samples missing from info")
        self.assertRegex(run.stdout, r"\b%d\b" % n_captions, "captions missing from info")
        self.assertRegex(run.stdout, r"224", "image size missing from info")

    def test_index_counts_and_files(self):
        idx = self.shards.index
        self.assertEqual(idx["format"], "mmpack-shard")
        self.assertEqual(idx["format_version"], 1)
        self.assertEqual(idx["totals"]["samples"], len(self.expected))
        self.assertEqual(idx["totals"]["captions"], sum(len(c) for c in self.expected.values()))
        self.assertEqual(idx["totals"]["shards"], len(idx["shards"]))
        self.assertEqual(idx["dropped"]["total"], 0, self.shards.report)
        total_bytes = 0
        for i, s in enumerate(idx["shards"]):
            self.assertEqual(s["file"], "shard-%06d.h5" % i)
            path = os.path.join(self.out, s["file"])
            self.assertEqual(s["bytes"], os.path.getsize(path))
            self.assertRegex(s["xxh3_64"], r"^[0-9a-f]{16}$")
            total_bytes += s["bytes"]
        self.assertEqual(idx["totals"]["bytes"], total_bytes)
        self.assertEqual(sum(s["samples"] for s in idx["shards"]), len(self.expected))
        leftovers = [f for f in os.listdir(self.out) if f.endswith(".tmp")]
        self.assertEqual(leftovers, [])

    def test_tokenizer_stored_with_its_hash(self):
        stored = os.path.join(self.out, "tokenizer.model")
        self.assertTrue(os.path.isfile(stored))
        digest = u.sha256_file(stored)
        if self.TOKENIZER:
            self.assertEqual(digest, u.sha256_file(self.TOKENIZER))
        t = self.shards.index["tokenizer"]
        self.assertEqual(t["sha256"], digest)
        self.assertEqual(t["max_tokens"], self.MAX_TOKENS)
        self.assertEqual(t["vocab_size"], self.tok.sp.get_piece_size())
        self.assertEqual(t["bos_id"], self.tok.sp.bos_id())
        self.assertEqual(t["eos_id"], self.tok.sp.eos_id())
        self.assertEqual(t["unk_id"], self.tok.sp.unk_id())
        pad = self.tok.sp.pad_id()
        self.assertEqual(t["pad_id"], pad if pad >= 0 else self.tok.sp.unk_id())
        self.assertEqual(t["trained"], not self.TOKENIZER)
        for a in self.shards.attrs:
            self.assertEqual(_text(a["tokenizer_sha256"]), digest)

    def test_shard_attributes(self):
        for i, a in enumerate(self.shards.attrs):
            self.assertEqual(_text(a["format"]), "mmpack-shard")
            self.assertEqual(int(a["format_version"]), 1)
            self.assertEqual(int(a["shard_index"]), i)
            self.assertEqual(int(a["num_samples"]), self.shards.index["shards"][i]["samples"])
            self.assertEqual(int(a["num_captions"]), self.shards.index["shards"][i]["captions"])
            self.assertEqual(int(a["image_height"]), 224)
            self.assertEqual(int(a["image_width"]), 224)
            self.assertEqual(_text(a["resize_mode"]), "center-crop")
            self.assertEqual(_text(a["compression"]), "none")  # the default

    def test_h5dump_header_shows_structure(self):
        first = os.path.join(self.out, "shard-000000.h5")
        n = self.shards.index["shards"][0]["samples"]
        rc, out, err = u.h5dump("-H", "-p", first)
        self.assertEqual(rc, 0, err)
        for name in DATASETS:
            self.assertIn('DATASET "%s"' % name, out)
        self.assertRegex(out, r"DATASPACE\s+SIMPLE\s+\{\s*\(\s*%d,\s*224,\s*224,\s*3\s*\)" % n)
        self.assertRegex(out, r"CHUNKED\s+\(\s*1,\s*224,\s*224,\s*3\s*\)")
        self.assertNotIn("FILTER_ID", out)  # uncompressed by default: no filter, no plugin
        self.assertIn("H5T_STD_U8LE", out)
        self.assertIn('ATTRIBUTE "format_version"', out)

    def test_h5dump_prints_pixels_of_one_image(self):
        sample = self.shards.samples[-1]
        rc, out, err = u.h5dump("-d", "/images", "-s", "%d,100,100,0" % sample["row"],
                                "-c", "1,2,3,3", sample["shard"])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("unable to", out + err)
        data = out[out.index("DATA {"):]
        values = _h5dump_values(data)
        want = self.shards.image(sample)[100:102, 100:103, :].reshape(-1).tolist()
        self.assertEqual(values, want)

    def test_samples_in_input_order_with_captions_byte_for_byte(self):
        got = [(s["source"], s["captions"]) for s in self.shards.samples]
        want = [(self.expected_source(k), v) for k, v in self.expected.items()]
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(g, w)

    def test_keys_unique_and_nonempty(self):
        keys = [s["key"] for s in self.shards.samples]
        self.assertEqual(len(set(keys)), len(keys))
        self.assertTrue(all(keys), keys)
        for k in keys:
            k.decode("utf-8")

    def test_tokens_match_sentencepiece(self):
        truncated = 0
        for s in self.shards.samples:
            self.assertEqual(len(s["tokens"]), len(s["captions"]))
            for cap, toks in zip(s["captions"], s["tokens"]):
                want, cut = self.tok.expected(cap, self.MAX_TOKENS)
                truncated += cut
                self.assertEqual(toks, want, cap)
        report = self.shards.report or {}
        if "truncated_captions" in report:
            self.assertEqual(report["truncated_captions"], truncated)

    def test_images_match_an_independent_decode(self):
        diffs = []
        for i, s in enumerate(self.shards.samples):
            if i % self.IMAGE_STEP:
                continue
            path = os.path.join(self.set_dir, self.manifest_path(s))
            img = self.shards.image(s)
            self.assertEqual(img.dtype, np.uint8)
            self.assertEqual(img.shape, (224, 224, 3))
            ref = u.reference_image(path, 224, 224, "center-crop")
            if ref.std() > 4:
                self.assertGreater(img.std(), ref.std() / 3, "blank image for %s" % path)
            d = u.mean_abs_diff(img, ref)
            diffs.append(d)
            # high-frequency clip art (a barcode) differs most between resampling kernels
            self.assertLess(d, 30, "%s differs from PIL by %.1f on average" % (path, d))
            self.assertEqual(s["original_size"], u.oriented_rgb(path).size, path)
            self.assertEqual(s["valid_box"], (0, 0, 224, 224))
        # measured: median 0.2-0.4, 90th percentile 0.3-4.6 (libvips Lanczos3 with shrink-on-load
        # against PIL Lanczos): a channel swap, a shift or a wrong crop is far above these
        self.assertLess(float(np.median(diffs)), 2.0, diffs)
        self.assertLess(float(np.percentile(diffs, 90)), 8.0, diffs)

    def manifest_path(self, sample):
        """The manifest path (relative to the set folder) a sample came from."""
        source = sample["source"].decode("utf-8")
        for k in self.expected:
            if k == source or os.path.basename(k) == os.path.basename(source):
                return k
        self.fail("source %r not in the manifest" % source)


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _h5dump_values(data):
    """The numbers of h5dump's DATA { (i,j,..): v, v, ... } block, in order."""
    body = data[data.index("{") + 1:data.index("}")]
    body = re.sub(r"\([\d,\s]+\):", " ", body)
    return [int(v) for v in body.replace(",", " ").split()]


class CocoJsonl(RealSetChecks, u.TempDirTest):
    SET = "coco-cc"


class CocoCocoJson(RealSetChecks, u.TempDirTest):
    """The same 51 images and 255 captions from the COCO captions JSON (file_name relative to
    images/, as captions_train2017.json has it)."""

    SET = "coco-cc"
    MANIFEST = "captions_coco.json"
    IMAGE_STEP = 5

    def expected_source(self, image_path):
        return os.path.basename(image_path).encode("utf-8")

    def test_same_pixels_as_the_jsonl_build(self):
        other = os.path.join(self.tmp, "jsonl")
        u.build(os.path.join(self.set_dir, "captions.jsonl"), other)
        jsonl = u.ShardSet(other)
        for a, b in zip(self.shards.samples, jsonl.samples):
            self.assertEqual(a["captions"], b["captions"])
            self.assertEqual(a["tokens"], b["tokens"])
            self.assertTrue(np.array_equal(self.shards.image(a), jsonl.image(b)), a["source"])


class Openclipart(RealSetChecks, u.TempDirTest):
    """349 PNGs: RGBA, palette with tRNS, LA, L, 6 px to thousands of px, up to 25:1."""

    SET = "openclipart-pd"
    IMAGE_STEP = 3


class Skimage(RealSetChecks, u.TempDirTest):
    SET = "skimage-micro"


class SkimageTruncated(RealSetChecks, u.TempDirTest):
    """--max-tokens 8 cuts most captions; the cut is counted in report.json."""

    SET = "skimage-micro"
    EXTRA = ("--max-tokens", "8")
    MAX_TOKENS = 8

    def test_truncations_counted(self):
        self.assertIn("truncated_captions", self.shards.report)
        self.assertGreater(self.shards.report["truncated_captions"], 0)
        for s in self.shards.samples:
            for t in s["tokens"]:
                self.assertLessEqual(len(t), 8)


class CocoTrainedTokenizer(RealSetChecks, u.TempDirTest):
    """No --tokenizer: mmpack trains one on the captions (default --vocab-size) and stores it."""

    SET = "coco-cc"
    TOKENIZER = None
    IMAGE_STEP = 10

    def test_trained_model_ids(self):
        t = self.shards.index["tokenizer"]
        self.assertEqual((t["pad_id"], t["unk_id"], t["bos_id"], t["eos_id"]), (0, 1, 2, 3))
        self.assertTrue(t["trained"])
        for s in self.shards.samples:
            for toks in s["tokens"]:
                self.assertEqual(toks[0], 2)
                self.assertEqual(toks[-1], 3)


class SkimageTrainedSmallVocab(RealSetChecks, u.TempDirTest):
    """A trained tokenizer on 12 captions with --vocab-size 64."""

    SET = "skimage-micro"
    TOKENIZER = None
    EXTRA = ("--vocab-size", "64")


class SetFolders(u.TempDirTest):
    """RAW = a set's folder (captions.jsonl at its top, images/ below): the manifest's samples,
    not image/text pairs guessed from file names."""

    def test_each_set_folder_gives_its_manifest_samples(self):
        for name in u.SETS:
            out = os.path.join(self.tmp, name)
            u.build(os.path.join(u.DATA_DIR, name), out)
            want = u.read_manifest_jsonl(os.path.join(u.DATA_DIR, name, "captions.jsonl"))
            got = [(os.path.basename(s["source"].decode()), s["captions"])
                   for s in u.ShardSet(out).samples]
            self.assertEqual(got, [(os.path.basename(k), v) for k, v in want.items()], name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
