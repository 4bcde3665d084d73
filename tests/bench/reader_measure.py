#!/usr/bin/python3
"""Drives the reader benchmark (see run_reader_bench.sh): prepares the shards, runs the reader
and the baselines one after another on the same cores, prints the figures and the ratios
against the targets of issue 3, and writes WORK/reader_bench.json.

Usage: reader_measure.py BUILD_DIR WORK_DIR SHARED_DIR N SECONDS
"""
import json
import os
import subprocess
import sys


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def build_set(mmpack, manifest, out, tokenizer, stamp):
    stamp_path = os.path.join(out, "bench_stamp.json")
    if os.path.exists(stamp_path) and json.load(open(stamp_path)) == stamp:
        return
    subprocess.run([mmpack, "build", manifest, "-o", out, "--tokenizer", tokenizer,
                    "--lowercase", "--image-size", "224", "-j", "2", "--overwrite", "-q"], check=True)
    json.dump(stamp, open(stamp_path, "w"))


def main():
    build, work, shared, n, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
        float(sys.argv[5])
    here = os.path.dirname(os.path.abspath(__file__))
    mmpack = os.path.join(build, "bin", "mmpack")
    ceiling = os.path.join(build, "bin", "mm_reader_ceiling")
    tokenizer = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    env = dict(os.environ, HDF5_PLUGIN_PATH=os.path.join(build, "hdf5-plugins"))
    os.makedirs(work, exist_ok=True)

    # N distinct 224-px-bound photos (seeded crops/re-encodes of coco-cc), shards of them, and a
    # set of N/10 of them for the memory comparison.
    raw = os.path.join(work, "raw")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), raw, str(n)], check=True)
    manifest = os.path.join(raw, "captions.jsonl")
    small_manifest = os.path.join(raw, "captions_small.jsonl")
    lines = open(manifest, encoding="utf-8").read().splitlines()
    keep, images = [], set()
    for line in lines:
        image = json.loads(line)["image"]
        if image not in images and len(images) >= n // 10:
            continue
        images.add(image)
        keep.append(line)
    open(small_manifest, "w", encoding="utf-8").write("\n".join(keep) + "\n")
    shards = os.path.join(work, "shards")
    small = os.path.join(work, "shards_small")
    build_set(mmpack, manifest, shards, tokenizer, {"n": n})
    build_set(mmpack, small_manifest, small, tokenizer, {"n": n // 10})

    results = {}
    print("reader: mmpack bench, 2 threads, batch 32 ...", flush=True)
    results["reader"] = run_json([mmpack, "bench", shards, "--threads", "2", "--batch-size", "32",
                                  "--seconds", str(seconds), "--json"])
    results["reader_small_set"] = run_json([mmpack, "bench", small, "--threads", "2",
                                            "--batch-size", "32", "--seconds", str(seconds),
                                            "--json"])
    print("(c) zstd tight loop, 2 threads ...", flush=True)
    results["zstd_ceiling"] = run_json([ceiling, "zstd", shards, "2", str(seconds)])
    print("(b) HDF5 H5Dread, 1 thread (HDF5 serialises) ...", flush=True)
    results["h5dread"] = run_json([ceiling, "h5dread", shards, "1", str(seconds)], env=env)
    print("(b) h5py DataLoader, 2 workers ...", flush=True)
    results["h5py_dataloader"] = run_json(["/usr/bin/python3",
                                           os.path.join(here, "reader_h5py_baseline.py"), shards,
                                           str(seconds)], env=env)
    print("(a) PyTorch DataLoader over raw files, 2 workers ...", flush=True)
    results["torch_dataloader"] = run_json(["/usr/bin/python3",
                                            os.path.join(here, "reader_torch_baseline.py"),
                                            manifest, tokenizer, str(max(seconds, 10.0))])

    r = results["reader"]
    sps = r["samples_per_s"]
    ratios = {
        "vs_torch_dataloader": sps / results["torch_dataloader"]["samples_per_s"],
        "vs_h5py_dataloader": sps / results["h5py_dataloader"]["samples_per_s"],
        "vs_h5dread": sps / results["h5dread"]["samples_per_s"],
        "vs_zstd_ceiling": sps / results["zstd_ceiling"]["samples_per_s"],
    }
    results["ratios"] = ratios
    results["set"] = {"samples": n, "small_samples": n // 10}
    json.dump(results, open(os.path.join(work, "reader_bench.json"), "w"), indent=2)

    def line(name, sps_, extra=""):
        print("  %-40s %10.1f samples/s %s" % (name, sps_, extra))

    print("\nreader benchmark: %d samples of 224x224 RGB (coco-cc expanded), %.0f s each" %
          (n, seconds))
    line("reader (mmpack bench, 2 threads)", sps,
         "%.1f MB/s, %.3f CPU-ms/sample, peak anon RSS %.1f MiB" %
         (r["mb_per_s"], r["cpu_ms_per_sample"], r["peak_anon_rss_mb"]))
    rs = results["reader_small_set"]
    line("reader on N/10 samples", rs["samples_per_s"],
         "peak anon RSS %.1f MiB" % rs["peak_anon_rss_mb"])
    line("(a) PyTorch DataLoader, raw files", results["torch_dataloader"]["samples_per_s"])
    line("(b) h5py DataLoader, 2 workers", results["h5py_dataloader"]["samples_per_s"])
    line("(b') H5Dread, 1 thread", results["h5dread"]["samples_per_s"])
    line("(c) zstd tight loop, 2 threads", results["zstd_ceiling"]["samples_per_s"],
         "%.3f CPU-ms/sample" % results["zstd_ceiling"]["cpu_ms_per_sample"])
    checks = [
        ("reader / (a) torch DataLoader", ratios["vs_torch_dataloader"], ">= 20x",
         ratios["vs_torch_dataloader"] >= 20),
        ("reader / (b) h5py DataLoader", ratios["vs_h5py_dataloader"], ">= 3x",
         ratios["vs_h5py_dataloader"] >= 3),
        ("reader / (b') H5Dread 1 thread", ratios["vs_h5dread"], ">= 3x",
         ratios["vs_h5dread"] >= 3),
        ("reader / (c) zstd ceiling", ratios["vs_zstd_ceiling"], ">= 0.7x",
         ratios["vs_zstd_ceiling"] >= 0.7),
        ("CPU ms per sample", r["cpu_ms_per_sample"], "<= 0.3", r["cpu_ms_per_sample"] <= 0.3),
        ("peak anon RSS, N vs N/10 samples (MiB)", r["peak_anon_rss_mb"] - rs["peak_anon_rss_mb"],
         "growth <= 8 MiB", r["peak_anon_rss_mb"] - rs["peak_anon_rss_mb"] <= 8),
    ]
    print()
    for name, value, target, ok in checks:
        print("  %-40s %8.2f   target %-16s %s" % (name, value, target, "ok" if ok else "MISSED"))
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
