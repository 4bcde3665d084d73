#!/usr/bin/python3
"""Drives the Python-module benchmark (see python_bench.sh): prepares the shards, then measures
on the same cores, one after another: the C++ reader (`mmpack bench`), the same loader from a
Python loop (python_loader_bench.py: mmpack.Loader, as_torch=True) and h5py through a PyTorch
DataLoader with 2 workers (reader_h5py_baseline.py). The C++ and Python runs alternate (in
turn first), ROUNDS times each, and the medians are compared, so that load from elsewhere on
the machine hits both alike. Prints the figures and the ratios against issue 11's targets; writes
WORK/python_bench.json; exits 1 if a target is missed.

Usage: python_measure.py BUILD_DIR WORK_DIR SHARED_DIR N SECONDS ROUNDS
"""
import json
import os
import statistics
import subprocess
import sys

from reader_measure import build_set, run_json


def main():
    build, work, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    n, seconds, rounds = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    here = os.path.dirname(os.path.abspath(__file__))
    mmpack = os.path.join(build, "bin", "mmpack")
    tokenizer = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    os.makedirs(work, exist_ok=True)

    raw = os.path.join(work, "raw")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), raw, str(n)], check=True)
    shards = os.path.join(work, "shards")
    build_set(mmpack, os.path.join(raw, "captions.jsonl"), shards, tokenizer, {"n": n})

    py_env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    py_env.pop("HDF5_PLUGIN_PATH", None)
    h5_env = dict(os.environ, HDF5_PLUGIN_PATH=os.path.join(build, "hdf5-plugins"))
    def run_cxx():
        cxx.append(measure([mmpack, "bench", shards, "--threads", "2", "--batch-size", "32",
                             "--seconds", str(seconds), "--json"]))

    def run_py():
        py.append(measure(["/usr/bin/python3", os.path.join(here, "python_loader_bench.py"),
                            shards, str(seconds)], env=py_env))

    # MM_BENCH_NICE=-15 (as root) runs the measured readers ahead of whatever else the shared
    # machine runs, so that both see nearly quiet cores; the figures say which was used.
    nice = os.environ.get("MM_BENCH_NICE", "")
    prefix = ["nice", "-n", nice] if nice else []

    def measure(cmd, env=None):
        return run_json(prefix + cmd, env)

    cxx, py = [], []
    for r in range(rounds):  # the order alternates, so that neither always runs first
        print("round %d/%d ..." % (r + 1, rounds), flush=True)
        for run in ((run_cxx, run_py) if r % 2 == 0 else (run_py, run_cxx)):
            run()
    print("h5py Dataset in a DataLoader, 2 workers ...", flush=True)
    h5 = measure(["/usr/bin/python3", os.path.join(here, "reader_h5py_baseline.py"), shards,
                   str(max(seconds, 10.0))], env=h5_env)

    def median(runs, key):
        return statistics.median(x[key] for x in runs)

    c_sps, p_sps = median(cxx, "samples_per_s"), median(py, "samples_per_s")
    c_cpu, p_cpu = median(cxx, "cpu_ms_per_sample"), median(py, "cpu_ms_per_sample")
    # Each round's Python run against the C++ run beside it: load from elsewhere on the machine
    # drifts over the benchmark, and a pair taken seconds apart shares most of it.
    paired = [p["samples_per_s"] / c["samples_per_s"] for c, p in zip(cxx, py)]
    ratios = {"python_vs_cxx": p_sps / c_sps, "python_vs_cxx_paired": statistics.median(paired),
              "python_vs_h5py": p_sps / h5["samples_per_s"], "cpu_python_vs_cxx": p_cpu / c_cpu}
    load = os.getloadavg()
    results = {"cxx": cxx, "python": py, "h5py_dataloader": h5, "ratios": ratios,
               "set": {"samples": n}, "loadavg_after": load, "nice": nice or "0"}
    json.dump(results, open(os.path.join(work, "python_bench.json"), "w"), indent=2)

    print("\nPython module benchmark: %d samples of 224x224 RGB (coco-cc expanded), batch 32, "
          "2 decode threads, %.0f s a run, median of %d" % (n, seconds, rounds))
    print("  %-36s %10.1f samples/s  %.3f CPU-ms/sample  (runs: %s)" % (
        "C++ reader (mmpack bench)", c_sps, c_cpu,
        ", ".join("%.0f" % x["samples_per_s"] for x in cxx)))
    print("  %-36s %10.1f samples/s  %.3f CPU-ms/sample  (runs: %s)" % (
        "Python loop, mmpack.Loader, as_torch", p_sps, p_cpu,
        ", ".join("%.0f" % x["samples_per_s"] for x in py)))
    print("  %-36s %10.1f samples/s" % ("h5py Dataset, DataLoader 2 workers", h5["samples_per_s"]))
    print("  %-36s %s" % ("Python / C++ per round", ", ".join("%.2f" % r for r in paired)))
    checks = [
        ("Python / C++ samples/s, medians", ratios["python_vs_cxx"], ">= 0.9x",
         ratios["python_vs_cxx"] >= 0.9),
        ("Python / C++ samples/s, paired", ratios["python_vs_cxx_paired"], ">= 0.9x",
         ratios["python_vs_cxx_paired"] >= 0.9),
        ("Python / h5py DataLoader samples/s", ratios["python_vs_h5py"], ">= 10x",
         ratios["python_vs_h5py"] >= 10),
        ("Python / C++ CPU-ms per sample", ratios["cpu_python_vs_cxx"], "<= 1.2x",
         ratios["cpu_python_vs_cxx"] <= 1.2),
    ]
    print()
    for name, value, target, ok in checks:
        print("  %-36s %8.2f   target %-10s %s" % (name, value, target, "ok" if ok else "MISSED"))
    print("  load average after the run: %.2f %.2f %.2f; readers run at nice %s" %
          (load + (nice or "0",)))
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
