#!/usr/bin/python3
"""The measuring half of transform_bench.sh (see there). Usage:
transform_measure.py BUILD WORK SHARED SECONDS ROUNDS STEP_MS"""

import json
import os
import shutil
import statistics
import sys
import threading
import time


def loop_ms_per_batch(mmpack, root, seconds, step_s, transform=None, inline=None, threads=1):
    """The mean loop time per batch (ms) over `seconds` of wall time after one warm-up batch."""
    loader = mmpack.Loader(root, 32, num_threads=2, seed=1, drop_last=False, as_torch=True,
                           transform=transform, transform_threads=threads)
    epoch, batches = 0, 0
    it = iter(loader)
    next(it)
    t0 = time.perf_counter()
    while True:
        for batch in it:
            images = batch["images"]
            if inline is not None:
                images = inline(images.permute(0, 3, 1, 2))
            time.sleep(step_s)  # the step: the GPU computes, this thread waits without the GIL
            batches += 1
            if time.perf_counter() - t0 >= seconds:
                loader.close()
                return (time.perf_counter() - t0) * 1000 / batches
        epoch += 1
        loader.set_epoch(epoch)
        it = iter(loader)


def parallel_ms_per_batch(fn, sample, threads, batches):
    """Wall ms per batch of `fn` run on `threads` Python threads at once, each on its own copy of
    `sample`, `batches` each: the most this machine can give the transform (its cores and its
    memory bandwidth together), whatever schedules it."""
    copies = [sample.clone() for _ in range(threads)]
    workers = [threading.Thread(target=lambda x=x: [fn(x) for _ in range(batches)])
               for x in copies]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return (time.perf_counter() - t0) * 1000 / (threads * batches)


COPIES = 20  # coco-cc's 51 images 20 times: 1,020 samples, 32 batches an epoch


def copies_manifest(shared, folder):
    """A JSONL manifest of COPIES copies of coco-cc (each image copied under COPIES names, its
    captions kept), so that an epoch is 32 batches: a loop of 2-batch epochs measures the refill
    of the transform threads at every epoch's start, which a real epoch of thousands of batches
    pays once."""
    src = os.path.join(shared, "data", "coco-cc")
    manifest = os.path.join(folder, "captions.jsonl")
    if os.path.exists(manifest):
        return manifest
    os.makedirs(os.path.join(folder, "images"), exist_ok=True)
    with open(os.path.join(src, "captions.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(manifest + ".tmp", "w") as out:
        for k in range(COPIES):
            for row in rows:
                name = "c%02d_%s" % (k, os.path.basename(row["image"]))
                path = os.path.join(folder, "images", name)
                if not os.path.exists(path):
                    shutil.copyfile(os.path.join(src, row["image"]), path)
                out.write(json.dumps({"image": "images/" + name, "text": row["text"]}) + "\n")
    os.replace(manifest + ".tmp", manifest)
    return manifest


def main():
    build, work, shared = sys.argv[1:4]
    seconds, rounds, step_ms = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    sys.path.insert(0, os.path.join(build, "python"))
    os.environ.setdefault("MMPACK_BIN", os.path.join(build, "bin", "mmpack"))
    import torch
    import torchvision.transforms as T
    import mmpack
    torch.set_num_threads(1)  # the 2 threads are the transform's own (transform_threads=2)
    root = os.path.join(work, "coco-224-x%d" % COPIES)
    if not os.path.isdir(root):
        mmpack.build(copies_manifest(shared, os.path.join(work, "coco-x%d" % COPIES)), root,
                     tokenizer=os.path.join(shared, "tokenizers", "albert-30k-clean.model"),
                     lowercase=True, threads=2, image_size=224, compression="zstd")
    jitter = T.ColorJitter(0.4, 0.4, 0.4)
    ways = {"none": {}, "transform": {"transform": jitter},
            "transform2": {"transform": jitter, "threads": 2}, "inline": {"inline": jitter}}
    times = {w: [] for w in ways}
    times["jitter_alone"] = []  # the jitter's own time per batch, in this thread
    times["jitter_2threads"] = []  # wall per batch of the jitter on 2 threads at once, nothing else
    sample = next(iter(mmpack.Loader(root, 32, as_torch=True)))["images"].permute(0, 3, 1, 2)
    for r in range(rounds):
        t0 = time.perf_counter()
        for _ in range(5):
            jitter(sample)
        times["jitter_alone"].append((time.perf_counter() - t0) * 1000 / 5)
        times["jitter_2threads"].append(parallel_ms_per_batch(jitter, sample, 2, 5))
        order = list(ways)[r % len(ways):] + list(ways)[:r % len(ways)]
        for w in order:
            times[w].append(loop_ms_per_batch(mmpack, root, seconds, step_ms / 1000, **ways[w]))
            print("round %d %-9s %.1f ms/batch" % (r, w, times[w][-1]), flush=True)
    med = {w: statistics.median(t) for w, t in times.items()}
    result = {"step_ms": step_ms, "batch": 32, "loader_threads": 2, "torch_threads": 1,
              "ms_per_batch": med, "runs": times,
              "transform_over_none": med["transform"] / med["none"],
              "transform2_over_none": med["transform2"] / med["none"],
              "inline_over_none": med["inline"] / med["none"], "load": os.getloadavg()[0]}
    # The floor of a loop whose transform runs on 2 threads: the step, or the jitter's own
    # throughput on 2 threads on this machine when that is slower (the loader's own CPU not even
    # counted). Above 1.2x this floor is the mechanism's cost; below it, the machine's.
    result["floor_ms_per_batch"] = max(step_ms, med["jitter_2threads"])
    result["floor_over_none"] = result["floor_ms_per_batch"] / med["none"]
    result["transform2_over_floor"] = med["transform2"] / result["floor_ms_per_batch"]
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "transform_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("transform_bench: step %.0f ms; loop ms/batch: none %.1f, transform= (1 thread) %.1f, "
          "(transform_threads=2) %.1f, inline %.1f; over none: %.2fx, %.2fx (target <= 1.2x), "
          "inline %.2fx; the jitter alone %.1f ms/batch, on 2 threads at once %.1f ms/batch; the "
          "floor of the 2-thread loop max(step, that) %.1f ms/batch = %.2fx none, and the "
          "2-thread loop is %.2fx that floor; load %.1f"
          % (step_ms, med["none"], med["transform"], med["transform2"], med["inline"],
             result["transform_over_none"], result["transform2_over_none"],
             result["inline_over_none"], med["jitter_alone"], med["jitter_2threads"],
             result["floor_ms_per_batch"], result["floor_over_none"],
             result["transform2_over_floor"], result["load"]))
    return 0 if result["transform2_over_none"] <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
