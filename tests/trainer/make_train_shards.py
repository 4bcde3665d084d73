#!/usr/bin/env python3
"""ctest fixture for the trainer tests: packs real data from ../shared/data with the real mmpack.

  make_train_shards.py MMPACK SHARED_DIR OUT_DIR

Writes, all at 64x64 pixels with the ALBERT tokenizer (../shared/tokenizers):
  OUT/coco     coco-cc as it is (51 images, 255 captions): the equivalence tests
  OUT/train    about 4 in 5 images of coco-cc, openclipart-pd and skimage-micro (with all
               their captions), OUT/val the rest: a split by image, so no val image or caption
               is seen in training. Which side an image goes to is decided by a hash of its
               path (SHA-1 mod 5 == 0: val), then every category (openclipart's folder, e.g.
               "animals"; coco-cc and skimage-micro are one category each) with at least two
               images is made to have one on each side (its lowest-hash image moved to val, or
               its highest-hash one to train). openclipart's "decorations" has one image only:
               it stays in train.
Manifests (JSONL with absolute image paths) land in OUT/manifests. Idempotent: a set is packed
again only when its manifest changed.
"""
import hashlib
import json
import os
import subprocess
import sys


def category(subset, image):
    name = os.path.basename(image)
    return subset + "/" + name.split("__")[0] if "__" in name else subset


def split(subset, images):
    """{image: True when val} for one subset's images (see the module docstring)."""
    h = {i: hashlib.sha1((subset + "/" + os.path.basename(i)).encode()).hexdigest() for i in images}
    val = {i: int(h[i][:8], 16) % 5 == 0 for i in images}
    by_cat = {}
    for i in images:
        by_cat.setdefault(category(subset, i), []).append(i)
    for members in by_cat.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda i: h[i])
        if not any(val[i] for i in members):
            val[members[0]] = True
        if all(val[i] for i in members):
            val[members[-1]] = False
    return val


def main():
    mmpack, shared, out = sys.argv[1], sys.argv[2], sys.argv[3]
    data = os.path.join(shared, "data")
    tokenizer = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    os.makedirs(os.path.join(out, "manifests"), exist_ok=True)

    def pack(name, manifest, changed=False):
        dst = os.path.join(out, name)
        if os.path.exists(os.path.join(dst, "index.json")) and not changed:
            return
        # Without --lowercase (unlike the README): the trainer's equivalence tolerances (1e-5
        # relative, issue 15) were established on these ids; with --lowercase the 4 x 8 vs
        # 1 x 32 accumulation test measured 1.83e-5 after 10 AdamW steps (fp32 summation
        # order). Open: re-establish the tolerance on the lowercased set.
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
        is_val = split(subset, sorted(groups))
        for image in sorted(groups):
            (val if is_val[image] else train).extend(groups[image])
    for name, recs in (("train", train), ("val", val)):
        path = os.path.join(out, "manifests", name + ".jsonl")
        text = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in recs)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        pack(name, path, changed=old != text)


if __name__ == "__main__":
    main()
