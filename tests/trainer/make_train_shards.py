#!/usr/bin/env python3
"""ctest fixture for the trainer tests: packs real data from ../shared/data with the real mmpack.

  make_train_shards.py MMPACK SHARED_DIR OUT_DIR

Writes, all at 64x64 pixels with the ALBERT tokenizer (../shared/tokenizers):
  OUT/coco     coco-cc as it is (51 images, 255 captions): the equivalence tests
  OUT/train    4 of every 5 images of coco-cc, openclipart-pd and skimage-micro (with all
               their captions), OUT/val the 5th image of each group of 5: a split by image, so
               no val image or caption is seen in training.
Manifests (JSONL with absolute image paths) land in OUT/manifests. Idempotent: a set whose
index.json exists is kept.
"""
import json
import os
import subprocess
import sys


def main():
    mmpack, shared, out = sys.argv[1], sys.argv[2], sys.argv[3]
    data = os.path.join(shared, "data")
    tokenizer = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    os.makedirs(os.path.join(out, "manifests"), exist_ok=True)

    def pack(name, manifest):
        dst = os.path.join(out, name)
        if os.path.exists(os.path.join(dst, "index.json")):
            return
        cmd = [mmpack, "build", manifest, "-o", dst, "--overwrite", "--image-size", "64",
               "--tokenizer", tokenizer, "--max-tokens", "32", "-j", "2", "-q"]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)

    pack("coco", os.path.join(data, "coco-cc", "captions.jsonl"))

    train, val = [], []
    for subset in ("coco-cc", "openclipart-pd", "skimage-micro"):
        groups = {}
        with open(os.path.join(data, subset, "captions.jsonl"), encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                rec = json.loads(line)
                rec["image"] = os.path.join(data, subset, rec["image"])
                groups.setdefault(rec["image"], []).append(rec)
        for i, image in enumerate(sorted(groups)):
            (val if i % 5 == 4 else train).extend(groups[image])
    for name, recs in (("train", train), ("val", val)):
        path = os.path.join(out, "manifests", name + ".jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for rec in recs:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        pack(name, path)


if __name__ == "__main__":
    main()
