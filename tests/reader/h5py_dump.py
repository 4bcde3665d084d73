#!/usr/bin/python3
"""Dumps a shard set through h5py (HDF5's own read path, the zstd filter from
HDF5_PLUGIN_PATH): every image, in global sample order, concatenated into OUT.bin, and keys,
captions and token ids per sample as one JSON document in OUT.json.

Used by mm_reader_test (MmpackSet.*) to check that the reader's bytes equal h5py's bytes.
Usage: h5py_dump.py SET_DIR OUT_PREFIX
"""
import json
import os
import sys

import h5py
import numpy as np


def main():
    set_dir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(set_dir, "index.json")) as f:
        index = json.load(f)
    samples = []
    with open(out + ".bin", "wb") as images_out:
        for shard in index["shards"]:
            with h5py.File(os.path.join(set_dir, shard["file"]), "r") as f:
                images = f["images"]
                keys = f["keys"][()]
                cap_off = f["caption_offsets"][()]
                tok_off = f["token_offsets"][()]
                tokens = f["tokens"][()]
                for i in range(images.shape[0]):
                    images_out.write(np.ascontiguousarray(images[i]).tobytes())
                    caps = range(cap_off[i], cap_off[i + 1])
                    samples.append({
                        "key": keys[i].rstrip(b"\0").decode("utf-8"),
                        "tokens": [tokens[tok_off[c]:tok_off[c + 1]].tolist() for c in caps],
                    })
    with open(out + ".json", "w") as f:
        json.dump(samples, f)


if __name__ == "__main__":
    main()
