#!/usr/bin/python3
"""Baseline (b) of the reader benchmark: the same shards read through HDF5's own read path
(h5py, zstd filter from HDF5_PLUGIN_PATH), as a PyTorch user would: a Dataset whose
__getitem__ reads images[i] (one chunk, H5Dread + filter) and the caption's token ids padded
to 77; DataLoader(batch_size=32, shuffle=True, num_workers=2). Files are opened once per
worker. Times SECONDS after the first batch and prints one JSON object.

Usage: reader_h5py_baseline.py SET_DIR SECONDS
"""
import json
import os
import sys

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from bench_loader import time_loader


class Shards(Dataset):
    def __init__(self, root):
        index = json.load(open(os.path.join(root, "index.json")))
        self.paths = [os.path.join(root, s["file"]) for s in index["shards"]]
        self.where = [(k, i) for k, s in enumerate(index["shards"]) for i in range(s["samples"])]
        self.files = None

    def __len__(self):
        return len(self.where)

    def __getitem__(self, n):
        if self.files is None:
            self.files = [h5py.File(p, "r") for p in self.paths]
        k, i = self.where[n]
        f = self.files[k]
        image = torch.from_numpy(f["images"][i])
        c = f["caption_offsets"][i]
        t0, t1 = f["token_offsets"][c], f["token_offsets"][c + 1]
        ids = f["tokens"][t0:t1][:77]
        tokens = torch.zeros(77, dtype=torch.int32)
        tokens[: len(ids)] = torch.from_numpy(ids.astype(np.int32))
        return image, tokens, len(ids)


def main():
    root, seconds = sys.argv[1], float(sys.argv[2])
    torch.manual_seed(0)
    loader = DataLoader(Shards(root), batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=True)
    samples, elapsed = time_loader(loader, seconds)
    print(json.dumps({"mode": "h5py_dataloader", "samples_per_s": samples / elapsed,
                      "samples": samples, "seconds": elapsed}))


if __name__ == "__main__":
    main()
