#!/usr/bin/env python3
"""tests/gpu/pack.py: the image sets of the GPU check, made where `mmpack build` cannot run (the
GPU machine has no libvips or sentencepiece): h5py writes mmpack shards (schemas/FORMAT.md).

  tokens    (here, prep.sh) the token ids of every caption of a captions.jsonl under a
            SentencePiece model, and the model's SHA-256 and special ids -> tokens.json
  variants  a throughput corpus from a folder of photos: R variants of each photo (a random
            crop of 85-100% of the frame, JPEG q85-95, random.Random(1234)), as
            barslib/make_perfset.py makes them; the PIL DataLoader of the check reads these files
  set       an mmpack set from such a folder: --codec jpeg (format 2: keep-ratio-largest, longer
            side <= --max-size, Lanczos, baseline 4:2:0 JPEG q90) or --codec raw (format 1,
            [N,S,S,3] uint8 after a Lanczos resize of the shorter side and a centre crop); the
            captions' token ids from tokens.json; --repeat K writes every sample K times (other
            keys) so an epoch is long
Learned from ../shared/gpu-check/pack_py.py, whose sets `mmpack verify` accepts and whose tables
equal mmpack's own on the 51 coco-cc photos.
"""
import argparse
import collections
import hashlib
import io
import json
import multiprocessing
import os
import random
import shutil
import sys
import time

import numpy as np
from PIL import Image


def log(*a):
    print("pack:", *a, flush=True)


# --- tokens -----------------------------------------------------------------------------------

