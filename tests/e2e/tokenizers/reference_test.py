#!/usr/bin/python3
"""mmpack's tokenizers against their reference implementations, id for id, on every caption of
the real sets (MM_SHARED_DIR/data/*/captions.jsonl, examples/data) and on a hostile list
(hostile_captions.py):

  clip-bpe        OpenAI CLIP's clip/simple_tokenizer.py with its bpe_simple_vocab_16e6.txt.gz
                  (vendored in tests/data/tokenizers/reference with ftfy 6.3.1; Debian's
                  python3-regex and python3-wcwidth)
  tokenizer-json  npm `tokenizers` (the Rust library, Node binding) on RoBERTa's and a BERT
                  WordPiece tokenizer.json (huggingface/tokenizers bindings/node/data), and a
                  BERT file with BertNormalizer / BertPreTokenizer / BertProcessing made from it.
                  npm `@huggingface/tokenizers` (tokenizers.js, pure JavaScript) is run too: it
                  equals Rust on RoBERTa; on the WordPiece files it departs from Rust (its
                  Whitespace pre-tokenizer's \w is ASCII-only, its case mapping differs), and the
                  number of captions where it does is printed

Run by ctest (MM_BIN_DIR, MM_SHARED_DIR, MM_SOURCE_DIR; MM_TOKENIZER_NODE_DIR holds the npm
packages, installed by the fixture tokenizer_references).
"""
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hostile_captions import HOSTILE  # noqa: E402

SOURCE = os.environ.get("MM_SOURCE_DIR", os.path.join(HERE, "..", "..", ".."))
DATA = os.path.join(SOURCE, "tests", "data", "tokenizers")
MMPACK = os.path.join(os.environ.get("MM_BIN_DIR", ""), "mmpack")
NODE_DIR = os.environ.get("MM_TOKENIZER_NODE_DIR", "")
CLIP_GZ = os.path.join(DATA, "bpe_simple_vocab_16e6.txt.gz")


def real_captions():
    """Every caption of the shared sets and the example data, in file order."""
    shared = os.environ.get("MM_SHARED_DIR", "")
    files = sorted(glob.glob(os.path.join(shared, "data", "*", "captions.jsonl")))
    files += sorted(glob.glob(os.path.join(SOURCE, "examples", "data", "*", "captions.jsonl")))
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                text = json.loads(line).get("text", json.loads(line).get("caption"))
                out.extend(text if isinstance(text, list) else [text])
    return [c for c in out if isinstance(c, str)]


def run_lines(cmd, captions, timeout=600):
    data = "".join(json.dumps(c) + "\n" for c in captions).encode("utf-8")
    p = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    return [json.loads(l) for l in p.stdout.decode("utf-8").splitlines()]


def mmpack_ids(tokenizer, captions, max_tokens=0):
    return run_lines([MMPACK, "tokenize", "--tokenizer", tokenizer, "--max-tokens",
                      str(max_tokens), "-q"], captions)


def node_ids(kind, tokenizer, captions):
    env = dict(os.environ, NODE_PATH=os.path.join(NODE_DIR, "node_modules"))
    data = "".join(json.dumps(c) + "\n" for c in captions).encode("utf-8")
    p = subprocess.run(["node", os.path.join(HERE, "hf_reference.mjs"), kind, tokenizer],
                       input=data, capture_output=True, timeout=600, env=env)
    if p.returncode != 0:
        raise AssertionError(f"node {kind} failed: {p.stderr.decode()[-2000:]}")
    return [json.loads(l) for l in p.stdout.decode("utf-8").splitlines()]


class Corpus:
    real = real_captions()
    captions = real + HOSTILE


def assert_same(test, name, captions, got, want):
    test.assertEqual(len(got), len(want))
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    detail = "\n".join(f"  {captions[i]!r}\n    mmpack    {got[i]}\n    reference {want[i]}"
                       for i in bad[:8])
    test.assertEqual(bad, [], f"{name}: {len(bad)} of {len(want)} captions differ:\n{detail}")


