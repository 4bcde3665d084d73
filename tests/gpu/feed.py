#!/usr/bin/env python3
"""tests/gpu/feed.py: one training step fed three ways (part a), and the loader alone (part c).

  step     torchvision ResNet-50 (random init), bf16 autocast, channels_last, SGD momentum,
           cross-entropy on a dummy label, batch --batch at 224 px, fed by:
             synthetic   a batch already on the device: the step's own ceiling
             mmpack-tN   mmpack.Loader over the stored-JPEG set, crop="rrc", 224x224, flip,
                         bilinear, N threads; on the device through the Loader's own
                         pin_memory=True, device=... when this mmpack accepts them, else pinned
                         here and copied one batch ahead on a side stream; normalised there
             pil-wN      the seeds' way: a Dataset opening each JPEG with PIL,
                         RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize,
                         DataLoader(num_workers=N, pin_memory=True, persistent_workers=True),
                         .to(device, non_blocking=True)
           per phase: images/s, the share of the synthetic phase's images/s, data wait (time the
           loop blocks getting the next batch / wall time), mean GPU utilisation and peak
           memory (nvidia-smi every 200 ms over the timed window), losses finite
  loader   mmpack.Loader alone (no model, nothing copied): images/s at each --threads count, same
           options as mmpack-tN; the scaling is images/s at N threads over images/s at 1
The step loop never synchronises inside the timed window (as a loop that logs rarely): a loader
that keeps up leaves data wait near 0. --device cpu --model tiny runs the same code on CPU.
Writes --out (JSON); its last line on stdout says where.
"""
import argparse
import gc
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import torch

T0 = time.time()
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def log(*a):
    print("[feed %5.1fs]" % (time.time() - T0), *a, flush=True)


class GpuSampler:
    """nvidia-smi --query-gpu=utilization.gpu,memory.used -lms 200 over a timed window."""

    def __init__(self, enabled):
        self.enabled = enabled and shutil.which("nvidia-smi") is not None
        self.proc = None

    def __enter__(self):
        if self.enabled:
            self.f = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                 "--format=csv,noheader,nounits", "-lms", "200", "-i", "0"],
                stdout=self.f, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        self.util = self.mem = None
        if not self.proc:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        util, mem = [], []
        for line in open(self.f.name):
            try:
                u, m = (float(x) for x in line.split(","))
                util.append(u)
                mem.append(m)
            except ValueError:
                pass
        os.unlink(self.f.name)
        if util:
            self.util, self.mem = sum(util) / len(util), max(mem)


def make_model(name):
    if name == "tiny":
        n = torch.nn
        return n.Sequential(n.Conv2d(3, 16, 7, stride=4, padding=3), n.BatchNorm2d(16), n.ReLU(),
                            n.Conv2d(16, 32, 3, stride=2, padding=1), n.BatchNorm2d(32), n.ReLU(),
                            n.AdaptiveAvgPool2d(1), n.Flatten(), n.Linear(32, 1000))
    import torchvision
    return getattr(torchvision.models, name)(num_classes=1000)


def loader_takes_device(mmpack):
    """Whether this mmpack.Loader accepts pin_memory= and device= (the loader-gpu change)."""
    try:
        params = inspect.signature(mmpack.Loader.__init__).parameters
    except (TypeError, ValueError):
        return False
    return "pin_memory" in params and "device" in params


def mmpack_loader(a, threads, dev, to_device):
    import mmpack
    kw = dict(batch_size=a.batch, seed=0, num_threads=threads, prefetch=threads + 4, crop="rrc",
              output_size=(224, 224), horizontal_flip=True, interpolation="bilinear",
              as_torch=True, drop_last=True)
    if to_device:
        kw.update(pin_memory=True, device=str(dev))
    return mmpack.Loader(a.jpeg_set, **kw)


def endless(loader):
    """Batches of every epoch in turn."""
    epoch = 0
    while True:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        for b in loader:
            yield b
        epoch += 1


