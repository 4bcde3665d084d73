#!/usr/bin/python3
"""Baseline (a) of the reader benchmark: the seeds' PyTorch DataLoader over the raw files.

A Dataset whose __getitem__ does Pillow open + convert('RGB') + torchvision Resize((224, 224))
+ ToTensor() + sentencepiece encode padded to 77; DataLoader(batch_size=32, shuffle=True,
num_workers=2). One item per image (its first caption). Times SECONDS of iteration after the
first batch (worker start-up excluded) and prints one JSON object.

Usage: reader_torch_baseline.py MANIFEST.jsonl TOKENIZER.model SECONDS
"""
import json
import os
import resource
import sys

import sentencepiece as spm
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from bench_loader import time_loader


class RawPairs(Dataset):
    def __init__(self, manifest, tokenizer):
        root = os.path.dirname(os.path.abspath(manifest))
        seen = {}
        with open(manifest, encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                seen.setdefault(os.path.join(root, row["image"]), row["text"])
        self.items = list(seen.items())
        self.tokenizer = tokenizer
        self.sp = None  # loaded in each worker
        self.transform = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if self.sp is None:
            self.sp = spm.SentencePieceProcessor(model_file=self.tokenizer)
        path, text = self.items[i]
        image = self.transform(Image.open(path).convert("RGB"))
        ids = self.sp.encode(text)[:77]
        tokens = torch.zeros(77, dtype=torch.int32)  # pad id 0
        tokens[: len(ids)] = torch.tensor(ids, dtype=torch.int32)
        return image, tokens, len(ids)


def main():
    manifest, tokenizer, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    torch.manual_seed(0)
    data = RawPairs(manifest, tokenizer)
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=True)
    samples, elapsed = time_loader(loader, seconds)
    # Worker CPU shows in RUSAGE_CHILDREN only once they exit: read /proc of the workers instead.
    tick = os.sysconf("SC_CLK_TCK")
    worker_cpu = 0.0
    for w in getattr(loader._iterator, "_workers", []) if loader._iterator else []:
        try:
            fields = open("/proc/%d/stat" % w.pid).read().rsplit(")", 1)[1].split()
            worker_cpu += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    s = resource.getrusage(resource.RUSAGE_SELF)
    cpu = s.ru_utime + s.ru_stime + worker_cpu  # whole run incl. start-up: an upper bound
    print(json.dumps({"mode": "torch_dataloader", "samples_per_s": samples / elapsed,
                      "samples": samples, "seconds": elapsed,
                      "cpu_ms_per_sample_upper_bound": cpu * 1e3 / max(samples, 1),
                      "images": len(data)}))


if __name__ == "__main__":
    main()
