#!/usr/bin/python3
"""The load-time transform benchmark of issue 10: FFCV 0.0.3 against mmpack, same photos, same
run, same cores. Driven by run_transforms_bench.sh.

Usage: transforms_bench.py BUILD_DIR WORK_DIR SHARED_DIR N SECONDS [ROUNDS=3]

Photos: coco-cc expanded to N distinct photos (build_expand.py, 383-640 px).
FFCV: DatasetWriter with RGBImageField(write_mode='jpg' | 'raw', max_resolution=256,
  jpeg_quality=90); Loader(batch_size=32, num_workers=2, order=RANDOM) with
  RandomResizedCropRGBImageDecoder((224, 224)) and CenterCropRGBImageDecoder((224, 224),
  224/256); one untimed epoch first (numba compiles), then SECONDS timed.
mmpack raw: `mmpack build --image-size 256` (raw; fixed 256x256 centre crop: the raw codec
  keeps one [N, H, W, 3] dataset) with the default options ("raw") and with `--compression zstd`
  ("rawzstd", for reference; FFCV's raw field is uncompressed pixels), read by `mmpack
  bench --threads 2 --batch-size 32 --crop rrc|center --size 224 --interpolation
  lanczos|bilinear` (the real loader: random order, batches, tokens).
mmpack JPEG: `mmpack build --codec jpeg --resize-mode keep-ratio-largest --max-size 256` (format
  2: FFCV's max_resolution=256, quality 90), read by the same `mmpack bench` command: the real
  loader decoding each JPEG at the smallest DCT scale and only the rows and columns the crop
  needs. Also a fixed-size JPEG set (`--codec jpeg --image-size 224`, centre-crop) read whole
  (`--crop none`): the decode alone.
Build CPU: CPU seconds of the `mmpack build` child (RUSAGE_CHILDREN) per image, JPEG against raw
  at the same bound, same photos, same run.
CPU-ms per sample: process CPU time (user + system, RUSAGE_SELF, all threads; FFCV's workers are
  threads of its process) over samples delivered.
Rounds: the reads run ROUNDS times (default 3), interleaved (each round reads every FFCV and
  mmpack configuration in turn, so that load from other work hits both alike); every figure
  printed is the median over the rounds, with the uptime load before and after each round.
  CPU-ms per sample is the robust figure on a shared machine; samples/s follows the load.
"""
import json
import os
import resource
import statistics
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
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    here = os.path.dirname(os.path.abspath(__file__))
    mmpack = os.path.join(build, "bin", "mmpack")
    os.makedirs(work, exist_ok=True)
    raw = os.path.join(work, "raw")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), raw, str(n)], check=True)
    paths = [p for p in open(os.path.join(raw, "files.txt")).read().split("\n") if p]
    r = {"n": len(paths), "seconds": seconds, "load_before": os.getloadavg()}

    tok = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    captions = os.path.join(raw, "captions.jsonl")

    def build(name, *options):
        out = os.path.join(work, name)
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([mmpack, "build", captions, "-o", out, "--tokenizer", tok, "-j", "2",
                        "--overwrite", "-q", *options], check=True)
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        idx = json.load(open(os.path.join(out, "index.json")))
        samples = idx["totals"]["samples"]
        stored = json.load(open(os.path.join(out, "report.json")))["stats"].get("stored_bytes", {})
        return out, {"images_per_s": samples / wall, "cpu_ms_per_image": 1000 * cpu / samples,
                     "bytes_per_sample": idx["totals"]["bytes"] / samples,
                     "image_bytes_per_sample": stored.get("mean")}

    print("mmpack build raw 256 ...", flush=True)
    shards, r["mmpack_raw_build"] = build("shards_raw256", "--image-size", "256")
    print("mmpack build raw 256, zstd ...", flush=True)
    zshards, r["mmpack_rawzstd_build"] = build("shards_raw256_zstd", "--image-size", "256",
                                               "--compression", "zstd")
    print("mmpack build jpeg keep-ratio-largest 256 ...", flush=True)
    jshards, r["mmpack_jpeg_build"] = build("shards_jpeg256", "--codec", "jpeg", "--resize-mode",
                                            "keep-ratio-largest", "--max-size", "256")
    print("mmpack build jpeg 224 (fixed size) ...", flush=True)
    fshards, r["mmpack_jpeg224_build"] = build("shards_jpeg224", "--codec", "jpeg",
                                               "--image-size", "224")

    for mode in ("jpg", "raw"):
        print("FFCV write", mode, "...", flush=True)
        beton = os.path.join(work, "ffcv_%s.beton" % mode)
        r["ffcv_%s_write_images_per_s" % mode] = ffcv_write(paths, beton, mode)
        r["ffcv_%s_bytes_per_sample" % mode] = os.path.getsize(beton) / len(paths)

    def read_round(rr):
        for crop in ("rrc", "center"):
            for mode in ("jpg", "raw"):
                print("FFCV read", mode, crop, "...", flush=True)
                rr["ffcv_%s_%s" % (mode, crop)] = ffcv_read(
                    os.path.join(work, "ffcv_%s.beton" % mode), crop, seconds)
            for name, path in (("raw", shards), ("rawzstd", zshards), ("jpeg", jshards)):
                for interp in ("lanczos", "bilinear"):
                    key = "mmpack_%s_%s" % (name, crop) + ("" if interp == "lanczos" else
                                                           "_bilinear")
                    print("mmpack read", name, crop, interp, "...", flush=True)
                    rr[key] = run_json([mmpack, "bench", path, "--threads", "2", "--batch-size",
                                        "32", "--seconds", str(seconds), "--crop", crop, "--size",
                                        "224", "--interpolation", interp, "--json"])
        print("mmpack read jpeg 224 whole ...", flush=True)
        rr["mmpack_jpeg224_none"] = run_json([mmpack, "bench", fshards, "--threads", "2",
                                              "--batch-size", "32", "--seconds", str(seconds),
                                              "--json"])

    r["rounds"] = []
    for k in range(rounds):
        rr = {"load_before": os.getloadavg()}
        print("round %d of %d, load %.2f" % (k + 1, rounds, rr["load_before"][0]), flush=True)
        read_round(rr)
        rr["load_after"] = os.getloadavg()
        r["rounds"].append(rr)
    for key in r["rounds"][0]:
        if key.startswith("load"):
            continue
        r[key] = {f: statistics.median(rr[key][f] for rr in r["rounds"])
                  for f in ("samples_per_s", "cpu_ms_per_sample")}
        r[key]["cpu_ms_all_rounds"] = [rr[key]["cpu_ms_per_sample"] for rr in r["rounds"]]
    r["load_after"] = os.getloadavg()
    json.dump(r, open(os.path.join(work, "transforms_bench.json"), "w"), indent=2)

    print("\n%d photos, 224x224 out, 2 threads/workers, batch 32, %.0f s each, median of %d "
          "interleaved rounds; load %s" %
          (len(paths), seconds, rounds, ", ".join("%.1f -> %.1f" % (rr["load_before"][0],
                                                                  rr["load_after"][0])
                                                  for rr in r["rounds"])))
    rb, jb, fb = r["mmpack_raw_build"], r["mmpack_jpeg_build"], r["mmpack_jpeg224_build"]
    zb = r["mmpack_rawzstd_build"]
    print("  stored bytes/sample: FFCV jpg %.0f, mmpack jpeg 256 %.0f (JPEG %.0f); mmpack jpeg 224 "
          "%.0f (JPEG %.0f); FFCV raw %.0f, mmpack raw 256 default %.0f, zstd %.0f" %
          (r["ffcv_jpg_bytes_per_sample"], jb["bytes_per_sample"], jb["image_bytes_per_sample"],
           fb["bytes_per_sample"], fb["image_bytes_per_sample"], r["ffcv_raw_bytes_per_sample"],
           rb["bytes_per_sample"], zb["bytes_per_sample"]))
    print("  write images/s: FFCV jpg %.0f, FFCV raw %.0f, mmpack jpeg %.0f, mmpack raw %.0f" %
          (r["ffcv_jpg_write_images_per_s"], r["ffcv_raw_write_images_per_s"],
           jb["images_per_s"], rb["images_per_s"]))
    build_ratio = jb["cpu_ms_per_image"] / rb["cpu_ms_per_image"]
    print("  build CPU-ms/image: mmpack jpeg %.2f, raw %.2f: %.2fx (target <= 1.3x) %s" %
          (jb["cpu_ms_per_image"], rb["cpu_ms_per_image"], build_ratio,
           "ok" if build_ratio <= 1.3 else "MISSED"))
    whole = r["mmpack_jpeg224_none"]
    print("  mmpack jpeg 224 whole decode: %.0f samples/s %.3f CPU-ms" %
          (whole["samples_per_s"], whole["cpu_ms_per_sample"]))
    ok = True
    # Like for like, in CPU per sample: FFCV jpg against mmpack's JPEG set, FFCV raw
    # (uncompressed pixels) against mmpack raw built with the defaults ("raw") and with zstd asked
    # for ("rawzstd", listed for reference: an opt-in trade of CPU for ~10% of disk). Each with
    # Lanczos-3 (Pillow's LANCZOS) and the triangle (Pillow's BILINEAR, the default since issue
    # 27); FFCV resizes with OpenCV's INTER_AREA. Targets: every path <= 1.0x FFCV's CPU, JPEG rrc
    # Lanczos-3 <= 0.75x.
    for crop in ("rrc", "center"):
        for ours, theirs in (("jpeg", "jpg"), ("raw", "raw"), ("rawzstd", "raw")):
            b = r["ffcv_%s_%s" % (theirs, crop)]
            for suffix in ("", "_bilinear"):
                key = "mmpack_%s_%s%s" % (ours, crop, suffix)
                a = r[key]
                target = 0.75 if (ours, crop, suffix) == ("jpeg", "rrc", "") else 1.0
                cpu_ratio = a["cpu_ms_per_sample"] / b["cpu_ms_per_sample"]
                met = cpu_ratio <= target
                print("  %-28s %.3f CPU-ms %7.0f samples/s | FFCV %-3s %.3f CPU-ms %7.0f samples/s "
                      "| CPU %.2fx (target <= %.2fx) %s" %
                      (key, a["cpu_ms_per_sample"], a["samples_per_s"], theirs,
                       b["cpu_ms_per_sample"], b["samples_per_s"], cpu_ratio, target,
                       "ok" if met else ("missed" if ours != "rawzstd" else "(reference)")))
                if ours != "rawzstd":
                    ok &= met
    ok &= build_ratio <= 1.3
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