class SideStreamCopy:
    """Apex's data_prefetcher: the next batch pinned and copied on a side stream while the
    current one is used; the current stream waits for the copy, the host does not."""

    def __init__(self, batches, dev):
        self.batches, self.dev = batches, dev
        self.stream = torch.cuda.Stream(device=dev)
        self.next = None
        self._preload()

    def _preload(self):
        img = next(self.batches)["images"]  # [B,H,W,3] uint8 on the host
        with torch.cuda.stream(self.stream):
            self.next = img.pin_memory().to(self.dev, non_blocking=True)

    def __call__(self):
        torch.cuda.current_stream(self.dev).wait_stream(self.stream)
        x = self.next
        x.record_stream(torch.cuda.current_stream(self.dev))
        self._preload()
        return x


class Runner:
    def __init__(self, a):
        self.a, self.dev = a, torch.device(a.device)
        self.cuda = self.dev.type == "cuda"
        if self.cuda:
            torch.backends.cudnn.benchmark = True
        torch.manual_seed(0)
        self.model = make_model(a.model).to(self.dev).to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9,
                                   weight_decay=1e-4)
        self.mean = torch.tensor([m * 255 for m in MEAN], device=self.dev).view(1, 3, 1, 1)
        self.std = torch.tensor([s * 255 for s in STD], device=self.dev).view(1, 3, 1, 1)
        self.y = torch.randint(0, 1000, (a.batch,), device=self.dev)

    def normalise(self, x):
        """[B,H,W,3] uint8 on the device -> [B,3,H,W] float, channels_last (the permuted NHWC
        memory is channels_last already). A float [B,3,H,W] batch (a loader that normalised
        already) is taken as it is."""
        if x.dtype != torch.uint8 and x.dim() == 4 and x.shape[1] == 3:
            return x.float().contiguous(memory_format=torch.channels_last)
        return ((x.permute(0, 3, 1, 2).float() - self.mean) / self.std).contiguous(
            memory_format=torch.channels_last)

    def step(self, x):
        with torch.autocast(device_type=self.dev.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(self.model(x), self.y[: x.shape[0]])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def run(self, name, next_batch, seconds):
        for _ in range(self.a.warmup_steps):
            first = self.step(next_batch())
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        n, wait, losses = 0, 0.0, []
        with GpuSampler(self.cuda) as gpu:
            t0 = time.perf_counter()
            while n < 2 or time.perf_counter() - t0 < seconds:
                t1 = time.perf_counter()
                x = next_batch()
                wait += time.perf_counter() - t1
                loss = self.step(x)
                if n % 10 == 0:
                    losses.append(loss)
                n += 1
            if self.cuda:
                torch.cuda.synchronize()
            el = time.perf_counter() - t0
        ls = [float(first)] + [float(v) for v in losses]
        r = {"name": name, "steps": n, "seconds": round(el, 2),
             "images_per_s": round(n * self.a.batch / el, 1),
             "data_wait_pct": round(100 * wait / el, 2),
             "gpu_util_pct": None if gpu.util is None else round(gpu.util, 1),
             "gpu_mem_peak_mib": gpu.mem,
             "loss_first": round(ls[0], 4), "loss_last": round(ls[-1], 4),
             "losses_finite": all(math.isfinite(v) for v in ls)}
        log("%-10s %8.1f img/s  wait %5.1f%%  gpu %s%%" % (name, r["images_per_s"],
                                                          r["data_wait_pct"], r["gpu_util_pct"]))
        return r


def phase_synthetic(R, seconds):
    x = torch.randn(R.a.batch, 3, 224, 224, device=R.dev).contiguous(
        memory_format=torch.channels_last)
    return R.run("synthetic", lambda: x, seconds)


def phase_mmpack(R, threads, seconds):
    import mmpack
    on_device = R.cuda and loader_takes_device(mmpack)
    loader = mmpack_loader(R.a, threads, R.dev, on_device)
    batches = endless(loader)
    if on_device or not R.cuda:
        def next_batch():
            img = next(batches)["images"]
            if img.device != R.dev:  # said it would, did not: copy (and say so below)
                state["copied_here"] = True
                img = img.to(R.dev)
            return R.normalise(img)
    else:
        copy = SideStreamCopy(batches, R.dev)

        def next_batch():
            return R.normalise(copy())
    state = {"copied_here": False}
    try:
        r = R.run("mmpack-t%d" % threads, next_batch, seconds)
    finally:
        batches.close()
        if hasattr(loader, "close"):
            loader.close()
    r["feed"] = ("Loader(pin_memory=True, device=...)" if on_device and not state["copied_here"]
                 else "pinned here, side-stream copy one batch ahead" if R.cuda else "host")
    return r


class JpegFolder(torch.utils.data.Dataset):
    def __init__(self, root, repeat):
        import torchvision.transforms as T
        seen = []
        for line in open(os.path.join(root, "captions.jsonl")):
            img = json.loads(line)["image"]
            if not seen or seen[-1] != img:
                seen.append(img)
        self.paths = [os.path.join(root, p) for p in dict.fromkeys(seen)]
        self.repeat = repeat
        self.tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                             T.Normalize(MEAN, STD)])

    def __len__(self):
        return len(self.paths) * self.repeat

    def __getitem__(self, i):
        from PIL import Image
        with Image.open(self.paths[i % len(self.paths)]) as im:
            return self.tf(im.convert("RGB")), 0


