"""The reference the tests compare mmpack against: a shard set read through h5py (HDF5's own
read path; zstd chunks through the filter that `import mmpack` registered), following
schemas/FORMAT.md with numpy only."""

import bisect
import json
import os

import h5py
import numpy as np


class H5Set:
    """Global sample i of the set at `root`, read by h5py."""

    def __init__(self, root):
        with open(os.path.join(root, "index.json"), encoding="utf-8") as f:
            self.index = json.load(f)
        self.files = [h5py.File(os.path.join(root, s["file"]), "r") for s in self.index["shards"]]
        self.first = [0]
        for s in self.index["shards"]:
            self.first.append(self.first[-1] + s["samples"])

    def __len__(self):
        return self.first[-1]

    def _where(self, i):
        k = bisect.bisect_right(self.first, i) - 1
        return self.files[k], i - self.first[k]

    def image(self, i):
        f, s = self._where(i)
        return f["images"][s]

    def key(self, i):
        f, s = self._where(i)
        return f["keys"][s].rstrip(b"\0").decode("utf-8")

    def source(self, i):
        f, s = self._where(i)
        return f["sources"][s].decode("utf-8")

    def captions(self, i):
        f, s = self._where(i)
        c0, c1 = f["caption_offsets"][s:s + 2]
        return [c.decode("utf-8") for c in f["captions"][c0:c1]]

    def tokens(self, i):
        """List of int32 arrays, one per caption."""
        f, s = self._where(i)
        c0, c1 = f["caption_offsets"][s:s + 2]
        offsets = f["token_offsets"][c0:c1 + 1]
        tokens = f["tokens"]
        return [np.asarray(tokens[offsets[j]:offsets[j + 1]], dtype=np.int32)
                for j in range(c1 - c0)]

    def close(self):
        for f in self.files:
            f.close()


def reseal(root):
    """index.json's "bytes" and "xxh3_64" of every shard of the set at `root` (and its byte
    total) made to match the files again, after a test edited a shard on purpose: the damage
    then reaches the checks behind the checksum. XXH3-64 through Debian's libxxhash."""
    import ctypes
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    path = os.path.join(root, "index.json")
    with open(path) as f:
        idx = json.load(f)
    for s in idx["shards"]:
        with open(os.path.join(root, s["file"]), "rb") as f:
            data = f.read()
        s["bytes"] = len(data)
        s["xxh3_64"] = "%016x" % lib.XXH3_64bits(data, len(data))
    idx["totals"]["bytes"] = sum(s["bytes"] for s in idx["shards"])
    with open(path, "w") as f:
        json.dump(idx, f, indent=2)
