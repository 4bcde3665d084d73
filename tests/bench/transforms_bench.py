#!/usr/bin/python3
"""The load-time transform benchmark of issue 10: FFCV 0.0.3 against mmpack, same photos, same
run, same cores. Driven by run_transforms_bench.sh.

Usage: transforms_bench.py BUILD_DIR WORK_DIR SHARED_DIR N SECONDS

Photos: coco-cc expanded to N distinct photos (build_expand.py, 383-640 px).
FFCV: DatasetWriter with RGBImageField(write_mode='jpg' | 'raw', max_resolution=256,
  jpeg_quality=90); Loader(batch_size=32, num_workers=2, order=RANDOM) with
  RandomResizedCropRGBImageDecoder((224, 224)) and CenterCropRGBImageDecoder((224, 224),
  224/256); one untimed epoch first (numba compiles), then SECONDS timed.
mmpack raw: `mmpack build --image-size 256` (raw, zstd; fixed 256x256 centre crop: the raw codec
  keeps one [N, H, W, 3] dataset), read by `mmpack bench --threads 2 --batch-size 32
  --crop rrc|center --size 224` (the real loader: random order, batches, tokens).
mmpack JPEG: the reader's JPEG transform (mm_jpeg_crop_bench: CropResizeJpeg on 2 threads, random
  order) on the photos shrunk to a longer side of 256 and saved by Pillow at quality 90, 4:2:0,
  baseline (what `mmpack build --codec jpeg` is specified to store). The reader cannot read JPEG
  shard sets yet (the v2 writer had not landed), so this is the per-sample transform without the
  loader's batching (which costs microseconds: compare `mmpack bench` on raw with --crop none).
CPU-ms per sample: process CPU time (user + system, RUSAGE_SELF, all threads; FFCV's workers are
  threads of its process) over samples delivered.
"""
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
from PIL import Image


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def ffcv_write(paths, out, mode):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    class Photos:
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            return np.asarray(Image.open(paths[i]).convert("RGB")), i

    if os.path.exists(out):
        os.remove(out)
    w = DatasetWriter(out, {"image": RGBImageField(write_mode=mode, max_resolution=256,
                                                   jpeg_quality=90),
                            "label": IntField()}, num_workers=2)
    t0 = time.perf_counter()
    w.from_indexed_dataset(Photos())
    return len(paths) / (time.perf_counter() - t0)


