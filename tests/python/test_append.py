"""`mmpack build NEW -o OUT --append` (issue 13 item 4): NEW's samples added to the existing set
OUT as new shards. Checked on real coco-cc photos split into overlapping manifests: the appended
set verifies, holds every key once, and each sample's pixels and token ids equal those of one
build of the whole manifest; OUT's own shards are kept (the same inodes, nothing copied); a
refused append leaves OUT byte for byte as it was."""

import hashlib
import json
import os

import numpy as np
import pytest

import mmpack
from conftest import ALBERT, BIN_DIR, DATA_DIR, run

MMPACK = os.path.join(BIN_DIR, "mmpack")
COCO = os.path.join(DATA_DIR, "coco-cc")




@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    """The coco-cc manifest (5 lines an image) as three overlapping parts and as a whole."""
    root = tmp_path_factory.mktemp("append_inputs")
    lines = [json.loads(l) for l in open(os.path.join(COCO, "captions.jsonl"))]
    for line in lines:
        line["image"] = os.path.join(COCO, line["image"])
    parts = {"a": lines[:100], "b": lines[90:180], "c": lines[175:], "all": lines}
    out = {}
    for name, part in parts.items():
        out[name] = str(root / (name + ".jsonl"))
        with open(out[name], "w") as f:
            f.write("".join(json.dumps(l) + "\n" for l in part))
    return out


def digest(folder):
    return {n: hashlib.sha256(open(os.path.join(folder, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(folder))}


def build(manifest, out, *extra):
    r = run(MMPACK, "build", manifest, "-o", out, "--tokenizer", ALBERT, "--lowercase",
            "--samples-per-shard", "8", "-q", *extra)
    assert r.returncode == 0, r.stderr
    return r


def by_key(path):
    s = mmpack.ShardSet(path)
    return {s.key(i): (s.image(i), [t.tolist() for t in s.tokens(i)]) for i in range(len(s))}


@pytest.mark.parametrize("codec", [[], ["--codec", "jpeg", "--resize-mode", "keep-ratio-largest",
                                        "--max-size", "96"]])
def test_two_appends_hold_every_sample_once_as_one_build_would(manifests, tmp_path, codec):
    out, whole = str(tmp_path / "out"), str(tmp_path / "whole")
    build(manifests["a"], out, *codec)
    before = {n: os.stat(os.path.join(out, n)).st_ino for n in os.listdir(out) if n.endswith(".h5")}
    build(manifests["b"], out, "--append", *codec)  # no --tokenizer needed: OUT's own is used
    r = build(manifests["c"], out, "--append", *codec)
    assert "duplicate_key 1" in r.stderr  # one image of c is in b
    for name, inode in before.items():  # OUT's shards kept as they were: linked, not copied
        assert os.stat(os.path.join(out, name)).st_ino == inode, name
    r = run(MMPACK, "verify", out)
    assert r.returncode == 0, r.stderr
    build(manifests["all"], whole, *codec)
    got, want = by_key(out), by_key(whole)
    assert sorted(got) == sorted(want) and len(got) == 51
    for key, (image, tokens) in want.items():
        assert np.array_equal(got[key][0], image), key
        assert got[key][1] == tokens, key
    index = json.load(open(os.path.join(out, "index.json")))
    names = [s["file"] for s in index["shards"]]
    assert names == ["shard-%06d.h5" % k for k in range(len(names))]
    assert index["build_options"]["appends"] == 2
    # a: images 0..19; b: 18..35 (18 and 19 again); c: 35..50 (35 again).
    assert index["totals"]["samples"] == 51 and index["dropped"]["by_reason"]["duplicate_key"] == 3
    report = json.load(open(os.path.join(out, "report.json")))
    assert report["samples_written"] == 51
    # 20 samples in shards 0..2 (8 a shard), then 16 in 3..4, then 15 in 5..6.
    assert names == ["shard-%06d.h5" % k for k in range(7)]
    assert [a["first_shard"] for a in report["appends"]] == [names[3], names[5]]
    assert [a["samples_written"] for a in report["appends"]] == [16, 15]
    assert all(a["stats"]["samples"] == a["samples_written"] for a in report["appends"])


def test_a_refused_append_leaves_out_as_it_was(manifests, tmp_path):
    out = str(tmp_path / "out")
    build(manifests["a"], out)
    before = digest(out)
    other_tok = tmp_path / "other.model"
    other_tok.write_bytes(open(ALBERT, "rb").read() + b"\0")
    for extra, message in (
            (["--image-size", "96"], "OUT holds images of 224x224, this build makes 96x96"),
            (["--codec", "jpeg"], "OUT holds image codec raw, this build makes jpeg"),
            (["--compression", "zstd"], "OUT holds compression none, this build makes zstd"),
            (["--max-tokens", "32"], "captions of at most max tokens 77"),
            (["--keep-fields", "license"], "kept fields [], this build makes [license]"),
            (["--tokenizer", "none"], "--tokenizer none would store none"),
            (["--tokenizer", str(other_tok)], "token ids of the tokenizer"),
            (["--overwrite"], "choose one")):
        r = run(MMPACK, "build", manifests["b"], "-o", out, "--append", "--lowercase", *extra)
        assert r.returncode != 0, extra
        assert message in r.stderr, (extra, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert digest(out) == before, extra
    r = run(MMPACK, "build", manifests["a"], "-o", out, "--append", "--lowercase")
    assert r.returncode == 1 and "duplicate_key" in r.stderr  # every key already there
    assert digest(out) == before
    r = run(MMPACK, "build", manifests["a"], "-o", str(tmp_path / "nothere"), "--append")
    assert r.returncode == 1 and "does not exist" in r.stderr
    assert not os.path.exists(str(tmp_path / "nothere"))


def test_append_without_compression_options_takes_outs(manifests, tmp_path):
    # A set built with zstd (the default before issue 30) takes appends from the same command
    # line: no --compression given means OUT's codec and level, not the new default (none).
    out = str(tmp_path / "zstd")
    build(manifests["a"], out, "--compression-level", "3")  # a level alone means zstd
    build(manifests["b"], out, "--append")
    index = json.load(open(os.path.join(out, "index.json")))
    assert index["compression"] == {"codec": "zstd", "level": 3, "hdf5_filter_id": 32015}
    assert run(MMPACK, "verify", out).returncode == 0
    r = run(MMPACK, "build", manifests["c"], "-o", out, "--append", "--lowercase",
            "--compression-level", "1")
    assert r.returncode != 0 and "OUT holds zstd level 3, this build makes 1" in r.stderr


def test_append_to_a_text_only_set(manifests, tmp_path):
    out = str(tmp_path / "text")
    r = run(MMPACK, "build", manifests["a"], "-o", out, "--tokenizer", "none", "-q")
    assert r.returncode == 0, r.stderr
    r = run(MMPACK, "build", manifests["b"], "-o", out, "--append", "-q")
    assert r.returncode == 0, r.stderr
    assert run(MMPACK, "verify", out).returncode == 0
    s = mmpack.ShardSet(out)
    assert len(s) == 36 and len({s.key(i) for i in range(len(s))}) == 36  # images 0..35
