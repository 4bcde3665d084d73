#!/usr/bin/python3
"""The Python side of the Python-module benchmark (python_bench.sh): a training-loop-shaped
Python loop over mmpack.Loader with `mmpack bench`'s options (batch 32, 2 decode threads,
shuffled, seed 1, drop_last False), as_torch=True. After one warm-up batch, times SECONDS of
wall time and prints one JSON object, measured as tools/src/commands/bench.cc measures the C++
reader:
  samples_per_s      samples the loop received per second;
  cpu_ms_per_sample  process CPU time (user + system, all threads: the decode threads and the
                     Python loop) per sample, from getrusage(RUSAGE_SELF);
  peak_anon_rss_mb   the highest RssAnon of /proc/self/status, sampled every 32 batches (MiB).

Usage: PYTHONPATH=BUILD/python python_loader_bench.py SET_DIR SECONDS [BATCH=32] [THREADS=2]
"""
import json
import resource
import sys
import time

import torch  # noqa: F401  (as a training script has it; as_torch needs it)

import mmpack


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def rss_anon_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return -1.0


def main():
    root, seconds = sys.argv[1], float(sys.argv[2])
    batch_size = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    loader = mmpack.Loader(root, batch_size, num_threads=threads, shuffle=True, seed=1,
                           drop_last=False, as_torch=True)
    epoch = 0
    it = iter(loader)
    next(it)  # warm-up: threads started, first buffers allocated
    peak = rss_anon_mb()
    samples, batches, elapsed = 0, 0, 0.0
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    while elapsed < seconds:
        for batch in it:
            samples += batch["images"].shape[0]
            batches += 1
            if batches % 32 == 0:
                peak = max(peak, rss_anon_mb())
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        else:
            epoch += 1
            loader.set_epoch(epoch)
            it = iter(loader)
    cpu = cpu_seconds() - cpu0
    print(json.dumps({"samples_per_s": samples / elapsed,
                      "cpu_ms_per_sample": cpu * 1e3 / samples, "peak_anon_rss_mb": peak,
                      "samples": samples, "seconds": elapsed, "threads": threads,
                      "batch_size": batch_size, "set_samples": len(loader.dataset)}))


if __name__ == "__main__":
    main()
