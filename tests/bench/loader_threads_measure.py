#!/usr/bin/python3
"""Drives the loader's thread benchmark (see loader_threads_bench.sh): prepares a stored-JPEG
set and a raw set of N expanded coco-cc photos at 224 px, then times `mmpack bench` (the real
Loader, batch 32, shuffled) at several (threads, prefetch) settings, alternating in rounds so
that load from elsewhere on the machine hits every setting alike. Prints the medians, the
prefetch=1 / prefetch=8 ratio at 2 threads (target >= 0.9, paired per round and of the
medians) and the 2-thread / 1-thread scaling; writes WORK/loader_threads_bench.json; exits 1
when the prefetch target is missed.

Usage: loader_threads_measure.py BUILD_DIR WORK_DIR SHARED_DIR N SECONDS ROUNDS
"""
import json
import os
import statistics
import subprocess
import sys

from reader_measure import run_json

# (threads, prefetch) of each run, and which pairs the figures compare.
SETTINGS = [(2, 1), (2, 8), (1, 8)]
TARGET = 0.9  # prefetch=1 against prefetch=8 at 2 threads
# Each set: `mmpack build` options, then the `mmpack bench` view of it.
SETS = {
    "jpeg": (["--codec", "jpeg", "--image-size", "224"], ["--crop", "rrc", "--size", "224"]),
    "raw": (["--image-size", "224"], []),
}


def build(mmpack, manifest, out, tokenizer, options, n):
    stamp = {"n": n, "options": options, "version": 1}
    stamp_path = os.path.join(out, "bench_stamp.json")
    if os.path.exists(stamp_path) and json.load(open(stamp_path)) == stamp:
        return
    subprocess.run([mmpack, "build", manifest, "-o", out, "--tokenizer", tokenizer, "--lowercase",
                    "-j", "2", "--overwrite", "-q"] + options, check=True)
    json.dump(stamp, open(stamp_path, "w"))


def main():
    build_dir, work, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    n, seconds, rounds = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    here = os.path.dirname(os.path.abspath(__file__))
    mmpack = os.path.join(build_dir, "bin", "mmpack")
    tokenizer = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    os.makedirs(work, exist_ok=True)
    photos = os.path.join(work, "photos")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), photos, str(n)], check=True)
    for name, (options, _) in SETS.items():
        build(mmpack, os.path.join(photos, "captions.jsonl"), os.path.join(work, name), tokenizer,
              options, n)

    nice = os.environ.get("MM_BENCH_NICE", "")
    prefix = ["nice", "-n", nice] if nice else []
    runs = {(name, s): [] for name in SETS for s in SETTINGS}
    for r in range(rounds):
        print("round %d/%d ..." % (r + 1, rounds), flush=True)
        order = SETTINGS[r % len(SETTINGS):] + SETTINGS[:r % len(SETTINGS)]
        for name, (_, view) in SETS.items():
            for threads, prefetch in order:
                runs[(name, (threads, prefetch))].append(run_json(
                    prefix + [mmpack, "bench", os.path.join(work, name), "--trusted", "--json",
                              "--threads", str(threads), "--prefetch", str(prefetch),
                              "--batch-size", "32", "--seconds", str(seconds)] + view))

    def sps(name, setting):
        return [x["samples_per_s"] for x in runs[(name, setting)]]

    figures, missed = {}, False
    print("\nLoader threads benchmark: %d photos at 224 px, batch 32, %.0f s a run, median of %d"
          % (n, seconds, rounds))
    for name in SETS:
        med = {s: statistics.median(sps(name, s)) for s in SETTINGS}
        paired = statistics.median(a / b for a, b in zip(sps(name, (2, 1)), sps(name, (2, 8))))
        f = {"images_per_s": {"threads%d_prefetch%d" % s: med[s] for s in SETTINGS},
             "prefetch1_vs_prefetch8_at_2_threads": med[(2, 1)] / med[(2, 8)],
             "prefetch1_vs_prefetch8_paired": paired,
             "threads2_vs_threads1": med[(2, 8)] / med[(1, 8)]}
        figures[name] = f
        for s in SETTINGS:
            print("  %-4s threads %d prefetch %d  %9.1f images/s  (runs: %s)" % (
                name, s[0], s[1], med[s], ", ".join("%.0f" % v for v in sps(name, s))))
        ok = min(f["prefetch1_vs_prefetch8_at_2_threads"], paired) >= TARGET
        missed |= not ok
        print("  %-4s prefetch 1 / prefetch 8 at 2 threads: %.3f (paired %.3f; target >= %.2f: %s)"
              % (name, f["prefetch1_vs_prefetch8_at_2_threads"], paired, TARGET,
                 "met" if ok else "MISSED"))
        print("  %-4s 2 threads / 1 thread: %.2fx" % (name, f["threads2_vs_threads1"]))
    load = os.getloadavg()
    print("  load average after: %.2f %.2f %.2f (%d CPUs)" % (load + (os.cpu_count(),)))
    json.dump({"figures": figures, "runs": {"%s/%d/%d" % (k[0], *k[1]): v
                                            for k, v in runs.items()},
               "photos": n, "seconds": seconds, "rounds": rounds, "loadavg_after": load,
               "nice": nice or "0"},
              open(os.path.join(work, "loader_threads_bench.json"), "w"), indent=2)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
