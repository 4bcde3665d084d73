"""mmpack.Writer against `mmpack build` of the same samples in the same order.

Each real set of ../shared/data is written out as a JSONL manifest with absolute image paths,
kept fields and bad samples among the real ones (a truncated JPEG, a text file named .jpg, an
empty caption, a missing file), then built twice: by `mmpack build MANIFEST` and by a Writer
fed the manifest's samples as the build groups them (an image's lines are its captions, in
first-appearance order), images alternately as bytes and as paths. The shards and the
tokenizer must be the same bytes; index.json and report.json the same but for what names the
input ("input", "input_format")."""

import hashlib
import json
import os
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

from conftest import ALBERT, BIN_DIR, DATA_DIR, PYTHON_DIR, run

import mmpack

MMPACK = os.path.join(BIN_DIR, "mmpack")
SETS = ["coco-cc", "openclipart-pd", "skimage-micro"]
# --codec raw with zstd and small shards (several shards a set); --codec jpeg keep-ratio.
VARIANTS = {
    "raw": {"image_size": 64, "samples_per_shard": 16, "compression": "zstd"},
    "jpeg": {"codec": "jpeg", "resize_mode": "keep-ratio-largest", "max_size": 96,
             "samples_per_shard": 16},
}
KEEP = ["license", "n", "score"]