def phase_pil(R, workers, seconds):
    ds = JpegFolder(R.a.variants, 20)
    dl = torch.utils.data.DataLoader(ds, batch_size=R.a.batch, shuffle=True, num_workers=workers,
                                     pin_memory=R.cuda, drop_last=True, persistent_workers=True)
    batches = endless(dl)
    try:
        return R.run("pil-w%d" % workers,
                     lambda: next(batches)[0].to(R.dev, non_blocking=True).contiguous(
                         memory_format=torch.channels_last), seconds)
    finally:
        batches.close()
        del dl
        gc.collect()


def loader_alone(a, threads, seconds):
    loader = mmpack_loader(a, threads, torch.device("cpu"), False)
    batches = endless(loader)
    next(batches)  # threads started, first batch decoded
    n, t0 = 0, time.perf_counter()
    while n < 2 or time.perf_counter() - t0 < seconds:
        next(batches)
        n += 1
    el = time.perf_counter() - t0
    batches.close()
    r = {"name": "loader-t%d" % threads, "threads": threads, "batches": n,
         "images_per_s": round(n * a.batch / el, 1)}
    log("loader-t%-3d %8.1f img/s" % (threads, r["images_per_s"]))
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("part", choices=["step", "loader"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seconds", type=float, default=25, help="timed seconds per phase")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--phases", default="synthetic,mmpack-16,pil-16,pil-8")
    p.add_argument("--threads", default="1,2,4,8,16", help="part loader: thread counts")
    p.add_argument("--jpeg-set", required=True, help="the stored-JPEG shard set")
    p.add_argument("--variants", default="", help="the JPEG folder the PIL phases read")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    info = {"torch": torch.__version__, "device": a.device, "model": a.model, "batch": a.batch,
            "cpus": os.cpu_count()}
    try:
        import mmpack
        info["mmpack_loader_device_keywords"] = loader_takes_device(mmpack)
    except ImportError as e:
        info["mmpack_import_error"] = repr(e)
    results = []

    def save():
        with open(a.out + ".tmp", "w") as f:
            json.dump({"info": info, "phases": results}, f, indent=1)
        os.replace(a.out + ".tmp", a.out)

    if a.part == "loader":
        for t in (int(x) for x in a.threads.split(",")):
            try:
                results.append(loader_alone(a, t, a.seconds))
            except Exception as e:
                traceback.print_exc()
                results.append({"name": "loader-t%d" % t, "error": repr(e)[:300]})
            save()
    else:
        R = Runner(a)
        for ph in a.phases.split(","):
            kind, _, n = ph.partition("-")
            try:
                if kind == "synthetic":
                    r = phase_synthetic(R, a.seconds)
                elif kind == "mmpack":
                    r = phase_mmpack(R, int(n), a.seconds)
                else:
                    r = phase_pil(R, int(n), a.seconds)
            except Exception as e:
                traceback.print_exc()
                r = {"name": ph, "error": repr(e)[:300]}
            results.append(r)
            save()
    save()
    log("wrote", a.out)


if __name__ == "__main__":
    main()
