#!/usr/bin/env python3
"""tests/gpu/summarize.py: the table of tests/gpu/run.sh, from its logs folder; printed last.

Writes OUT/summary.txt and OUT/summary.json. mmtrain's figures come from its metrics.jsonl
(the train lines after the first two log windows: CUDA start, cuDNN/cuBLAS warm-up): samples/s,
data-wait %, GPU utilisation and memory (NVML, trainer/src/gpu_monitor.h), the last loss scale,
steps skipped by the scaler, whether every logged loss is finite. Exit status 1 when a part
produced no figures (a build that failed, a phase with an error, a missing run).
"""
import argparse
import json
import math
import os
import re


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def load_json(path):
    try:
        return json.loads(read(path))
    except ValueError:
        return None


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def table(head, rows):
    w = [max(len(str(x)) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
    line = lambda r: "  ".join(str(x).rjust(n) if i else str(x).ljust(n)
                               for i, (x, n) in enumerate(zip(r, w)))
    return [line(head)] + [line(r) for r in rows]


def mmtrain_figures(path):
    lines = []
    for l in read(path).splitlines():
        try:
            lines.append(json.loads(l))
        except ValueError:
            pass  # a line cut by the timeout's kill
    train = [r for r in lines if r.get("event") == "train"]
    if not train:
        return None
    use = train[2:] if len(train) > 3 else train[1:] or train
    mean = lambda k: (sum(r[k] for r in use if r.get(k) is not None) /
                      max(1, sum(1 for r in use if r.get(k) is not None))
                      if any(r.get(k) is not None for r in use) else None)
    losses = [r.get("loss") for r in train]
    return {"steps": train[-1]["step"], "windows": len(use),
            "samples_per_s": mean("samples_per_s"), "data_wait_pct": mean("data_wait_pct"),
            "gpu_util_pct": mean("gpu_util_pct"),
            "gpu_mem_mib": max((r.get("gpu_mem_used_mib") or 0) for r in use) or None,
            "loss_scale": train[-1].get("loss_scale"),
            "skipped_steps": sum(r.get("skipped_steps", 0) for r in train),
            "losses_finite": all(isinstance(v, (int, float)) and math.isfinite(v)
                                 for v in losses),
            "loss_first": losses[0], "loss_last": losses[-1]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--logs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--mode", default="device")
    p.add_argument("--amps", default="bf16 fp16")
    p.add_argument("--elapsed", default="?")
    a = p.parse_args()
    L = lambda n: os.path.join(a.logs, n)
    steps = {}
    for l in read(L("steps.tsv")).splitlines():
        f = l.split("\t")
        if len(f) >= 3:
            steps[f[0]] = (int(f[1]), int(f[2]))
    problems = []
    out = ["", "=" * 100, "mmpack GPU check (%s mode), %s s" % (a.mode, a.elapsed), "=" * 100]

    facts = read(L("facts.log"))
    get = lambda pat: (re.search(pat, facts, re.M) or [None, None])[1]
    machine = {"os": get(r'PRETTY_NAME="([^"]+)"'), "cpus": get(r"^cpus (\d+)"),
               "gpu": get(r"^([^,\n]*(?:NVIDIA|Tesla|H100|A100)[^,\n]*),"),
               "driver": get(r"^[^,\n]+, ([0-9.]+), \d+ MiB"),
               "python": get(r"^python (\S+)"), "torch": get(r"^torch (\S+)"),
               "torch_cuda": get(r"^torch_cuda (\S+)"), "gloo_headers": get(r"^gloo_headers (\S+)"),
               "gcc": get(r"^gcc (.*)"), "cmake": get(r"^cmake (.*)"), "nvcc": get(r"^nvcc (.*)")}
    out.append("machine: %s; %s CPUs; GPU %s (driver %s); python %s, torch %s (CUDA %s), "
               "torch's gloo/ headers: %s" % tuple(machine.get(k) or "-" for k in (
                   "os", "cpus", "gpu", "driver", "python", "torch", "torch_cuda",
                   "gloo_headers")))

    cfg = read(L("configure.log"))
    backends = re.search(r"-- mmtrain: (.*)", cfg)
    build = {k: steps.get(k, (None, 0))
             for k in ("deps", "configure", "configure-without-trainer", "build-module",
                       "build-mmtrain", "build", "data")}
    desc = []
    for k, (rc, s) in build.items():
        if rc is not None:
            desc.append("%s %s (%d s)" % (k, "ok" if rc == 0 else "FAILED rc=%d" % rc, s))
            if rc != 0:
                problems.append(k)
    out.append("build: " + ", ".join(desc))
    if backends:
        out.append("       " + backends.group(1))
    errs = read(L("build-errors.txt")).strip()
    if errs:
        out += ["build errors (first lines):"] + ["  " + e[:160] for e in errs.splitlines()[:12]]

    feed = load_json(L("feed-step.json")) or {}
    rows, phases = [], feed.get("phases", [])
    synth = next((r.get("images_per_s") for r in phases if r.get("name") == "synthetic"), None)
    for r in phases:
        if "error" in r:
            problems.append(r["name"])
            rows.append([r["name"], "ERROR " + r["error"][:60], "", "", "", "", ""])
            continue
        share = r["images_per_s"] / synth if synth else None
        rows.append([r["name"], fmt(r["images_per_s"]), fmt(share, "%.3f"),
                     fmt(r.get("gpu_util_pct")), fmt(r.get("data_wait_pct"), "%.2f"),
                     "yes" if r.get("losses_finite") else "NO", r.get("feed", "")])
    if not phases:
        problems.append("feed-step")
    out += ["", "(a) one training step of %s, bf16, channels_last, batch %s, 224 px" % (
        feed.get("info", {}).get("model", "?"), feed.get("info", {}).get("batch", "?"))]
    out += table(["feed", "images/s", "x synthetic", "GPU util %", "data wait %", "finite",
                  "how"], rows)

    rows, train = [], {}
    for amp in a.amps.split():
        f = mmtrain_figures(L("mmtrain-%s.metrics.jsonl" % amp))
        train[amp] = f
        if not f:
            problems.append("mmtrain-" + amp)
            rows.append([amp, "no train lines (rc %s)" % (steps.get("mmtrain-" + amp, ("-",))[0]),
                         "", "", "", "", "", ""])
            continue
        if not f["losses_finite"] and amp != "fp16":
            problems.append("mmtrain-%s losses" % amp)
        rows.append([amp, f["steps"], fmt(f["samples_per_s"]), fmt(f["data_wait_pct"], "%.2f"),
                     fmt(f["gpu_util_pct"]), fmt(f["gpu_mem_mib"], "%.0f"),
                     fmt(f["loss_scale"], "%.0f"), f["skipped_steps"],
                     "yes" if f["losses_finite"] else "NO",
                     "%s -> %s" % (fmt(f["loss_first"], "%.3f"), fmt(f["loss_last"], "%.3f"))])
    out += ["", "(b) mmtrain on %s (metrics.jsonl; GPU figures from NVML in each line)" % (
        "CUDA" if a.mode == "device" else "CPU")]
    out += table(["amp", "steps", "samples/s", "data wait %", "GPU util %", "GPU MiB",
                  "loss scale", "skipped", "finite", "loss"], rows)

    loader = load_json(L("feed-loader.json")) or {}
    lp = [r for r in loader.get("phases", []) if "images_per_s" in r]
    one = next((r["images_per_s"] for r in lp if r["threads"] == 1), None)
    rows = [[r["threads"], fmt(r["images_per_s"]), fmt(r["images_per_s"] / one if one else None,
                                                       "%.2f")] for r in lp]
    if not lp:
        problems.append("feed-loader")
    out += ["", "(c) mmpack.Loader alone, stored JPEGs, crop rrc 224, batch %s" %
            loader.get("info", {}).get("batch", "?")]
    out += table(["threads", "images/s", "x 1 thread"], rows)

    mm = next((r for r in phases if r.get("name", "").startswith("mmpack") and "error" not in r),
              None)
    checks = []
    if mm and synth:
        checks.append("mmpack-fed step %.3f x synthetic (target >= 0.95), GPU util %s%% (>= 90)"
                      % (mm["images_per_s"] / synth, fmt(mm.get("gpu_util_pct"))))
    if lp and one:
        checks.append("loader %d threads %.1f x 1 thread (target >= 12 at 16)" % (
            lp[-1]["threads"], lp[-1]["images_per_s"] / one))
    for amp, f in train.items():
        if f:
            checks.append("mmtrain %s data wait %s%% (target < 2)" % (amp, fmt(f["data_wait_pct"],
                                                                               "%.2f")))
    out += ["", "targets: " + "; ".join(checks) if checks else "targets: -"]
    out.append("problems: " + (", ".join(problems) if problems else "none"))
    text = "\n".join(out) + "\n"
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"machine": machine, "steps": steps, "feed_step": feed, "mmtrain": train,
                   "loader": loader, "problems": problems}, f, indent=1)
    print(text, end="")
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
