"""`mmpack build --tokenizer none`: captions stored as text only, for a training
loop that tokenizes with a tokenizer of its own. The set has no token ids and no tokenizer.model;
index.json's "tokenizer" is null; mmpack.Loader batches carry each row's caption text
("texts") and a [B, 0] "tokens"; mmtrain refuses the set. Checked on the real coco-cc set against
h5py's view of the same shards."""

import json
import os
import shutil

import h5py
import numpy as np
import pytest

import mmpack
from conftest import ALBERT, BIN_DIR, DATA_DIR, run as conftest_run

MANIFEST = os.path.join(DATA_DIR, "coco-cc", "captions.jsonl")


def run(*args):
    return conftest_run(*args, timeout=300)


@pytest.fixture(scope="module")
def text_only(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("text_only") / "set")
    index = mmpack.build(MANIFEST, out, tokenizer="none", threads=2, samples_per_shard=16)
    return out, index


def h5py_captions(out):
    """Every sample's captions, in set order, as h5py reads them."""
    with open(os.path.join(out, "index.json")) as f:
        shards = [s["file"] for s in json.load(f)["shards"]]
    samples = []
    for name in shards:
        with h5py.File(os.path.join(out, name), "r") as f:
            captions = [c.decode() for c in f["captions"][()]]
            offsets = f["caption_offsets"][()]
            assert f["tokens"].shape == (0,)
            assert not f["token_offsets"][()].any()
            assert f.attrs["tokenizer_sha256"] == ""
            samples += [captions[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
    return samples


def test_the_set_has_no_token_ids_and_no_tokenizer(text_only):
    out, index = text_only
    assert index["tokenizer"] is None
    assert "tokenizer.model" not in os.listdir(out)
    assert index["totals"]["samples"] == 51 and index["totals"]["tokens"] == 0
    assert len(h5py_captions(out)) == 51
    r = run(os.path.join(BIN_DIR, "mmpack"), "verify", out)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(os.path.join(BIN_DIR, "mmpack"), "info", out)
    assert "tokenizer:    none" in r.stdout, r.stdout
    r = run(os.path.join(BIN_DIR, "mmpack"), "stats", out)
    assert r.returncode == 0 and "unk rate: n/a" in r.stdout, r.stdout + r.stderr


def test_shard_set_gives_captions_and_no_tokens(text_only):
    out, _ = text_only
    want = h5py_captions(out)
    ds = mmpack.ShardSet(out)
    assert ds.info["tokenizer"] is None
    for i in (0, 17, 50):
        x = ds[i]
        assert x["captions"] == want[i]
        assert [len(t) for t in x["tokens"]] == [0] * len(want[i])


@pytest.mark.parametrize("caption_mode", ["random", "all"])
def test_loader_batches_carry_the_caption_text(text_only, caption_mode):
    out, _ = text_only
    want = h5py_captions(out)
    loader = mmpack.Loader(out, batch_size=8, seed=3, num_threads=2, caption_mode=caption_mode,
                           drop_last=False)
    rows = 0
    for batch in loader:
        B = len(batch["keys"])
        assert batch["tokens"].shape == (B, 0)
        assert not batch["lengths"].any()
        assert len(batch["texts"]) == B
        for j in range(B):
            i, c = int(batch["indices"][j]), int(batch["caption_index"][j])
            assert batch["texts"][j] == want[i][c]
        rows += B
    assert rows >= (51 if caption_mode == "random" else 255)


def test_loader_of_a_tokenized_set_has_no_texts(coco):
    batch = next(iter(mmpack.Loader(coco, batch_size=4, num_threads=1)))
    assert "texts" not in batch and batch["tokens"].shape[1] >= 1


def test_as_torch_works_with_empty_token_rows(text_only):
    torch = pytest.importorskip("torch")
    out, _ = text_only
    batch = next(iter(mmpack.Loader(out, batch_size=4, num_threads=1, as_torch=True)))
    assert isinstance(batch["tokens"], torch.Tensor) and tuple(batch["tokens"].shape) == (4, 0)
    assert all(isinstance(t, str) and t for t in batch["texts"])


def test_mmtrain_refuses_a_set_without_token_ids(text_only, tmp_path):
    out, _ = text_only
    r = run(os.path.join(BIN_DIR, "mmtrain"), "--shards", out, "--steps", 1, "--out",
            tmp_path / "run")
    assert r.returncode != 0
    assert "--tokenizer none" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_token_count_filters_need_a_tokenizer(tmp_path):
    for flag in (["--min-tokens", "3"], ["--drop-long-captions"]):
        r = run(os.path.join(BIN_DIR, "mmpack"), "build", MANIFEST, "-o", tmp_path / "o",
                "--tokenizer", "none", *flag)
        assert r.returncode == 1 and "--tokenizer none" in r.stderr, r.stderr
        assert not os.path.exists(tmp_path / "o")


def test_reader_refuses_token_ids_in_a_set_that_says_it_has_no_tokenizer(coco, tmp_path):
    out = tmp_path / "set"
    shutil.copytree(coco, out)
    with open(out / "index.json") as f:
        index = json.load(f)
    index["tokenizer"] = None
    with open(out / "index.json", "w") as f:
        json.dump(index, f)
    with pytest.raises(mmpack.CorruptionError, match="token ids in a set without a tokenizer"):
        mmpack.ShardSet(str(out))
