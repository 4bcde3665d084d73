"""img2dataset's output read by the real `mmpack build`: WebDataset tars of .jpg + .txt + .json
(made here with Python's tarfile from the real coco-cc photos), the .json fields kept
(--keep-fields), filtered on (--min-score) and used as captions (--caption-field), named by a
brace list; and a Hugging Face imagefolder. The kept values are read back with mmpack.ShardSet
and the drops from report.json.
"""

import io
import json
import os
import tarfile

import pytest

import mmpack
from conftest import ALBERT, DATA_DIR, run, BIN_DIR

MMPACK = os.path.join(BIN_DIR, "mmpack")
PER_TAR = 10


@pytest.fixture(scope="module")
def img2dataset(tmp_path_factory):
    """A folder of 3 tars as img2dataset writes them (000000000.tar, ...; keys %09d), 10 samples
    each: similarity i / 30, sample 7 without a .json, sample 12's .json cut short. Returns
    (folder, {key: metadata dict or None})."""
    root = tmp_path_factory.mktemp("img2dataset")
    src = os.path.join(DATA_DIR, "coco-cc")
    with open(os.path.join(src, "captions.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    images = sorted({r["image"] for r in rows})[:3 * PER_TAR]
    meta = {}
    for t in range(3):
        with tarfile.open(os.path.join(str(root), "%05d.tar" % t), "w") as tar:
            for i in range(t * PER_TAR, (t + 1) * PER_TAR):
                key = "%09d" % i
                tar.add(os.path.join(src, images[i]), arcname=key + ".jpg")
                members = {".txt": ("a photo, number %d" % i).encode()}
                m = {"url": "https://example.com/img/%d.jpg" % i, "caption": "json caption %d" % i,
                     "key": key, "status": "success", "similarity": i / 30,
                     "punsafe": 0.001 * i, "width": 640, "height": 480}
                if i != 7:
                    members[".json"] = (b'{"url": ' if i == 12 else json.dumps(m).encode())
                meta[key] = m if i not in (7, 12) else None
                for ext, data in members.items():
                    info = tarfile.TarInfo(key + ext)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return str(root), meta


def build(args, out):
    r = run(MMPACK, "build", *args, "-o", out, "--tokenizer", ALBERT, "--lowercase",
            "--threads", 2, "--image-size", 64, "-q")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        return json.load(f)


def test_json_fields_are_kept_and_filtered_on(img2dataset, tmp_path):
    folder, meta = img2dataset
    out = str(tmp_path / "set")
    report = build([folder, "--keep-fields", "url,similarity,punsafe",
                    "--min-score", "similarity=0.3"], out)
    ds = mmpack.ShardSet(out)
    assert ds.metadata_fields == ["url", "similarity", "punsafe"]
    want = {k: m for k, m in meta.items() if m is not None and m["similarity"] >= 0.3}
    assert len(ds) == len(want) == 20  # 9..29 without 12
    for i in range(len(ds)):
        sample = ds[i]
        m = want[sample["key"]]
        assert sample["metadata"]["url"] == m["url"]
        assert sample["metadata"]["similarity"] == pytest.approx(m["similarity"])
        assert sample["metadata"]["punsafe"] == pytest.approx(m["punsafe"])
        assert sample["captions"] == ["a photo, number %d" % int(sample["key"])]  # the .txt
    reasons = {}
    for d in report["dropped"]:
        reasons.setdefault(d["reason"], []).append(d["key"])
    assert sorted(reasons.pop("invalid_manifest_line")) == ["000000012"]
    # below the score: 0..8 (7 among them: no .json, so no similarity)
    assert sorted(sum(reasons.values(), [])) == ["%09d" % i for i in range(9)], reasons


def test_caption_field_takes_the_captions_from_the_json(img2dataset, tmp_path):
    folder, meta = img2dataset
    out = str(tmp_path / "set")
    build([folder, "--caption-field", "caption"], out)
    ds = mmpack.ShardSet(out)
    got = {ds[i]["key"]: ds[i]["captions"] for i in range(len(ds))}
    assert got == {k: ["json caption %d" % int(k)] for k, m in meta.items() if m is not None}


def test_a_brace_list_names_the_tars_and_a_missing_one_is_reported(img2dataset, tmp_path):
    folder, _ = img2dataset
    out = str(tmp_path / "set")
    report = build([os.path.join(folder, "{00001..00003}.tar")], out)
    ds = mmpack.ShardSet(out)
    assert len(ds) == 2 * PER_TAR
    assert ds[0]["key"] == "000000010"  # the list's order; keys that do not collide as given
    missing = [d for d in report["dropped"] if d["reason"] == "missing_file"]
    assert [d["source"] for d in missing] == [os.path.join(folder, "00003.tar")]
    r = run(MMPACK, "build", os.path.join(folder, "{00007..00009}.tar"), "-o",
            str(tmp_path / "none"), "--tokenizer", "none", "-q")
    assert r.returncode != 0 and "no file of the brace list" in r.stderr, r.stderr


def test_image_field_is_refused_for_tars(img2dataset, tmp_path):
    folder, _ = img2dataset
    r = run(MMPACK, "build", folder, "-o", str(tmp_path / "set"), "--image-field", "url",
            "--tokenizer", "none", "-q")
    assert r.returncode != 0 and "--image-field reads JSONL/CSV/TSV manifests" in r.stderr, r.stderr


def test_a_hugging_face_imagefolder_is_read_through_its_metadata(tmp_path):
    src = os.path.join(DATA_DIR, "coco-cc")
    with open(os.path.join(src, "captions.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:5]
    folder = tmp_path / "imagefolder"
    (folder / "train").mkdir(parents=True)
    with open(folder / "metadata.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            name = "train/" + os.path.basename(r["image"])
            if not os.path.exists(folder / name):
                os.link(os.path.join(src, r["image"]), folder / name)
            f.write(json.dumps({"file_name": name, "text": r["text"]}) + "\n")
    out = str(tmp_path / "set")
    build([str(folder)], out)
    ds = mmpack.ShardSet(out)
    want = {}
    for r in rows:
        want.setdefault("train/" + os.path.splitext(os.path.basename(r["image"]))[0], []).append(
            r["text"])
    assert {ds[i]["key"]: ds[i]["captions"] for i in range(len(ds))} == want
