#!/usr/bin/python3
"""Driver of the builds-at-scale benchmark; run through tests/bench/build_scale_bench.sh.

Two measurements, each against a baseline taken in the same run on the same cores:

  memory   peak RSS of `mmpack build` (wait4's ru_maxrss) on generated JSONL manifests of
           SIZES lines (default 10000,100000,1000000). Every line names its own image path, one
           caption each; the paths reach the 51 real coco-cc photos through symlinked folders
           (folder k -> coco-cc/images), so only the manifest grows. --compression none,
           --image-size 32, the real ALBERT tokenizer (given: nothing is trained), --threads 2,
           and --samples-per-shard 10000: the writer holds one shard's tables (keys, captions,
           token ids) until the shard closes, and at 3 KB a 32-px sample a 1 GiB shard would
           hold 350,000 samples, so without it the shard, not the manifest, would be measured.
           Prints RSS per size, the ratio to the smallest size, and the bytes a line costs.
           Target: the largest size within 1.2x the smallest.
  parts    N expanded coco-cc photos (build_expand.py): `mmpack build --threads 2` against
           `mpirun -n 2 mmpack build --threads 1 --part auto` (two parts, the last merges): wall time,
           images/s, their ratio, and whether every output file is byte-identical.

           MM_BENCH_FORMATS (default jsonl) adds the same samples as csv, coco and files
           (a folder of pairs) inputs, each measured the same way.

Usage: build_scale_measure.py BUILD_DIR WORK_DIR SHARED_DIR [SIZES=10000,100000,1000000] [N=2000]
Writes WORK_DIR/build_scale_bench.json with every figure.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def run_measured(args, env=None):
    """Runs args; returns (wall_s, cpu_s, max_rss_mb, output) of that process (and children)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    text = out.decode("utf-8", "replace")
    if code != 0:
        raise SystemExit("failed (%d): %s\n%s" % (code, " ".join(args), text[-3000:]))
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, text


