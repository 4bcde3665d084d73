#!/usr/bin/python3
"""Baseline (a) of the `mmpack build` benchmark: the Python way, with Debian's packages.

Per sample: Pillow open + convert('RGB') + torchvision Resize((224, 224)) + sentencepiece
encode of each caption, in a 2-process multiprocessing.Pool. Workers return only sizes (no
pixels cross the process boundary), so this is the cheapest form of the Python way; the pool
is started and warmed up before the clock starts.

Usage: build_python_way.py MANIFEST.jsonl TOKENIZER.model [PROCESSES=2]
Prints one JSON object: images, captions, wall_s, images_per_s, cpu_ms_per_image (the work
itself: process CPU time around each sample in the workers), worker_cpu_s_incl_startup
(getrusage of the children: imports, model load, pickling included).
"""

import collections
import json
import multiprocessing
import os
import resource
import sys
import time

_sp = None
_resize = None


def _init(model):
    global _sp, _resize
    import sentencepiece as spm
    import torch
    import torchvision.transforms as T
    torch.set_num_threads(1)
    _sp = spm.SentencePieceProcessor(model_file=model)
    _resize = T.Resize((224, 224))


def _work(item):
    from PIL import Image
    path, captions = item
    cpu0 = time.process_time()
    with Image.open(path) as im:
        img = _resize(im.convert("RGB"))
    ids = [_sp.encode(c) for c in captions]
    return img.size[0] * img.size[1], sum(len(i) for i in ids), time.process_time() - cpu0


def main():
    manifest, model = sys.argv[1], sys.argv[2]
    processes = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    root = os.path.dirname(os.path.abspath(manifest))
    samples = collections.OrderedDict()
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            samples.setdefault(os.path.join(root, row["image"]), []).append(row["text"])
    items = list(samples.items())
    with multiprocessing.Pool(processes, initializer=_init, initargs=(model,)) as pool:
        pool.map(_work, items[:processes * 2], chunksize=1)  # warm up: imports, model load
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        done = list(pool.imap_unordered(_work, items, chunksize=8))
        wall = time.monotonic() - t0
        pool.close()
        pool.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert len(done) == len(items) and all(px == 224 * 224 for px, _, _ in done)
    work_cpu = sum(c for _, _, c in done)
    print(json.dumps({"images": len(items), "captions": sum(len(c) for _, c in items),
                      "wall_s": round(wall, 3), "images_per_s": round(len(items) / wall, 1),
                      "cpu_ms_per_image": round(1e3 * work_cpu / len(items), 3),
                      "worker_cpu_s_incl_startup": round(cpu, 3)}))


if __name__ == "__main__":
    main()
