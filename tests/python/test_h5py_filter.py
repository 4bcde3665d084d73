"""`import mmpack` registers the zstd HDF5 filter: h5py reads (and writes) zstd shards with no
HDF5_PLUGIN_PATH, whichever of the two is imported first. Each case runs a fresh interpreter
(the registration is process-wide), with HDF5_PLUGIN_PATH removed from its environment."""

import os
import subprocess
import sys

import h5py
import numpy as np

import mmpack
from conftest import PYTHON_DIR

READ = """
import sys
sys.path.insert(0, %(python_dir)r)
%(imports)s
import numpy as np
with h5py.File(%(shard)r, "r") as f:
    pixels = f["images"][3]
print("read", pixels.shape, int(pixels.sum()))
"""


def run(code):
    env = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
    return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def read_with(shard, imports):
    return run(READ % {"python_dir": PYTHON_DIR, "imports": imports, "shard": shard})


def test_h5py_reads_zstd_after_import_mmpack_in_either_order(coco):
    shard = os.path.join(coco, "shard-000000.h5")
    want = "read (224, 224, 3) %d" % int(mmpack.ShardSet(coco).image(3).sum())
    for imports in ("import mmpack\nimport h5py", "import h5py\nimport mmpack"):
        r = read_with(shard, imports)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want


def test_without_import_mmpack_h5py_cannot_read_zstd(coco):
    # The control: the same read fails without the registration (no plugin on the path).
    r = read_with(os.path.join(coco, "shard-000000.h5"), "import h5py")
    assert r.returncode != 0
    assert "Can't read data" in r.stderr, r.stderr


def test_same_libhdf5_as_h5py():
    assert mmpack.zstd_filter_registered is True
    assert mmpack.hdf5_version == h5py.version.hdf5_version
    assert h5py.h5z.filter_avail(32015)


def test_h5py_writes_through_the_filter(tmp_path, coco):
    pixels = mmpack.ShardSet(coco).image(0)
    path = str(tmp_path / "z.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=pixels[None], chunks=(1,) + pixels.shape,
                         compression=32015, compression_opts=(3,))
    with h5py.File(path, "r") as f:
        d = f["images"]
        assert d._filters == {"32015": (3,)}
        info = d.id.get_chunk_info(0)
        assert info.size < pixels.nbytes  # stored compressed
        np.testing.assert_array_equal(d[0], pixels)