def make_tokens(a):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
    caps = sorted({json.loads(l)["text"] for l in open(a.captions, encoding="utf-8")})
    bos, eos, unk, pad = sp.bos_id(), sp.eos_id(), sp.unk_id(), sp.pad_id()
    table = {}
    for c in caps:
        ids = list(sp.encode(c.lower() if a.lowercase else c))
        ids = ([bos] if bos >= 0 else []) + ids + ([eos] if eos >= 0 else [])
        table[c] = ids[: a.max_tokens]
    doc = {"tokenizer_sha256": hashlib.sha256(open(a.tokenizer, "rb").read()).hexdigest(),
           "vocab_size": sp.get_piece_size(), "pad_id": pad if pad >= 0 else unk, "unk_id": unk,
           "bos_id": bos, "eos_id": eos, "max_tokens": a.max_tokens, "lowercase": a.lowercase,
           "captions": table}
    with open(a.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    log("tokens: %d captions -> %s" % (len(table), a.out))


# --- variants ---------------------------------------------------------------------------------

def _write_variant(job):
    src, out, box, quality = job
    Image.open(src).convert("RGB").crop(box).save(out, "JPEG", quality=quality)


def make_variants(a):
    os.makedirs(os.path.join(a.out, "images"), exist_ok=True)
    by = collections.OrderedDict()
    for l in open(os.path.join(a.src, "captions.jsonl"), encoding="utf-8"):
        r = json.loads(l)
        by.setdefault(r["image"], []).append(r["text"])
    sizes = {img: Image.open(os.path.join(a.src, img)).size for img in by}
    rng = random.Random(1234)
    jobs, rows = [], []
    for r in range(a.per_photo):
        for img, caps in by.items():
            w, h = sizes[img]
            s = rng.uniform(0.85, 1.0)
            cw, ch = int(w * s), int(h * s)
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            name = "images/r%03d_%s" % (r, os.path.basename(img))
            jobs.append((os.path.join(a.src, img), os.path.join(a.out, name),
                         (x, y, x + cw, y + ch), rng.randint(85, 95)))
            rows.extend({"image": name, "text": c} for c in caps)
    t0 = time.time()
    with multiprocessing.Pool(a.procs) as pool:
        for _ in pool.imap_unordered(_write_variant, jobs, chunksize=8):
            pass
    with open(os.path.join(a.out, "captions.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    log("variants: %d images in %.1f s -> %s" % (len(jobs), time.time() - t0, a.out))


# --- a set ------------------------------------------------------------------------------------

def _encode(job):
    """(path, codec, size, max_size, quality) -> (payload, w, h, orig_w, orig_h)"""
    path, codec, size, max_size, quality = job
    im = Image.open(path)
    im.load()
    im = im.convert("RGB")
    ow, oh = im.size
    if codec == "raw":
        s = size / min(ow, oh)
        nw, nh = max(size, round(ow * s)), max(size, round(oh * s))
        im = im.resize((nw, nh), Image.LANCZOS)
        x, y = (nw - size) // 2, (nh - size) // 2
        return im.crop((x, y, x + size, y + size)).tobytes(), size, size, ow, oh
    s = min(1.0, max_size / max(ow, oh))
    nw, nh = max(1, round(ow * s)), max(1, round(oh * s))
    if (nw, nh) != (ow, oh):
        im = im.resize((nw, nh), Image.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality, subsampling=2, optimize=False)
    return buf.getvalue(), nw, nh, ow, oh


def xxh3_64_file(path):
    """XXH3-64 of a file as 16 hex digits (index.json's per-shard checksum): the xxhash module,
    else libxxhash through ctypes (MM_LIBXXHASH: the one tests/gpu/deps.sh carries)."""
    data = open(path, "rb").read()
    try:
        import xxhash
        return xxhash.xxh3_64(data).hexdigest()
    except ImportError:
        pass
    import ctypes
    import ctypes.util
    for name in (os.environ.get("MM_LIBXXHASH", ""), "libxxhash.so.0",
                 ctypes.util.find_library("xxhash") or ""):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        sys.exit("pack: no xxhash module and no libxxhash.so.0 (set MM_LIBXXHASH)")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return "%016x" % lib.XXH3_64bits(data, len(data))


def _dataset(f, name, data, dtype):
    try:
        return f.create_dataset(name, data=data, dtype=dtype, track_times=False,
                                fill_time="never")
    except TypeError:  # an h5py without fill_time
        return f.create_dataset(name, data=data, dtype=dtype, track_times=False)


def write_shard(path, index, samples, payloads, a):
    import h5py
    n = len(samples)
    captions = [c for s in samples for c in s["captions"]]
    toks = [t for s in samples for t in s["tokens"]]
    side = a.max_size if a.codec == "jpeg" else a.image_size
    with h5py.File(path + ".tmp", "w", libver=("earliest", "v110")) as f:
        at = f.attrs
        at["format"] = "mmpack-shard"
        at.create("format_version", np.int32(2 if a.codec == "jpeg" else 1))
        at.create("shard_index", np.int64(index))
        at.create("num_samples", np.int64(n))
        at.create("num_captions", np.int64(len(captions)))
        at.create("image_height", np.int32(side))
        at.create("image_width", np.int32(side))
        at["resize_mode"] = "keep-ratio-largest" if a.codec == "jpeg" else "center-crop"
        at["compression"] = "none"
        at["tokenizer_sha256"] = a.tok["tokenizer_sha256"]
        if a.codec == "jpeg":
            at["image_codec"] = "jpeg"
            at.create("jpeg_quality", np.int32(a.quality))
            at.create("max_size", np.int32(a.max_size))
            offs = np.zeros(n + 1, dtype="<i8")
            offs[1:] = np.cumsum([len(p[0]) for p in payloads])
            _dataset(f, "image_bytes", np.frombuffer(b"".join(p[0] for p in payloads), np.uint8),
                     "u1")
            _dataset(f, "image_offsets", offs, "<i8")
            _dataset(f, "image_size", np.array([[p[1], p[2]] for p in payloads], "<i4"), "<i4")
        else:
            s = a.image_size
            kw = dict(shape=(n, s, s, 3), maxshape=(None, s, s, 3), chunks=(1, s, s, 3),
                      dtype="u1", track_times=False)
            try:
                ds = f.create_dataset("images", fill_time="never", **kw)
            except TypeError:
                ds = f.create_dataset("images", **kw)
            for i, p in enumerate(payloads):
                ds.id.write_direct_chunk((i, 0, 0, 0), p[0])
        klen = max(1, max(len(s["key"].encode()) for s in samples))
        kdt = h5py.string_dtype("utf-8", klen)
        _dataset(f, "keys", np.array([s["key"].encode() for s in samples], dtype=kdt), kdt)
        vstr = h5py.string_dtype("utf-8")
        _dataset(f, "sources", np.array([s["source"] for s in samples], dtype=object), vstr)
        _dataset(f, "original_size", np.array([[p[3], p[4]] for p in payloads], "<i4"), "<i4")
        _dataset(f, "valid_box", np.array([[0, 0, p[1], p[2]] for p in payloads], "<i4"), "<i4")
        co = np.zeros(n + 1, "<i8")
        co[1:] = np.cumsum([len(s["captions"]) for s in samples])
        _dataset(f, "caption_offsets", co, "<i8")
        _dataset(f, "captions", np.array(captions, dtype=object), vstr)
        to = np.zeros(len(toks) + 1, "<i8")
        to[1:] = np.cumsum([len(t) for t in toks])
        _dataset(f, "token_offsets", to, "<i8")
        flat = np.array([i for t in toks for i in t], dtype="<i4")
        _dataset(f, "tokens", flat, "<i4")
    os.replace(path + ".tmp", path)
    return {"file": os.path.basename(path), "samples": n, "captions": len(captions),
            "tokens": int(flat.size), "bytes": os.path.getsize(path),
            "xxh3_64": xxh3_64_file(path)}


def make_set(a):
    t0 = time.time()
    a.tok = json.load(open(a.tokens))
    table = a.tok["captions"]
    by = collections.OrderedDict()
    for l in open(os.path.join(a.variants, "captions.jsonl"), encoding="utf-8"):
        r = json.loads(l)
        by.setdefault(r["image"], []).append(r["text"])
    images = list(by)
    jobs = [(os.path.join(a.variants, img), a.codec, a.image_size, a.max_size, a.quality)
            for img in images]
    with multiprocessing.Pool(a.procs) as pool:
        payloads = pool.map(_encode, jobs, chunksize=8)
    missing = [c for caps in by.values() for c in caps if c not in table]
    if missing:
        sys.exit("pack: %d captions have no token ids in %s (first: %r): rerun prep.sh"
                 % (len(missing), a.tokens, missing[0]))
    base = [{"key": os.path.splitext(img)[0], "source": img, "captions": by[img],
             "tokens": [table[c] for c in by[img]]} for img in images]
    samples, pays = [], []
    for k in range(a.repeat):
        for s, p in zip(base, payloads):
            samples.append(dict(s, key="k%02d/%s" % (k, s["key"])) if a.repeat > 1 else s)
            pays.append(p)
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    per = a.samples_per_shard
    shards = [write_shard(os.path.join(a.out, "shard-%06d.h5" % (i // per)), i // per,
                          samples[i:i + per], pays[i:i + per], a)
              for i in range(0, len(samples), per)]
    side = a.max_size if a.codec == "jpeg" else a.image_size
    image = {"height": side, "width": side, "channels": 3, "background": "#ffffff",
             "resize_mode": "keep-ratio-largest" if a.codec == "jpeg" else "center-crop"}
    if a.codec == "jpeg":
        image.update({"codec": "jpeg", "quality": a.quality, "chroma_subsampling": "4:2:0",
                      "max_size": a.max_size})
    t = a.tok
    index = {
        "format": "mmpack-shard", "format_version": 2 if a.codec == "jpeg" else 1,
        "created_by": "tests/gpu/pack.py (h5py %s)" % __import__("h5py").__version__,
        "image": image, "compression": {"codec": "none", "level": 0, "hdf5_filter_id": 0},
        "tokenizer": {"file": "tokenizer.model", "sha256": t["tokenizer_sha256"],
                      "vocab_size": t["vocab_size"], "pad_id": t["pad_id"], "unk_id": t["unk_id"],
                      "bos_id": t["bos_id"], "eos_id": t["eos_id"],
                      "max_tokens": t["max_tokens"], "trained": False, "unk_rate": 0.0},
        "text": {"lowercase": bool(t["lowercase"]), "normalize": "none"},
        "build_options": {"input_format": "jsonl", "max_pixels": 89478485,
                          "max_caption_bytes": 65536, "shard_size": 1073741824,
                          "samples_per_shard": per, "vocab_size": t["vocab_size"],
                          "dedup": "off"},
        "shards": shards,
        "totals": {k: sum(s[k] for s in shards)
                   for k in ("samples", "captions", "tokens", "bytes")},
        "dropped": {"total": 0, "by_reason": {}},
    }
    index["totals"]["shards"] = len(shards)
    if a.tokenizer_model:  # not needed for reading; `mmpack verify` checks it
        shutil.copyfile(a.tokenizer_model, os.path.join(a.out, "tokenizer.model"))
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    log("set %s: %d samples (%d images x %d), %d shard(s), %.1f MB, %s, in %.1f s" % (
        a.out, len(samples), len(base), a.repeat, len(shards),
        index["totals"]["bytes"] / 1e6, a.codec, time.time() - t0))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokens")
    t.add_argument("--captions", required=True)
    t.add_argument("--tokenizer", required=True)
    t.add_argument("--lowercase", action="store_true")
    t.add_argument("--max-tokens", type=int, default=77)
    t.add_argument("--out", required=True)
    v = sub.add_parser("variants")
    v.add_argument("--src", required=True)
    v.add_argument("--out", required=True)
    v.add_argument("--per-photo", type=int, default=40)
    v.add_argument("--procs", type=int, default=8)
    s = sub.add_parser("set")
    s.add_argument("--variants", required=True)
    s.add_argument("--tokens", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--codec", choices=["raw", "jpeg"], required=True)
    s.add_argument("--image-size", type=int, default=224)
    s.add_argument("--max-size", type=int, default=256)
    s.add_argument("--quality", type=int, default=90)
    s.add_argument("--repeat", type=int, default=1)
    s.add_argument("--samples-per-shard", type=int, default=4096)
    s.add_argument("--procs", type=int, default=8)
    s.add_argument("--tokenizer-model", default="",
                   help="copied in as tokenizer.model (its SHA-256 must be tokens.json's)")
    a = p.parse_args()
    {"tokens": make_tokens, "variants": make_variants, "set": make_set}[a.cmd](a)


if __name__ == "__main__":
    main()
