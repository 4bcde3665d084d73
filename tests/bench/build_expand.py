#!/usr/bin/python3
"""Expands coco-cc (51 real COCO photos, 5 captions each) to N distinct JPEGs for the
`mmpack build` benchmark, keeping COCO's size distribution (383-640 px): half the outputs are
full-size re-encodes, half mild random crops (80-100% of each side); each is mirrored with
probability 1/2 and re-encoded at a random JPEG quality 75-95 (seeded), with its photo's captions.

Usage: build_expand.py COCO_DIR OUT_DIR [N=2000] [SEED=2]
Writes OUT_DIR/images/NNNNNN.jpg, OUT_DIR/captions.jsonl (one line per caption, paths relative
to OUT_DIR), OUT_DIR/files.txt (absolute image paths, for the decode floor). Does nothing when
OUT_DIR already holds the same N and SEED (OUT_DIR/expand.json).
"""

import collections
import json
import os
import random
import sys

from PIL import Image


def main():
    coco, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    stamp = os.path.join(out, "expand.json")
    if os.path.exists(stamp) and json.load(open(stamp)) == {"n": n, "seed": seed, "version": 2}:
        return
    captions = collections.OrderedDict()
    with open(os.path.join(coco, "captions.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            captions.setdefault(row["image"], []).append(row["text"])
    photos = [(p, Image.open(os.path.join(coco, p)).convert("RGB")) for p in captions]
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    rng = random.Random(seed)
    with open(os.path.join(out, "captions.jsonl"), "w", encoding="utf-8") as man, \
            open(os.path.join(out, "files.txt"), "w") as files:
        for i in range(n):
            path, im = photos[i % len(photos)]
            w, h = im.size
            if rng.random() < 0.5:
                cw, ch = w, h
            else:
                cw, ch = int(w * rng.uniform(0.8, 1.0)), int(h * rng.uniform(0.8, 1.0))
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            crop = im.crop((x, y, x + cw, y + ch))
            if rng.random() < 0.5:
                crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
            name = "images/%06d.jpg" % i
            crop.save(os.path.join(out, name), quality=rng.randint(75, 95))
            files.write(os.path.abspath(os.path.join(out, name)) + "\n")
            for text in captions[path]:
                man.write(json.dumps({"image": name, "text": text}, ensure_ascii=False) + "\n")
    json.dump({"n": n, "seed": seed, "version": 2}, open(stamp, "w"))


if __name__ == "__main__":
    main()
