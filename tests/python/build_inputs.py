"""Inputs and checks shared by the tests of builds that are interrupted or split in parts
(test_build_resume.py, test_build_parts.py).

The input is the real coco-cc photos, each reached through 6 symlinks (6 samples of the same
pixels, side by side, so --dedup exact drops 5 of 6 all through the build), with bad samples
mixed in: a missing file, a truncated JPEG, a text file named .jpg, a line that is not JSON and
an empty caption. The tokenizer is trained by the build (not given), so it must be made once
and reused. One shard holds 3 samples, so the build writes dozens of shards."""

import hashlib
import json
import os
import signal
import subprocess
import time

from conftest import BIN_DIR, DATA_DIR, run

MMPACK = os.path.join(BIN_DIR, "mmpack")
COCO = os.path.join(DATA_DIR, "coco-cc")
COPIES = 6

# (name, build options): a raw zstd set with --dedup exact and 3 samples a shard, a keep-ratio
# jpeg set with 3 samples a shard, and a raw zstd set whose shards close by bytes (about 3
# samples of 130-150 KB each in 450 KB; zstd, so that samples differ in size), so that a shard
# ends before a sample that does not fit.
VARIANTS = {
    "raw_dedup": ["--dedup", "exact", "--image-size", "224", "--samples-per-shard", "3",
                  "--compression", "zstd"],
    "jpeg": ["--codec", "jpeg", "--resize-mode", "keep-ratio-largest", "--max-size", "256",
             "--samples-per-shard", "3"],
    "raw_bytes": ["--image-size", "224", "--shard-size", "450000", "--compression", "zstd"],
}


def make_manifest(root):
    """Writes the input under `root` (a pathlib.Path); returns the manifest's path."""
    lines = [json.loads(l) for l in open(os.path.join(COCO, "captions.jsonl"))]
    images = sorted({l["image"] for l in lines})
    for copy in range(COPIES):
        folder = root / ("copy%d" % copy)
        folder.mkdir()
        for image in images:
            os.symlink(os.path.join(COCO, image), folder / os.path.basename(image))
    # Copies of one photo next to each other, so that --dedup drops all through the build.
    out = [{"image": str(root / ("copy%d" % copy) / os.path.basename(l["image"])),
            "caption": "%s (copy %d)" % (l["text"].lower(), copy)}
           for l in lines for copy in range(COPIES)]
    # Bad samples, spread through the input (at 1/5 .. 4/5: in every part of 3).
    truncated = root / "truncated.jpg"
    first = open(os.path.join(COCO, images[0]), "rb").read()
    truncated.write_bytes(first[: len(first) // 3])
    text = root / "text.jpg"
    text.write_text("not an image\n")
    bad = [{"image": str(root / "missing.jpg"), "caption": "a missing photo"},
           {"image": str(truncated), "caption": "a truncated photo"},
           {"image": str(text), "caption": "a text file"},
           {"image": str(root / "copy0" / os.path.basename(images[1])), "caption": ""}]
    text_lines = [json.dumps(l) for l in out]
    for k, b in enumerate(bad):
        text_lines.insert((k + 1) * len(text_lines) // 5, json.dumps(b))
    text_lines.insert(len(text_lines) // 2, "{not json")
    path = root / "captions.jsonl"
    path.write_text("\n".join(text_lines) + "\n")
    return str(path)


def command(manifest, out, variant, *extra, threads=2):
    return [MMPACK, "build", manifest, "-o", str(out), "--vocab-size", "300",
            "--threads", str(threads), *VARIANTS[variant], *extra]


def digest(folder):
    """{relative path: sha256} of every file under `folder`."""
    out = {}
    for root, _, files in os.walk(folder):
        for n in files:
            path = os.path.join(root, n)
            out[os.path.relpath(path, folder)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


def reference_build(manifest, folder, variant):
    """The uninterrupted one-process build of `variant` into `folder`, checked to hold the drops
    the input was made for; returns its digest."""
    r = run(*command(manifest, folder, variant))
    assert r.returncode == 0, r.stderr
    report = json.load(open(os.path.join(str(folder), "report.json")))
    reasons = report["dropped_by_reason"]
    for reason in ["missing_file", "truncated_image", "unsupported_format",
                   "invalid_manifest_line"]:
        assert reasons[reason] == 1, reasons
    assert report["dropped_captions_by_reason"] == {"empty_caption": 1}
    if variant == "raw_dedup":
        assert reasons["duplicate_exact"] == 51 * (COPIES - 1)
    index = json.load(open(os.path.join(str(folder), "index.json")))
    assert len(index["shards"]) >= 17
    if variant == "raw_bytes":  # shards closed by bytes, not all of one sample count
        assert len({s["samples"] for s in index["shards"][:-1]}) > 1 or \
            all(s["bytes"] <= 450000 + 300000 for s in index["shards"])
    return digest(folder)


def start_and_kill(args, when, sig=signal.SIGKILL):
    """Starts `args` and sends it `sig` once when() is true; it must still be running then
    (else the kill proves nothing). Returns its stderr."""
    p = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not when() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert p.poll() is None, "it ended before the kill point: " + p.stderr.read()
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -sig
    return err
