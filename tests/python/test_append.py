"""`mmpack build NEW -o OUT --append`: NEW's samples added to the existing set
OUT as new shards. Checked on real coco-cc photos split into overlapping manifests: the appended
set verifies, holds every key once, and each sample's pixels and token ids equal those of one
build of the whole manifest; OUT's own shards are kept (the same inodes, nothing copied); a
refused append leaves OUT byte for byte as it was."""

import hashlib
import json
import os
import shutil
import sys

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


def copies_manifest(manifests, root):
    """Lines of manifest "a" whose images are other paths to the same bytes (new keys), then
    lines of 10 images OUT (built from "a") does not hold."""
    root.mkdir()
    lines = [json.loads(l) for l in open(manifests["a"])]
    out = []
    for line in lines:
        link = root / os.path.basename(line["image"])
        if not link.exists():
            os.symlink(line["image"], link)
        out.append(dict(line, image=str(link)))
    fresh = [json.loads(l) for l in open(manifests["all"])][100:150]
    path = root / "copies.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in out + fresh))
    return str(path)


@pytest.mark.parametrize("mode", ["exact", "near"])
@pytest.mark.parametrize("codec", [[], ["--codec", "jpeg", "--resize-mode", "keep-ratio-largest",
                                        "--max-size", "96"]])
def test_append_with_dedup_drops_copies_of_images_out_holds(manifests, tmp_path, mode, codec):
    """--append --dedup compared the new samples with each other only: a copy of an image OUT
    holds was appended again while index.json said the set was deduplicated."""
    out = str(tmp_path / "out")
    build(manifests["a"], out, "--dedup", mode, *codec)  # 20 images
    r = build(copies_manifest(manifests, tmp_path / "copies"), out, "--append", "--dedup", mode,
              *codec)
    assert "duplicate_exact 20" in r.stderr, r.stderr
    report = json.load(open(os.path.join(out, "report.json")))
    drops = [d for d in report["dropped"] if d["reason"] == "duplicate_exact"]
    assert len(drops) == 20 and all(d["detail"].endswith(" of OUT") for d in drops), drops[:2]
    s = mmpack.ShardSet(out)
    assert len(s) == 30
    hashes = [hashlib.sha256(s.image(i).tobytes()).hexdigest() for i in range(len(s))]
    assert len(set(hashes)) == 30  # no two samples with the same pixels
    index = json.load(open(os.path.join(out, "index.json")))
    assert index["build_options"]["dedup"] == mode
    assert run(MMPACK, "verify", out).returncode == 0


def test_an_append_without_dedup_no_longer_claims_the_set_is_deduplicated(manifests, tmp_path):
    out = str(tmp_path / "out")
    build(manifests["a"], out, "--dedup", "exact")
    build(copies_manifest(manifests, tmp_path / "copies"), out, "--append")
    index = json.load(open(os.path.join(out, "index.json")))
    assert index["build_options"]["dedup"] == "off"


def test_an_unreadable_report_refuses_the_append_and_leaves_out_unchanged(manifests, tmp_path):
    """A report.json that does not parse (or was over 256 MiB) was taken for an empty one: the
    append replaced it with a report of its own samples only, exit 0."""
    out = str(tmp_path / "out")
    build(manifests["a"], out)
    with open(os.path.join(out, "report.json"), "w") as f:
        f.write('{"samples_seen": 100, "dropped": [{"source": "x"')  # cut short
    before = digest(out)
    r = run(MMPACK, "build", manifests["b"], "-o", out, "--append", "--lowercase", "-q")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "report.json is not a report" in lines[0], r.stderr
    assert "OUT is unchanged" in lines[0]
    assert digest(out) == before


def peak_rss_kib(*args):
    """Runs `args` as the only child of a fresh Python process; returns (returncode, stdout,
    stderr, the child's peak RSS in KiB)."""
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
             "sys.stdout.buffer.write(p.stdout)\n"
             "sys.stderr.buffer.write(p.stderr)\n"
             "sys.stderr.write('\\nRSS %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN)"
             ".ru_maxrss)\n"
             "sys.exit(p.returncode)\n")
    r = run(sys.executable, "-c", probe, *args)
    err, rss = r.stderr.rsplit("\nRSS ", 1)
    return r.returncode, r.stdout, err, int(rss)


def test_a_report_over_256_mib_is_merged_and_read_streaming(manifests, tmp_path):
    """An OUT report.json over 256 MiB (about 1.6 M drop records) was dropped by --append, and
    `mmpack stats` held a report in 5-8 times its size. Both now stream it:
    the appended report holds every old record, and neither process comes near the report's
    size in memory."""
    out, small = str(tmp_path / "out"), str(tmp_path / "small")
    build(manifests["a"], out)
    shutil.copytree(out, small)  # the same set with its own small report: the baseline
    path = os.path.join(out, "report.json")
    report = json.load(open(path))
    records = 1_700_000
    with open(path, "w") as f:  # the same report, with 1.7 M dropped records before its own
        f.write("{\n")
        for key, value in report.items():
            if key == "dropped":
                f.write('  "dropped": [\n')
                record = ('    {"source": "/data/raw/%%07d.jpg", "key": "%%07d", '
                          '"reason": "corrupt_image", "detail": "%s"},\n' % ("x" * 60))
                for n in range(records):
                    f.write(record % (n, n))
                f.write("".join("    %s,\n" % json.dumps(d) for d in value).rstrip(",\n") or
                        '    {"source": "s", "key": "k", "reason": "r", "detail": "d"}')
                f.write("\n  ],\n")
            else:
                f.write("  %s: %s,\n" % (json.dumps(key), json.dumps(value)))
        f.write('  "end": true\n}\n')
    size = os.path.getsize(path)
    assert size > 256 << 20
    old_dropped = records + max(len(report["dropped"]), 1)
    # Peak memory against the same command on the small report: what the large one adds.
    for command in (["stats"], ["build", manifests["b"], "--append", "--lowercase", "-q", "-o"]):
        rss = {}
        for name, folder in (("small", small), ("large", out)):
            rc, _, err, rss[name] = peak_rss_kib(MMPACK, *command, folder)
            assert rc == 0, err
        added = (rss["large"] - rss["small"]) * 1024
        assert added < size / 10, "%s held %d KiB more for a %d-byte report" % (
            command[0], added // 1024, size)
    # Read back line by line (a json.load here would cost this process gigabytes): the layout
    # is nlohmann's dump(2), one top-level member a line at indent 2, list entries at indent 4.
    members, entries, first_key = {}, 0, None
    section = None
    with open(path) as f:
        for line in f:
            if line.startswith('  "'):
                section = line.split('"')[1]
                members[section] = line.split(": ", 1)[1].rstrip(",\n")
            elif section == "dropped" and line.rstrip("\n") == "    {":
                entries += 1
            elif section == "dropped" and first_key is None and line.startswith('      "key"'):
                first_key = line.split('"')[3]
    appended = json.load(open(os.path.join(out, "index.json")))["build_options"]["appends"]
    assert appended == 1
    assert entries == old_dropped + 2  # then b's own drops: images 18 and 19, keys OUT holds
    assert first_key == "0000000" and members["end"] == "true"
    assert members["samples_written"] == "36"
