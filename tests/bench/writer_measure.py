#!/usr/bin/python3
"""writer_bench.sh's measurement: `mmpack build` vs mmpack.Writer on the same samples.

Usage: writer_measure.py BUILD_DIR WORK_DIR SHARED_DIR REPEATS (WORK_DIR/input from
build_expand.py). Prints one line per run and the summary; writes WORK_DIR/writer_bench.json."""

import collections
import json
import os
import shutil
import subprocess
import sys
import time

import mmpack


def samples(manifest):
    """The manifest's samples as `mmpack build` groups them: (image as written, captions)."""
    grouped = collections.OrderedDict()
    base = os.path.dirname(manifest)
    for line in open(manifest, encoding="utf-8"):
        row = json.loads(line)
        grouped.setdefault(row["image"], []).append(row["text"])
    return [(image, os.path.join(base, image), caps) for image, caps in grouped.items()]


def main():
    build, work, shared, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    manifest = os.path.join(work, "input", "captions.jsonl")
    todo = samples(manifest)
    n = len(todo)
    options = dict(threads=2, image_size=224, compression="none", quiet=True,
                   tokenizer=os.path.join(shared, "tokenizers", "albert-30k-clean.model"))
    out = os.path.join(work, "out")

    def fresh():
        shutil.rmtree(out, ignore_errors=True)

    def run_build():
        cmd = [os.path.join(build, "bin", "mmpack"), "build", manifest, "-o", out]
        subprocess.run(cmd + mmpack._build._flag_args(options), check=True)

    def run_writer(as_bytes):
        with mmpack.Writer(out, **options) as w:
            for image, path, caps in todo:
                if as_bytes:
                    with open(path, "rb") as f:
                        w.write(f.read(), caps, source=image)
                else:
                    w.write(path, caps, source=image)

    ways = {"build": run_build, "writer_bytes": lambda: run_writer(True),
            "writer_paths": lambda: run_writer(False)}
    times = {k: [] for k in ways}
    for r in range(repeats):
        for name, fn in ways.items():
            fresh()
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            times[name].append(dt)
            print("run %d %-13s %6.2f s  %7.1f images/s" % (r, name, dt, n / dt), flush=True)
    best = {k: n / min(v) for k, v in times.items()}
    result = {"images": n, "repeats": repeats, "images_per_s": best,
              "ratio_writer_bytes": best["writer_bytes"] / best["build"],
              "ratio_writer_paths": best["writer_paths"] / best["build"], "target": 0.9}
    print("images %d; best of %d: build %.1f images/s, Writer(bytes) %.1f (%.2fx), "
          "Writer(paths) %.1f (%.2fx); target >= 0.9x" %
          (n, repeats, best["build"], best["writer_bytes"], result["ratio_writer_bytes"],
           best["writer_paths"], result["ratio_writer_paths"]))
    with open(os.path.join(work, "writer_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    fresh()


if __name__ == "__main__":
    main()