class ClipBpe(unittest.TestCase):
    def test_ids_equal_simple_tokenizer_on_real_and_hostile_captions(self):
        self.assertGreater(len(Corpus.real), 800)
        want = run_lines([sys.executable, os.path.join(HERE, "clip_reference.py"), CLIP_GZ],
                         Corpus.captions)
        got = mmpack_ids(CLIP_GZ, Corpus.captions)
        assert_same(self, "clip-bpe", Corpus.captions, got, want)

    def test_context_77_cut_as_clip_tokenize_truncate(self):
        # clip.tokenize(texts, context_length=77, truncate=True): the first 77 ids, the last
        # replaced by <|endoftext|>.
        long = [c for c in Corpus.captions if len(c) > 150]
        self.assertGreater(len(long), 3)
        full = run_lines([sys.executable, os.path.join(HERE, "clip_reference.py"), CLIP_GZ], long)
        want = [ids if len(ids) <= 77 else ids[:76] + [49407] for ids in full]
        self.assertTrue(any(len(ids) > 77 for ids in full))
        assert_same(self, "clip-bpe at 77", long, mmpack_ids(CLIP_GZ, long, 77), want)


def bert_variant(bert_wiki, out_path):
    """bert-wiki.json with BERT's own components: BertNormalizer (clean text, CJK split, strip
    accents, lowercase), BertPreTokenizer and BertProcessing."""
    with open(bert_wiki, encoding="utf-8") as f:
        doc = json.load(f)
    doc["normalizer"] = {"type": "BertNormalizer", "clean_text": True,
                         "handle_chinese_chars": True, "strip_accents": None, "lowercase": True}
    doc["pre_tokenizer"] = {"type": "BertPreTokenizer"}
    doc["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]}
    doc["model"]["max_input_chars_per_word"] = 20  # the long words of the hostile list hit it
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)


class TokenizerJson(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if shutil.which("node") is None:
            raise unittest.SkipTest("node is not installed (tools/install-deps.sh)")
        for pkg in ("tokenizers", "@huggingface/tokenizers"):
            if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", pkg)):
                raise AssertionError(f"npm package {pkg} missing in {NODE_DIR} "
                                     "(fixture tokenizer_references: npm_setup.sh)")
        cls.tmp = tempfile.mkdtemp(prefix="mm-tokjson-")
        cls.files = {"bert-wiki": os.path.join(DATA, "bert-wiki.json")}
        cls.files["roberta"] = os.path.join(cls.tmp, "roberta.json")
        with gzip.open(os.path.join(DATA, "roberta.json.gz")) as src, \
                open(cls.files["roberta"], "wb") as dst:
            shutil.copyfileobj(src, dst)
        cls.files["bert-normalizer"] = os.path.join(cls.tmp, "bert-normalizer.json")
        bert_variant(cls.files["bert-wiki"], cls.files["bert-normalizer"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check(self, name):
        path = self.files[name]
        want = node_ids("rust", path, Corpus.captions)
        got = mmpack_ids(path, Corpus.captions)
        assert_same(self, name, Corpus.captions, got, want)
        js = node_ids("js", path, Corpus.captions)
        differ = [c for c, a, b in zip(Corpus.captions, js, want) if a != b]
        print(f"{name}: tokenizers.js differs from the Rust library on {len(differ)} of "
              f"{len(want)} captions: {differ[:3]!r}", file=sys.stderr)
        return js, want

    def test_roberta_byte_level_bpe(self):
        js, want = self.check("roberta")
        # On byte-level BPE tokenizers.js is the Rust library's equal: mmpack equals both.
        assert_same(self, "roberta (tokenizers.js)", Corpus.captions, js, want)

    def test_bert_wordpiece_with_nfd_lowercase_strip_accents(self):
        self.check("bert-wiki")

    def test_bert_wordpiece_with_bert_normalizer_and_pre_tokenizer(self):
        self.check("bert-normalizer")


if __name__ == "__main__":
    if not os.access(MMPACK, os.X_OK):
        sys.exit("no mmpack at " + MMPACK + " (run through ctest)")
    unittest.main()