def ffcv_read(beton, crop, seconds):
    from ffcv.fields.basics import IntDecoder
    from ffcv.fields.rgb_image import CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    dec = (RandomResizedCropRGBImageDecoder((224, 224)) if crop == "rrc" else
           CenterCropRGBImageDecoder((224, 224), 224 / 256))
    loader = Loader(beton, batch_size=32, num_workers=2, order=OrderOption.RANDOM,
                    pipelines={"image": [dec], "label": [IntDecoder()]})
    for _ in loader:  # one untimed epoch: numba compiles, workers start
        pass
    samples, t0, c0 = 0, time.perf_counter(), cpu_s()
    while time.perf_counter() - t0 < seconds:
        for images, _ in loader:
            assert images.shape[1:] == (224, 224, 3), images.shape
            samples += images.shape[0]
            if time.perf_counter() - t0 >= seconds:
                break
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    return {"samples_per_s": samples / wall, "cpu_ms_per_sample": 1000 * cpu / samples}


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    build, work, shared, n, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
        float(sys.argv[5])
    here = os.path.dirname(os.path.abspath(__file__))
    mmpack = os.path.join(build, "bin", "mmpack")
    os.makedirs(work, exist_ok=True)
    raw = os.path.join(work, "raw")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), raw, str(n)], check=True)
    paths = [p for p in open(os.path.join(raw, "files.txt")).read().split("\n") if p]
    r = {"n": len(paths), "seconds": seconds, "load_before": os.getloadavg()}

    # The JPEGs mmpack's JPEG path reads: longer side <= 256, quality 90, 4:2:0, baseline.
    jdir = os.path.join(work, "jpeg256")
    os.makedirs(jdir, exist_ok=True)
    jlist = os.path.join(work, "jpeg256.txt")
    t0 = time.perf_counter()
    with open(jlist, "w") as f:
        total = 0
        for k, p in enumerate(paths):
            out = os.path.join(jdir, "%06d.jpg" % k)
            im = Image.open(p).convert("RGB")
            im.thumbnail((256, 256), Image.LANCZOS)
            im.save(out, quality=90, subsampling=2, progressive=False)
            total += os.path.getsize(out)
            f.write(out + "\n")
    r["pillow_jpeg_write_images_per_s_1thread"] = len(paths) / (time.perf_counter() - t0)
    r["mmpack_jpeg_bytes_per_sample"] = total / len(paths)

    print("mmpack build raw 256 ...", flush=True)
    shards = os.path.join(work, "shards_raw256")
    t0 = time.perf_counter()
    subprocess.run([mmpack, "build", os.path.join(raw, "captions.jsonl"), "-o", shards,
                    "--tokenizer", os.path.join(shared, "tokenizers", "albert-30k-clean.model"),
                    "--image-size", "256", "-j", "2", "--overwrite", "-q"], check=True)
    r["mmpack_raw_write_images_per_s"] = len(paths) / (time.perf_counter() - t0)
    r["mmpack_raw_bytes_per_sample"] = sum(
        os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards)
        if f.endswith(".h5")) / len(paths)

    for mode in ("jpg", "raw"):
        print("FFCV write", mode, "...", flush=True)
        beton = os.path.join(work, "ffcv_%s.beton" % mode)
        r["ffcv_%s_write_images_per_s" % mode] = ffcv_write(paths, beton, mode)
        r["ffcv_%s_bytes_per_sample" % mode] = os.path.getsize(beton) / len(paths)

    for crop in ("rrc", "center"):
        for mode in ("jpg", "raw"):
            print("FFCV read", mode, crop, "...", flush=True)
            r["ffcv_%s_%s" % (mode, crop)] = ffcv_read(
                os.path.join(work, "ffcv_%s.beton" % mode), crop, seconds)
        print("mmpack read raw", crop, "...", flush=True)
        r["mmpack_raw_%s" % crop] = run_json([mmpack, "bench", shards, "--threads", "2",
                                              "--batch-size", "32", "--seconds", str(seconds),
                                              "--crop", crop, "--size", "224", "--json"])
        print("mmpack JPEG transform", crop, "...", flush=True)
        r["mmpack_jpeg_%s" % crop] = run_json([os.path.join(build, "bin", "mm_jpeg_crop_bench"),
                                               jlist, crop, "2", str(seconds), "224"])
    r["load_after"] = os.getloadavg()
    json.dump(r, open(os.path.join(work, "transforms_bench.json"), "w"), indent=2)

    print("\n%d photos, 224x224 out, 2 threads/workers, batch 32, %.0f s each; load %s -> %s" %
          (len(paths), seconds, "%.1f" % r["load_before"][0], "%.1f" % r["load_after"][0]))
    print("  stored bytes/sample: FFCV jpg %.0f, mmpack JPEG (Pillow q90 4:2:0) %.0f; FFCV raw "
          "%.0f, mmpack raw 256 zstd %.0f" % (r["ffcv_jpg_bytes_per_sample"],
                                              r["mmpack_jpeg_bytes_per_sample"],
                                              r["ffcv_raw_bytes_per_sample"],
                                              r["mmpack_raw_bytes_per_sample"]))
    print("  write images/s: FFCV jpg %.0f, FFCV raw %.0f, mmpack raw build %.0f" %
          (r["ffcv_jpg_write_images_per_s"], r["ffcv_raw_write_images_per_s"],
           r["mmpack_raw_write_images_per_s"]))
    ok = True
    for crop in ("rrc", "center"):
        for ours, theirs, target in (("mmpack_jpeg_%s" % crop, "ffcv_jpg_%s" % crop,
                                      1.5 if crop == "rrc" else 1.1),
                                     ("mmpack_raw_%s" % crop, "ffcv_raw_%s" % crop, 1.1)):
            a, b = r[ours], r[theirs]
            ratio = a["samples_per_s"] / b["samples_per_s"]
            cpu_ok = a["cpu_ms_per_sample"] <= b["cpu_ms_per_sample"]
            met = ratio >= target and cpu_ok
            ok &= met
            print("  %-20s %9.0f samples/s %.3f CPU-ms | %-16s %9.0f samples/s %.3f CPU-ms | "
                  "%.2fx (target >= %.1fx, CPU <=) %s" %
                  (ours, a["samples_per_s"], a["cpu_ms_per_sample"], theirs, b["samples_per_s"],
                   b["cpu_ms_per_sample"], ratio, target, "ok" if met else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