def make_manifest(root, name):
    """The set's lines with absolute images, kept fields (license: str, n: int, score: float)
    and bad samples at 1/5 .. 4/5 of the lines; returns the manifest's path."""
    data = os.path.join(DATA_DIR, name)
    lines = [json.loads(l) for l in open(os.path.join(data, "captions.jsonl"))]
    out = []
    for n, l in enumerate(lines):
        out.append({"image": os.path.join(data, l["image"]), "text": l["text"],
                    "license": l.get("license"), "n": n, "score": (n % 10) / 10.0})
    first = out[0]["image"]
    truncated = root / "truncated.jpg"
    blob = open(first, "rb").read()
    truncated.write_bytes(blob[: len(blob) // 3])
    text = root / "text.jpg"
    text.write_text("not an image\n")
    bad = [{"image": str(truncated), "text": "a truncated photo", "n": -1, "score": 0.5},
           {"image": str(text), "text": "a text file", "n": -2, "score": 0.5},
           {"image": out[1]["image"].replace(".", "_empty."), "text": "", "n": -3},
           {"image": str(root / "missing.jpg"), "text": "a missing photo", "n": -4,
            "score": 0.9}]
    for k, b in enumerate(bad):
        out.insert((k + 1) * len(out) // 5, b)
    path = root / "captions.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in out))
    return str(path)


def grouped(manifest):
    """The manifest's samples as `mmpack build` makes them: one per image, in order of first
    appearance, its lines' captions in order, the first line's fields."""
    samples = OrderedDict()
    for line in open(manifest):
        l = json.loads(line)
        s = samples.setdefault(l["image"], {"captions": [], "fields": l})
        s["captions"].append(l["text"])
    return list(samples.items())


def flags(options):
    return mmpack._build._flag_args(options)


def digest(folder):
    return {n: hashlib.sha256(open(os.path.join(folder, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(folder)) if n not in ("index.json", "report.json")}


def without_input(doc):
    doc = json.loads(json.dumps(doc))
    doc.pop("input", None)
    doc.pop("input_format", None)
    doc.get("build_options", {}).pop("input_format", None)
    return doc


def write_all(out, manifest, options, image_as):
    """A Writer fed the manifest's samples; image_as(i, path) -> what write() gets."""
    with mmpack.Writer(out, keep_fields=KEEP, **options) as w:
        for i, (image, s) in enumerate(grouped(manifest)):
            meta = {k: s["fields"].get(k) for k in KEEP}
            w.write(image_as(i, image), s["captions"], metadata=meta, source=image)
    return w


def bytes_or_path(i, path):
    if i % 2 == 0 and os.path.exists(path):
        return open(path, "rb").read()
    return path


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", SETS)
def test_writer_shards_equal_build_bytes(tmp_path, name, variant):
    manifest = make_manifest(tmp_path, name)
    options = dict(VARIANTS[variant], tokenizer=ALBERT, threads=2, min_score="score=0.2")
    ref = tmp_path / "ref"
    r = run(MMPACK, "build", manifest, "-o", ref, "--keep-fields", ",".join(KEEP), "-q",
            *flags(options))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    write_all(out, manifest, options, bytes_or_path)
    assert digest(out) == digest(ref)
    assert len([n for n in os.listdir(out) if n.endswith(".h5")]) >= 1
    for doc in ("index.json", "report.json"):
        a, b = (json.load(open(os.path.join(d, doc))) for d in (ref, out))
        assert without_input(a) == without_input(b), doc
    report = json.load(open(os.path.join(out, "report.json")))
    reasons = {d["reason"] for d in report["dropped"]}
    # The bad samples are dropped for what they are, not ignored.
    assert {"missing_file", "empty_caption"} <= reasons, reasons
    assert len(report["dropped"]) >= 5
    index = json.load(open(os.path.join(out, "index.json")))
    assert index["build_options"]["input_format"] == "feed"
    assert sorted(os.listdir(tmp_path)) == ["captions.jsonl", "out", "ref", "text.jpg",
                                            "truncated.jpg"]


def test_writer_trained_tokenizer_equals_build(tmp_path):
    # tokenizer=None: trained at close on every caption, as `mmpack build` trains it.
    manifest = make_manifest(tmp_path, "skimage-micro")
    ref = tmp_path / "ref"
    r = run(MMPACK, "build", manifest, "-o", ref, "--vocab-size", "100", "--image-size", "32",
            "-q")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    with mmpack.Writer(out, image_size=32, vocab_size=100) as w:
        for image, s in grouped(manifest):
            w.write(image, s["captions"])
    assert digest(out) == digest(ref)


def test_writer_paths_keys_and_metadata_read_back(tmp_path):
    data = os.path.join(DATA_DIR, "skimage-micro")
    lines = [json.loads(l) for l in open(os.path.join(data, "captions.jsonl"))]
    with mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none",
                       keep_fields=["n", "tag"]) as w:
        for n, l in enumerate(lines[:4]):
            w.write(os.path.join(data, l["image"]), [l["text"]], key="k%d" % n,
                    metadata={"n": n, "tag": "t%d" % n})
    s = mmpack.ShardSet(tmp_path / "out")
    assert [s.key(i) for i in range(len(s))] == ["k0", "k1", "k2", "k3"]
    assert s.metadata(2) == {"n": 2, "tag": "t2"}
    assert s.source(0) == os.path.join(data, lines[0]["image"])
    assert s.captions(1) == [lines[1]["text"]]


def test_writer_repeated_key_made_unique_as_build_does(tmp_path):
    image = os.path.join(DATA_DIR, "skimage-micro", "images", "camera.png")
    with mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none") as w:
        w.write(image, ["one"], key="a")
        w.write(image, ["two"], key="a")
        w.write(image, ["three"], key="a#2")
    s = mmpack.ShardSet(tmp_path / "out")
    # Build's rule (ingest/keys.h MakeKeysUnique): the first keeps it, later ones get the
    # smallest "#n" no sample uses.
    assert [s.key(i) for i in range(len(s))] == ["a", "a#3", "a#2"]


def test_writer_pixels_equal_the_decoded_image(tmp_path):
    # An array cannot be a JPEG's bytes; written at the set's own size, its pixels are stored
    # as they are (no resize, raw codec): the decoded images of a built set come back equal.
    ref = tmp_path / "ref"
    mmpack.build(os.path.join(DATA_DIR, "coco-cc", "captions.jsonl"), ref, image_size=48,
                 tokenizer="none", threads=2)
    src = mmpack.ShardSet(ref)
    n = min(6, len(src))
    with mmpack.Writer(tmp_path / "out", image_size=48, tokenizer="none") as w:
        for i in range(n):
            pixels = src.image(i)  # numpy uint8 [48, 48, 3]
            if i % 2:  # any [H, W, 3] uint8 buffer, and a non-contiguous view
                pixels = memoryview(pixels.tobytes()).cast("B", pixels.shape)
            else:
                pixels = np.ascontiguousarray(pixels[:, ::-1, :])[:, ::-1, :]
            w.write(pixels, src.captions(i), key=src.key(i))
    out = mmpack.ShardSet(tmp_path / "out")
    assert len(out) == n
    for i in range(n):
        assert np.array_equal(out.image(i), src.image(i)), i
        assert out.key(i) == src.key(i)


def test_writer_bad_pixels_and_types_are_refused(tmp_path):
    with mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none") as w:
        with pytest.raises(ValueError, match=r"\[H, W, 3\] uint8"):
            w.write(np.zeros((8, 8, 4), np.uint8), ["x"])
        with pytest.raises(ValueError, match=r"\[H, W, 3\] uint8"):
            w.write(np.zeros((8, 8, 3), np.float32), ["x"])
        with pytest.raises(TypeError, match="image"):
            w.write(12, ["x"])
        with pytest.raises(ValueError, match="not kept"):
            w.write(b"x", ["x"], metadata={"url": "u"})
        w.write(os.path.join(DATA_DIR, "skimage-micro", "images", "camera.png"), ["ok"])
    assert len(mmpack.ShardSet(tmp_path / "out")) == 1


def test_writer_bad_option_fails_before_any_sample(tmp_path):
    with pytest.raises(mmpack.BuildError, match="codec"):
        mmpack.Writer(tmp_path / "a", codec="png")
    with pytest.raises(ValueError, match="resume"):
        mmpack.Writer(tmp_path / "b", resume=True)
    (tmp_path / "c").mkdir()
    with pytest.raises(mmpack.BuildError, match="already exists"):
        mmpack.Writer(tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_writer_write_after_close_raises(tmp_path):
    w = mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none")
    w.write(os.path.join(DATA_DIR, "skimage-micro", "images", "camera.png"), ["a camera"])
    index = w.close()
    assert sum(s["samples"] for s in index["shards"]) == 1
    assert w.closed and w.close() == index
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x", ["x"])


def test_writer_that_raises_publishes_nothing(tmp_path):
    image = os.path.join(DATA_DIR, "skimage-micro", "images", "camera.png")
    with pytest.raises(RuntimeError):
        with mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none") as w:
            w.write(image, ["a camera"])
            raise RuntimeError("the program failed")
    assert sorted(os.listdir(tmp_path)) == []


def test_writer_with_no_usable_sample_fails(tmp_path):
    with pytest.raises(mmpack.BuildError, match="no usable sample"):
        with mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none") as w:
            w.write(b"not an image", [""])
    assert not (tmp_path / "out").exists()


def test_feed_cut_short_is_refused_by_the_build(tmp_path):
    # The compiler's side: a stream without its end record (a writer killed) publishes nothing.
    r = run_input(tmp_path, b"MMFEED1\nS")
    assert r.returncode != 0 and b"end record" in r.stderr, r.stderr
    r = run_input(tmp_path, b"GARBAGE!")
    assert r.returncode != 0 and b"MMFEED1" in r.stderr, r.stderr
    assert sorted(n for n in os.listdir(tmp_path)) == []


def run_input(tmp_path, data):
    return subprocess.run([MMPACK, "build", "-", "--input-format", "feed", "-o",
                           str(tmp_path / "out"), "--tokenizer", "none"], input=data,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def test_feed_needs_stdin_and_one_process(tmp_path):
    r = run(MMPACK, "build", "x.jsonl", "--input-format", "feed", "-o", tmp_path / "o")
    assert r.returncode != 0 and "'-'" in r.stderr
    r = run(MMPACK, "build", "-", "--input-format", "feed", "--part", "0/2", "-o", tmp_path / "o")
    assert r.returncode != 0 and "once" in r.stderr


def test_writer_killed_leaves_what_the_next_writer_replaces(tmp_path):
    # A compiler killed mid-stream (SIGKILL: nothing of it runs) leaves its staging and spooled
    # bytes; the next Writer to the same OUT replaces both and publishes only its own samples.
    image = os.path.join(DATA_DIR, "skimage-micro", "images", "camera.png")
    blob = open(image, "rb").read()
    w = mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none")
    w.write(blob, ["first"], key="gone")
    w._proc.stdin.flush()
    w._proc.kill()
    with pytest.raises(mmpack.BuildError):
        w.close()
    assert (tmp_path / "out.mmpack-feed").is_dir()
    with mmpack.Writer(tmp_path / "out", image_size=32, tokenizer="none") as w2:
        w2.write(blob, ["second"], key="kept")
    s = mmpack.ShardSet(tmp_path / "out")
    assert [s.key(i) for i in range(len(s))] == ["kept"]
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_writer_appends_as_build_append_does(tmp_path):
    # append=True: new shards after OUT's, a key OUT holds dropped as duplicate_key; the same
    # shards as `mmpack build --append` of the same samples.
    folder = os.path.join(DATA_DIR, "skimage-micro", "images")
    images = [os.path.join(folder, n) for n in sorted(os.listdir(folder))][:5]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps({"image": p, "text": "c %d" % i}) + "\n"
                             for i, p in enumerate(images[:3])))
    second.write_text("".join(json.dumps({"image": p, "text": "d %d" % i}) + "\n"
                              for i, p in enumerate(images[2:])))
    common = ["--image-size", "32", "--tokenizer", "none", "--samples-per-shard", "2", "-q"]
    for out in ("ref", "out"):
        r = run(MMPACK, "build", first, "-o", tmp_path / out, *common)
        assert r.returncode == 0, r.stderr
    r = run(MMPACK, "build", second, "-o", tmp_path / "ref", "--append", *common)
    assert r.returncode == 0, r.stderr
    with mmpack.Writer(tmp_path / "out", append=True, image_size=32, tokenizer="none",
                       samples_per_shard=2) as w:
        for i, p in enumerate(images[2:]):
            w.write(p, ["d %d" % i])
    assert digest(tmp_path / "out") == digest(tmp_path / "ref")
    s = mmpack.ShardSet(tmp_path / "out")
    assert len(s) == 5
    report = json.load(open(tmp_path / "out" / "report.json"))
    assert [d["reason"] for d in report["dropped"]] == ["duplicate_key"]


def test_writer_imports_no_torch(tmp_path):
    # The Writer is for data pipelines that may not have torch: it imports neither torch nor
    # the compiler (a subprocess), in a fresh interpreter.
    image = os.path.join(DATA_DIR, "skimage-micro", "images", "camera.png")
    code = ("import sys, mmpack\n"
            "with mmpack.Writer(sys.argv[1], image_size=32, tokenizer='none') as w:\n"
            "    w.write(sys.argv[2], ['a camera'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out"), image],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert r.returncode == 0, r.stderr
    assert "torch" not in r.stdout, r.stdout
    assert len(mmpack.ShardSet(tmp_path / "out")) == 1
