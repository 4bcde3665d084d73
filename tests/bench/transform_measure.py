#!/usr/bin/python3
"""The measuring half of transform_bench.sh (see there). Usage:
transform_measure.py BUILD WORK SHARED SECONDS ROUNDS STEP_MS"""

import json
import os
import statistics
import sys
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


def main():
    build, work, shared = sys.argv[1:4]
    seconds, rounds, step_ms = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    sys.path.insert(0, os.path.join(build, "python"))
    os.environ.setdefault("MMPACK_BIN", os.path.join(build, "bin", "mmpack"))
    import torch
    import torchvision.transforms as T
    import mmpack
    torch.set_num_threads(1)  # the 2 threads are the transform's own (transform_threads=2)
    root = os.path.join(work, "coco-224")
    if not os.path.isdir(root):
        mmpack.build(os.path.join(shared, "data", "coco-cc", "captions.jsonl"), root,
                     tokenizer=os.path.join(shared, "tokenizers", "albert-30k-clean.model"),
                     lowercase=True, threads=2, image_size=224, compression="zstd")
    jitter = T.ColorJitter(0.4, 0.4, 0.4)
    ways = {"none": {}, "transform": {"transform": jitter},
            "transform2": {"transform": jitter, "threads": 2}, "inline": {"inline": jitter}}
    times = {w: [] for w in ways}
    times["jitter_alone"] = []  # the jitter's own time per batch, in this thread: the floor
    sample = next(iter(mmpack.Loader(root, 32, as_torch=True)))["images"].permute(0, 3, 1, 2)
    for r in range(rounds):
        t0 = time.perf_counter()
        for _ in range(5):
            jitter(sample)
        times["jitter_alone"].append((time.perf_counter() - t0) * 1000 / 5)
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
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "transform_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("transform_bench: step %.0f ms; loop ms/batch: none %.1f, transform= (1 thread) %.1f, "
          "(transform_threads=2) %.1f, inline %.1f; over none: %.2fx, %.2fx (target <= 1.2x), "
          "inline %.2fx; the jitter alone %.1f ms/batch; load %.1f"
          % (step_ms, med["none"], med["transform"], med["transform2"], med["inline"],
             result["transform_over_none"], result["transform2_over_none"],
             result["inline_over_none"], med["jitter_alone"], result["load"]))
    return 0 if result["transform2_over_none"] <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
