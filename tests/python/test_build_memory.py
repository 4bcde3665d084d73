"""mmpack build with its ingest's sorts forced onto disk (issue 13 item 1: flat memory).

The build keeps its samples in unnamed files beside OUT and groups manifest lines, assigns keys
and makes them unique through external sorts (tools/src/ingest/spill.h), each holding at most
a few MiB before it spills a sorted run. MM_SORT_MEMORY=4096 makes every sort spill hundreds
of 4 KiB runs and merge them in two levels, as a manifest of many millions of lines would. The
sets must be byte for byte those of the default build: the same input as test_build_resume.py
(real photos through symlinks, bad samples, lines of one image far apart), every variant, one
process and in parts; a CSV manifest too. Peak memory itself is measured by
tests/bench/build_scale_bench.sh, not here.
"""

import os
import subprocess

import pytest

from build_inputs import VARIANTS, command, digest

TINY = dict(os.environ, MM_SORT_MEMORY="4096")


def build(args, env=None):
    r = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_spilled_sorts_give_the_same_set(build_manifest, build_reference, tmp_path, variant):
    out = tmp_path / "out"
    build(command(build_manifest, out, variant), env=TINY)
    assert digest(out) == build_reference[variant]
    # Nothing of the ingest is left behind: its files were unnamed.
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_spilled_sorts_in_parts_give_the_same_set(build_manifest, build_reference, tmp_path):
    out = tmp_path / "new" / "folders" / "out"  # a part spills beside OUT: its parent is made
    for index in range(2):
        build(command(build_manifest, out, "jpeg", "--part", "%d/2" % index), env=TINY)
    assert digest(out) == build_reference["jpeg"]


def test_csv_manifest_with_far_apart_rows_is_the_same_spilled(build_manifest, tmp_path):
    import json
    rows = [json.loads(l) for l in open(build_manifest) if l.startswith("{\"")]
    # Each image's second caption 200 rows later, as a CSV with quoted fields.
    lines = ["image,caption"]
    for i, r in enumerate(rows):
        lines.append('"%s","%s"' % (r["image"], r["caption"].replace('"', '""')))
        if i >= 200:
            lines.append('"%s","again: %s"' % (rows[i - 200]["image"], rows[i - 200]["caption"]))
    csv = tmp_path / "m.csv"
    csv.write_text("\n".join(lines) + "\n")
    a, b = tmp_path / "a", tmp_path / "b"
    build(command(str(csv), a, "raw_bytes"))
    build(command(str(csv), b, "raw_bytes"), env=TINY)
    assert digest(a) == digest(b)
    report = json.load(open(a / "report.json"))
    # 5 captions an image in coco-cc, and the far-apart "again" rows joined to them.
    assert report["stats"]["captions_per_image"]["max"] > 5
