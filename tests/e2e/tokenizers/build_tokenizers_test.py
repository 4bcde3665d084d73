#!/usr/bin/python3
"""`mmpack build` and `mmpack retokenize` with the tokenizer kinds (text/tokenizer.h), on the real
coco-cc and openclipart sets: the kind in index.json, the tokenizer file carried by the set and
usable for a val set, the shards' token ids equal to the CLIP reference, `mmpack verify`; a
retokenized set equal shard for shard to a build with the new tokenizer, the old set untouched;
a trained tokenizer's bounded, thread-count-independent sample (--tokenizer-sample).

Run by ctest (MM_BIN_DIR, MM_SHARED_DIR, MM_SOURCE_DIR, HDF5_PLUGIN_PATH).
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import e2e_util as u  # noqa: E402
import h5py  # noqa: E402

SOURCE = os.environ.get("MM_SOURCE_DIR", os.path.join(HERE, "..", "..", ".."))
DATA = os.path.join(SOURCE, "tests", "data", "tokenizers")
CLIP_GZ = os.path.join(DATA, "bpe_simple_vocab_16e6.txt.gz")
BERT = os.path.join(DATA, "bert-wiki.json")
COCO = os.path.join(u.DATA_DIR, "coco-cc")
CLIPART = os.path.join(u.DATA_DIR, "openclipart-pd")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def index(out):
    with open(os.path.join(out, "index.json"), encoding="utf-8") as f:
        return json.load(f)


def stored(out):
    """(captions, token rows) of every shard, in order, read with h5py."""
    captions, rows = [], []
    for s in index(out)["shards"]:
        with h5py.File(os.path.join(out, s["file"]), "r") as f:
            offsets = f["token_offsets"][:]
            tokens = f["tokens"][:]
            captions += [c.decode("utf-8") for c in f["captions"][:]]
            rows += [tokens[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    return captions, rows


def clip_reference(captions):
    data = "".join(json.dumps(c) + "\n" for c in captions).encode("utf-8")
    p = subprocess.run([sys.executable, os.path.join(HERE, "clip_reference.py"), CLIP_GZ],
                       input=data, capture_output=True, timeout=600, check=True)
    full = [json.loads(l) for l in p.stdout.decode().splitlines()]
    return [ids if len(ids) <= 77 else ids[:76] + [49407] for ids in full]


def verify(test, out):
    run = u.mmpack("verify", out)
    test.assertEqual(run.rc, 0, str(run))


class BuildWithTokenizers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        u.require_environment()
        cls.tmp = tempfile.TemporaryDirectory(prefix="mm-tok-build-")
        cls.clip_set = os.path.join(cls.tmp.name, "clip")
        u.build(COCO, cls.clip_set, tokenizer=CLIP_GZ, lowercase=False)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_clip_set_records_kind_carries_file_and_holds_reference_ids(self):
        t = index(self.clip_set)["tokenizer"]
        self.assertEqual((t["kind"], t["file"]), ("clip-bpe", "bpe_simple_vocab.txt.gz"))
        self.assertEqual((t["vocab_size"], t["bos_id"], t["eos_id"], t["pad_id"]),
                         (49408, 49406, 49407, 0))
        carried = os.path.join(self.clip_set, t["file"])
        self.assertEqual(sha256(carried), sha256(CLIP_GZ))
        self.assertEqual(t["sha256"], sha256(CLIP_GZ))
        self.assertEqual(t["unk_rate"], 0)
        captions, rows = stored(self.clip_set)
        self.assertEqual(len(captions), 255)
        self.assertEqual(rows, clip_reference(captions))
        verify(self, self.clip_set)

    def test_val_set_built_with_the_carried_file_has_the_same_tokenizer(self):
        val = os.path.join(self.tmp.name, "val")
        carried = os.path.join(self.clip_set, "bpe_simple_vocab.txt.gz")
        u.build(CLIPART, val, tokenizer=carried, lowercase=False)
        self.assertEqual(index(val)["tokenizer"]["sha256"], index(self.clip_set)["tokenizer"]["sha256"])
        captions, rows = stored(val)
        self.assertEqual(rows, clip_reference(captions))
        verify(self, val)

    def test_tokenizer_json_set(self):
        out = os.path.join(self.tmp.name, "bert")
        u.build(COCO, out, tokenizer=BERT, lowercase=False)
        t = index(out)["tokenizer"]
        self.assertEqual((t["kind"], t["file"], t["bos_id"], t["eos_id"], t["pad_id"], t["unk_id"]),
                         ("tokenizer-json", "tokenizer.json", 1, 2, 3, 0))
        captions, rows = stored(out)
        run = subprocess.run([u.MMPACK, "tokenize", "--tokenizer", BERT, "--max-tokens", "77", "-q"],
                             input="".join(json.dumps(c) + "\n" for c in captions).encode(),
                             capture_output=True, check=True)
        self.assertEqual(rows, [json.loads(l) for l in run.stdout.decode().splitlines()])
        verify(self, out)

    def test_retokenize_equals_a_build_with_the_new_tokenizer_and_leaves_set_as_it_was(self):
        albert = os.path.join(self.tmp.name, "albert")
        u.build(COCO, albert)  # ALBERT's SentencePiece model, --lowercase
        before = {s["file"]: u.xxh3_64_file(os.path.join(albert, s["file"]))
                  for s in index(albert)["shards"]}
        out = os.path.join(self.tmp.name, "retok")
        run = u.mmpack("retokenize", albert, "--tokenizer", CLIP_GZ, "-o", out)
        self.assertEqual(run.rc, 0, str(run))
        verify(self, out)
        after = {s["file"]: u.xxh3_64_file(os.path.join(albert, s["file"]))
                 for s in index(albert)["shards"]}
        self.assertEqual(before, after)
        # --lowercase of the ALBERT build is replaced by retokenize's own (none given here).
        got, want = index(out), index(self.clip_set)
        self.assertEqual(got["tokenizer"]["kind"], "clip-bpe")
        self.assertEqual([s["xxh3_64"] for s in got["shards"]],
                         [s["xxh3_64"] for s in want["shards"]])
        self.assertEqual(stored(out), stored(self.clip_set))
        again = u.mmpack("retokenize", albert, "--tokenizer", CLIP_GZ, "-o", out)
        self.assertNotEqual(again.rc, 0)
        self.assertIn("--overwrite", again.stderr)


class TrainedTokenizerSample(unittest.TestCase):
    def test_sample_bounds_training_and_does_not_depend_on_threads(self):
        u.require_environment()
        with tempfile.TemporaryDirectory(prefix="mm-tok-sample-") as tmp:
            models = []
            for threads in (1, 2):
                out = os.path.join(tmp, f"j{threads}")
                run = u.build(COCO, out, "--tokenizer-sample", "100", "--vocab-size", "200",
                              tokenizer=None, threads=threads)
                self.assertIn("on 100 captions (a sample of 255", run.stderr)
                with open(os.path.join(out, "tokenizer.model"), "rb") as f:
                    models.append(f.read())
                self.assertTrue(index(out)["tokenizer"]["trained"])
            self.assertEqual(models[0], models[1])
            full = os.path.join(tmp, "full")
            u.build(COCO, full, "--vocab-size", "200", tokenizer=None)
            with open(os.path.join(full, "tokenizer.model"), "rb") as f:
                self.assertNotEqual(f.read(), models[0])  # the sample is a real cut


if __name__ == "__main__":
    unittest.main()