def digest(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def make_manifest(work, coco, lines):
    """`lines` lines, each its own image path (through symlinked folders), one caption each."""
    path = os.path.join(work, "manifest_%d.jsonl" % lines)
    if os.path.exists(path):
        return path
    rows = [json.loads(l) for l in open(os.path.join(coco, "captions.jsonl"), encoding="utf-8")]
    images = sorted({r["image"] for r in rows})
    texts = [r["text"].lower() for r in rows]
    links = os.path.join(work, "links")
    os.makedirs(links, exist_ok=True)
    folders = (lines + len(images) - 1) // len(images)
    for k in range(folders):
        link = os.path.join(links, "%06d" % k)
        if not os.path.islink(link):
            os.symlink(os.path.join(coco, "images"), link)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for i in range(lines):
            image = os.path.basename(images[i % len(images)])
            f.write(json.dumps({"image": "links/%06d/%s" % (i // len(images), image),
                                "text": "%s, number %d" % (texts[i % len(texts)], i)}) + "\n")
    os.replace(path + ".tmp", path)
    return path


def as_format(work, manifest, lines, fmt):
    """The JSONL manifest's samples in another input format, written line by line (this process
    must stay small: see main): csv (image,text), coco (annotations[] before images[]), files (a
    folder of symlinked photos beside .txt captions, 1,000 pairs a subfolder)."""
    if fmt == "jsonl":
        return manifest
    path = os.path.join(work, {"csv": "manifest_%d.csv", "coco": "coco_%d.json",
                               "files": "files_%d"}[fmt] % lines)
    if os.path.exists(path):
        return path
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)

    def rows():
        with open(manifest, encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)

    if fmt == "csv":
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("image,text\n")
            for r in rows():
                f.write('%s,"%s"\n' % (r["image"], r["text"].replace('"', '""')))
    elif fmt == "coco":
        with open(tmp, "w", encoding="utf-8") as f:
            f.write('{"annotations": [')
            for i, r in enumerate(rows()):
                entry = {"image_id": i, "caption": r["text"]}
                f.write(("," if i else "") + json.dumps(entry))
            f.write('], "images": [')
            for i, r in enumerate(rows()):
                entry = {"id": i, "file_name": r["image"]}
                f.write(("," if i else "") + json.dumps(entry))
            f.write("]}")
    else:
        for i, r in enumerate(rows()):
            folder = os.path.join(tmp, "%04d" % (i // 1000))
            if i % 1000 == 0:
                os.makedirs(folder)
            os.symlink(os.path.realpath(os.path.join(work, r["image"])),
                       os.path.join(folder, "%07d.jpg" % i))
            with open(os.path.join(folder, "%07d.txt" % i), "w", encoding="utf-8") as f:
                f.write(r["text"])
    os.replace(tmp, path)
    return path


def memory(mmpack, work, coco, model, sizes, fmt="jsonl"):
    figures = []
    for lines in sizes:
        manifest = as_format(work, make_manifest(work, coco, lines), lines, fmt)
        out = os.path.join(work, "out_%d" % lines)
        shutil.rmtree(out, ignore_errors=True)
        wall, cpu, rss, _ = run_measured(
            [mmpack, "build", manifest, "-o", out, "--compression", "none", "--image-size", "32",
             "--samples-per-shard", "10000", "--tokenizer", model, "--lowercase",
             "--threads", "2", "-q"])
        figures.append({"lines": lines, "peak_rss_mb": rss, "wall_s": round(wall, 1),
                        "cpu_s": round(cpu, 1)})
        base = figures[0]
        grows = "" if len(figures) == 1 else "; %+.0f bytes a line more" % (
            (rss - base["peak_rss_mb"]) * 2**20 / (lines - base["lines"]))
        print("memory: %-5s %9d samples  peak RSS %7.1f MB  (%.2fx the %d-sample build%s)  "
              "%.0f s" % (fmt, lines, rss, rss / base["peak_rss_mb"], base["lines"], grows, wall),
              flush=True)
        shutil.rmtree(out, ignore_errors=True)
    ratio = figures[-1]["peak_rss_mb"] / figures[0]["peak_rss_mb"]
    print("memory: %s: %d samples at %.2fx the peak RSS of %d (target <= 1.2x): %s" %
          (fmt, figures[-1]["lines"], ratio, figures[0]["lines"],
           "met" if ratio <= 1.2 else "MISSED"))
    return {"figures": figures, "ratio": ratio}


def parts(mmpack, work, shared, model, n):
    data = os.path.join(work, "expanded")
    subprocess.run([PY, os.path.join(HERE, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), data, str(n)], check=True)
    manifest = os.path.join(data, "captions.jsonl")
    for path in open(os.path.join(data, "files.txt")):  # warm the page cache
        with open(path.strip(), "rb") as f:
            f.read()
    common = [manifest, "--tokenizer", model, "--lowercase", "-q"]
    one, two = os.path.join(work, "one"), os.path.join(work, "two")
    results = {}
    for name, args, out in [
            ("one process, --threads 2", [mmpack, "build"] + common + ["--threads", "2"], one),
            ("mpirun -n 2, --threads 1", ["mpirun", "-n", "2", "--allow-run-as-root",
                                           "--oversubscribe", mmpack, "build"] + common +
             ["--threads", "1", "--part", "auto"], two)]:
        shutil.rmtree(out, ignore_errors=True)
        wall, cpu, _, _ = run_measured(args + ["-o", out])
        results[name] = {"wall_s": round(wall, 2), "images_per_s": round(n / wall, 1),
                         "cpu_s": round(cpu, 1)}
        print("parts: %-26s %6.1f s  %7.1f images/s  CPU %.1f s" % (name, wall, n / wall, cpu),
              flush=True)
    same = digest(one) == digest(two)
    ratio = results["mpirun -n 2, --threads 1"]["images_per_s"] / \
        results["one process, --threads 2"]["images_per_s"]
    print("parts: mpirun -n 2 / one process = %.2fx images/s; output byte-identical: %s" %
          (ratio, "yes" if same else "NO"))
    return {"runs": results, "ratio": ratio, "identical": same}


def main():
    build_dir, work, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    sizes = [int(s) for s in (sys.argv[4] if len(sys.argv) > 4 else
                              "10000,100000,1000000").split(",")]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    mmpack = os.path.join(build_dir, "bin", "mmpack")
    model = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    coco = os.path.join(shared, "data", "coco-cc")
    os.makedirs(work, exist_ok=True)
    # Memory first: a child's ru_maxrss counts what it shares with this process between fork
    # and exec, so this process must stay smaller than the builds it measures.
    formats = os.environ.get("MM_BENCH_FORMATS", "jsonl").split(",")
    result = {"memory": {fmt: memory(mmpack, work, coco, model, sizes, fmt) for fmt in formats}}
    result["parts"] = parts(mmpack, work, shared, model, n) if n > 0 else None
    with open(os.path.join(work, "build_scale_bench.json"), "w") as f:
        json.dump(result, f, indent=2)
    ok = all(m["ratio"] <= 1.2 for m in result["memory"].values()) and \
        (result["parts"] is None or result["parts"]["identical"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
