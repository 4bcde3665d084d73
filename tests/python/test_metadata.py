"""Kept manifest fields (`mmpack build --keep-fields`, issue 14 item 3): stored per sample as
metadata/<name> in each shard, typed per shard column (schemas/FORMAT.md "Kept fields"), read
back through h5py, mmpack.ShardSet and `mmpack show`, checked by `mmpack verify`.

The manifest is the real coco-cc captions.jsonl (51 photos, 255 captions) with fields added per
line: its own "license" text, a float "similarity", an int "width", a "sparse" float that only
some images have, a "mixed" field that is an integer for most images and a string for one, and
"absent", which no line has. Expected values are computed here from the manifest (the first line
of each image gives its fields), independently of mmpack.
"""

import json
import math
import os
import subprocess

import h5py
import numpy as np
import pytest

import mmpack
from conftest import ALBERT, BIN_DIR, DATA_DIR
from h5ref import reseal

COCO = os.path.join(DATA_DIR, "coco-cc")
FIELDS = ["license", "similarity", "width", "sparse", "mixed", "absent"]
PER_SHARD = 16  # 51 samples: shards of 16, 16, 16, 3


def mmpack_cli(*args):
    return subprocess.run([os.path.join(BIN_DIR, "mmpack")] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def write_manifest(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def coco_rows():
    """The real manifest's lines, images made absolute, with the added fields."""
    rows, seen = [], {}
    with open(os.path.join(COCO, "captions.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            row["image"] = os.path.join(COCO, row["image"])
            n = seen.setdefault(row["image"], len(seen))
            row["similarity"] = 0.25 + n / 1000
            row["width"] = 100 + n
            if n % 3 == 0:
                row["sparse"] = n / 7
            row["mixed"] = "forty-two" if n == 40 else n
            rows.append(row)
    return rows


def expected_samples(rows):
    """Per image, in first-appearance order: the fields of its first line."""
    first = {}
    for row in rows:
        first.setdefault(row["image"], row)
    return list(first.values())


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("metadata")
    manifest = str(tmp / "manifest.jsonl")
    rows = coco_rows()
    write_manifest(manifest, rows)
    out = str(tmp / "set")
    r = mmpack_cli("build", manifest, "-o", out, "--tokenizer", ALBERT, "--lowercase",
                   "--threads", 2, "--samples-per-shard", PER_SHARD,
                   "--keep-fields", ",".join(FIELDS))
    assert r.returncode == 0, r.stderr
    return out, expected_samples(rows), r.stderr


def test_index_lists_the_kept_fields_and_the_build_notes_the_absent_one(kept):
    out, samples, stderr = kept
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    assert index["metadata"] == {"fields": FIELDS}
    assert index["totals"]["samples"] == len(samples) == 51
    notes = [l for l in stderr.splitlines() if "kept field" in l]
    assert notes == ["mmpack build: note: kept field 'absent' has no value in any sample"]


def test_h5py_reads_each_column_with_its_type_per_shard(kept):
    out, samples, _ = kept
    with open(os.path.join(out, "index.json")) as f:
        shards = [s["file"] for s in json.load(f)["shards"]]
    assert len(shards) == 4
    row = 0
    for k, name in enumerate(shards):
        with h5py.File(os.path.join(out, name), "r") as f:
            group = f["metadata"]
            assert sorted(group.keys()) == sorted(FIELDS)
            n = len(f["keys"])
            want = samples[row:row + n]
            row += n
            assert group["license"].dtype.kind == "O"  # variable-length UTF-8 strings
            assert [v.decode() for v in group["license"][()]] == [s["license"] for s in want]
            assert group["similarity"].dtype == np.dtype("<f8")
            assert group["similarity"][()].tolist() == [s["similarity"] for s in want]
            assert group["width"].dtype == np.dtype("<i8")
            assert group["width"][()].tolist() == [s["width"] for s in want]
            # Missing values of a numeric column: float64 NaN.
            assert group["sparse"].dtype == np.dtype("<f8")
            for got, s in zip(group["sparse"][()], want):
                if "sparse" in s:
                    assert got == s["sparse"]
                else:
                    assert math.isnan(got)
            # "mixed" is an int column, except in the shard holding image 40 (a string): there
            # every value is text.
            if row - n <= 40 < row:
                assert group["mixed"].dtype.kind == "O"
                assert [v.decode() for v in group["mixed"][()]] == [str(s["mixed"]) for s in want]
            else:
                assert group["mixed"].dtype == np.dtype("<i8")
                assert group["mixed"][()].tolist() == [s["mixed"] for s in want]
            assert group["absent"].dtype == np.dtype("<f8")
            assert np.isnan(group["absent"][()]).all()
    assert row == len(samples)


def test_shard_set_returns_each_samples_fields(kept):
    out, samples, _ = kept
    ds = mmpack.ShardSet(out)
    assert ds.metadata_fields == FIELDS
    for i, s in enumerate(samples):
        got = ds[i]["metadata"]
        assert list(got) == FIELDS
        assert got["license"] == s["license"]
        assert got["similarity"] == s["similarity"]
        assert got["width"] == s["width"] and isinstance(got["width"], int)
        assert got["sparse"] == s["sparse"] if "sparse" in s else math.isnan(got["sparse"])
        assert got["mixed"] == (str(s["mixed"]) if 32 <= i < 48 else s["mixed"])
        assert math.isnan(got["absent"])
        again = ds.metadata(i)
        assert list(again) == FIELDS
        assert all(again[k] == got[k] for k in FIELDS if k not in ("sparse", "absent"))


def test_show_prints_the_fields_and_verify_and_info_accept_the_set(kept, tmp_path):
    out, samples, _ = kept
    r = mmpack_cli("show", out, 40, "-o", tmp_path / "s.png")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "metadata license: " + samples[40]["license"] in lines
    assert "metadata similarity: %r" % samples[40]["similarity"] in lines
    assert "metadata width: 140" in lines
    assert "metadata mixed: forty-two" in lines
    assert "metadata absent: nan" in lines
    r = mmpack_cli("verify", out)
    assert r.returncode == 0, r.stdout + r.stderr
    r = mmpack_cli("info", out)
    assert "kept fields:  " + ", ".join(FIELDS) in r.stdout


def test_a_set_without_kept_fields_has_no_metadata_group(coco):
    ds = mmpack.ShardSet(coco)
    assert ds.metadata_fields == [] and ds[0]["metadata"] == {}
    with h5py.File(os.path.join(coco, "shard-000000.h5"), "r") as f:
        assert "metadata" not in f


def test_values_that_cannot_be_stored_drop_their_sample(tmp_path):
    rows = coco_rows()[:15]  # three images, five lines each
    images = list(dict.fromkeys(r["image"] for r in rows))
    for r in rows:
        if r["image"] == images[1]:
            r["license"] = "nul \u0000 inside"
    write_manifest(tmp_path / "m.jsonl", rows)
    r = mmpack_cli("build", tmp_path / "m.jsonl", "-o", tmp_path / "out", "--tokenizer", ALBERT,
                   "--lowercase", "--keep-fields", "license", "-q")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out" / "report.json") as f:
        report = json.load(f)
    assert report["dropped_by_reason"] == {"nul_in_field": 1}
    assert report["dropped"][0]["source"] == images[1]
    assert "license" in report["dropped"][0]["detail"]
    assert len(mmpack.ShardSet(str(tmp_path / "out"))) == 2


@pytest.mark.parametrize("fields", ["a/b", "..", "ok,ok", "x" * 129])
def test_bad_field_names_are_refused_with_one_line(tmp_path, fields):
    r = mmpack_cli("build", os.path.join(COCO, "captions.jsonl"), "-o", tmp_path / "o",
                   "--tokenizer", ALBERT, "--keep-fields", fields)
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "--keep-fields" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "o")


def test_keep_fields_needs_a_manifest(tmp_path):
    r = mmpack_cli("build", os.path.join(COCO, "captions_coco.json"), "-o", tmp_path / "o",
                   "--tokenizer", ALBERT, "--keep-fields", "license")
    assert r.returncode != 0 and "--keep-fields" in r.stderr, r.stderr


def test_threads_do_not_change_the_bytes(tmp_path):
    rows = coco_rows()
    write_manifest(tmp_path / "m.jsonl", rows)
    digests = []
    for threads in (1, 2):
        out = tmp_path / ("t%d" % threads)
        r = mmpack_cli("build", tmp_path / "m.jsonl", "-o", out, "--tokenizer", ALBERT,
                       "--lowercase", "--threads", threads, "--samples-per-shard", PER_SHARD,
                       "--keep-fields", ",".join(FIELDS), "-q")
        assert r.returncode == 0, r.stderr
        digests.append({n: open(out / n, "rb").read() for n in sorted(os.listdir(out))
                        if n.endswith(".h5")})
    assert digests[0] == digests[1]


@pytest.mark.parametrize("damage,message", [
    ("delete", "holds 5 links"),
    ("short", "metadata/width' is not [16]"),
    ("soft_link", "is a soft link"),
    ("unlisted", "index.json lists no kept field"),
])
def test_verify_refuses_a_damaged_metadata_group(kept, tmp_path, damage, message):
    src, _, _ = kept
    out = tmp_path / "set"
    subprocess.run(["cp", "-r", src, str(out)], check=True)
    with h5py.File(out / "shard-000000.h5", "a") as f:
        if damage == "delete":
            del f["metadata/width"]
        elif damage == "short":
            del f["metadata/width"]
            f["metadata"].create_dataset("width", data=np.arange(15, dtype="<i8"))
        elif damage == "soft_link":
            del f["metadata/width"]
            f["metadata/width"] = h5py.SoftLink("/tokens")
    if damage == "unlisted":
        with open(out / "index.json") as f:
            idx = json.load(f)
        del idx["metadata"]
        with open(out / "index.json", "w") as f:
            json.dump(idx, f)
    reseal(str(out))
    r = mmpack_cli("verify", out)
    assert r.returncode == 1, r.stdout
    assert message in r.stdout + r.stderr, r.stdout + r.stderr


def test_csv_cells_are_typed_as_read_csv_types_them(tmp_path):
    images = sorted(os.listdir(os.path.join(COCO, "images")))[:3]
    with open(tmp_path / "m.csv", "w", encoding="utf-8") as f:
        f.write("image,caption,score,id,note\n")
        for n, (image, score, ident, note) in enumerate(
                zip(images, ["0.5", "", "7"], ["00123", "4", "-5"], ["a, quoted", "", "x"])):
            f.write('%s,a photo %d,%s,%s,"%s"\n' % (os.path.join(COCO, "images", image), n,
                                                     score, ident, note))
    r = mmpack_cli("build", tmp_path / "m.csv", "-o", tmp_path / "out", "--tokenizer", ALBERT,
                   "--lowercase", "--keep-fields", "score,id,note", "-q")
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "out" / "shard-000000.h5", "r") as f:
        score = f["metadata/score"][()]
        assert score.dtype == np.dtype("<f8") and score[0] == 0.5 and math.isnan(score[1])
        assert score[2] == 7.0
        assert f["metadata/id"].dtype == np.dtype("<i8")
        assert f["metadata/id"][()].tolist() == [123, 4, -5]
        assert [v.decode() for v in f["metadata/note"][()]] == ["a, quoted", "", "x"]
    ds = mmpack.ShardSet(str(tmp_path / "out"))
    assert ds[0]["metadata"] == {"score": 0.5, "id": 123, "note": "a, quoted"}


def test_integers_past_int64_are_stored_exactly(tmp_path):
    """64-bit hashes and ids of img2dataset metadata: 18446744073709551615 was
    stored as float64 1.8446744073709552e+19 without a word. Now a column of integers >= 0 with
    one past 2^63 is uint64; beside a gap or a negative integer it is the digits, never a
    rounded float; an int64 past 2^53 beside a gap is the digits too."""
    images = sorted(os.listdir(os.path.join(COCO, "images")))[:4]
    big = [2**64 - 1, 2**63, 5, 2**63 + 12345]
    rows = []
    for n, image in enumerate(images):
        row = {"image": os.path.join(COCO, "images", image), "caption": "a photo %d" % n,
               "hash": big[n],                                 # uint64 column
               "gappy": big[n] if n != 2 else None,            # a gap: strings
               "signed": big[n] if n != 1 else -1,             # negative beside 2^64-1: strings
               "int53": 2**53 + 1 + n if n != 0 else None}     # int64 past 2^53 with a gap
        rows.append(row)
    write_manifest(tmp_path / "m.jsonl", rows)
    with open(tmp_path / "m.csv", "w", encoding="utf-8") as f:
        f.write("image,caption,hash\n")
        for row in rows:
            f.write("%s,%s,%d\n" % (row["image"], row["caption"], row["hash"]))
    fields = "hash,gappy,signed,int53"
    for manifest, keep in ((tmp_path / "m.jsonl", fields), (tmp_path / "m.csv", "hash")):
        out = tmp_path / ("out_" + manifest.suffix[1:])
        r = mmpack_cli("build", manifest, "-o", out, "--tokenizer", ALBERT, "--lowercase",
                       "--keep-fields", keep, "-q")
        assert r.returncode == 0, r.stderr
        assert mmpack_cli("verify", out).returncode == 0
        with h5py.File(out / "shard-000000.h5", "r") as f:
            assert f["metadata/hash"].dtype == np.dtype("<u8")
            assert [int(v) for v in f["metadata/hash"][()]] == big
            if keep == fields:
                texts = lambda name: [v.decode() for v in f["metadata/" + name][()]]
                assert texts("gappy") == [str(v) if v is not None else "" for v in
                                          (r_["gappy"] for r_ in rows)]
                assert texts("signed") == [str(r_["signed"]) for r_ in rows]
                assert texts("int53") == ["", str(2**53 + 2), str(2**53 + 3), str(2**53 + 4)]
        ds = mmpack.ShardSet(str(out))
        assert [ds[i]["metadata"]["hash"] for i in range(len(ds))] == big
        show = mmpack_cli("show", out, 0, "-o", tmp_path / "x.png")
        assert show.returncode == 0 and str(big[0]) in show.stdout, show.stdout + show.stderr
