"""Fixtures of the Python module's tests (tests/python, pytest, Debian's /usr/bin/python3).

The tests import the real `mmpack` package from the build tree and read shard sets that the
real `mmpack build` makes at the start of the session from ../shared/data, with the real ALBERT
tokenizer; h5py (Debian's, same libhdf5) is the independent reference. ctest runs each
test_*.py as one test (label "python") with this environment (tests/python/CMakeLists.txt):
  MM_PYTHON_DIR   BUILD/python, prepended to sys.path here (the one PYTHONPATH users set)
  MM_BIN_DIR      BUILD/bin (mmpack), MMPACK_BIN is derived from it
  MM_SHARED_DIR   ../shared (data/, tokenizers/)
  MM_SOURCE_DIR   the checkout (examples/)
Without them (`/usr/bin/python3 -m pytest tests/python` in a checkout built into ./build),
the defaults below point at the same places. HDF5_PLUGIN_PATH is deliberately not set: every
h5py read of a zstd shard here goes through the filter that `import mmpack` registered.
"""

import os
import subprocess
import sys

import pytest

SOURCE_DIR = os.environ.get(
    "MM_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.path.join(SOURCE_DIR, "build")
PYTHON_DIR = os.environ.get("MM_PYTHON_DIR", os.path.join(BUILD_DIR, "python"))
BIN_DIR = os.environ.get("MM_BIN_DIR", os.path.join(BUILD_DIR, "bin"))
SHARED_DIR = os.environ.get("MM_SHARED_DIR", os.path.join(SOURCE_DIR, "..", "shared"))
DATA_DIR = os.path.join(SHARED_DIR, "data")
ALBERT = os.path.join(SHARED_DIR, "tokenizers", "albert-30k-clean.model")

sys.path.insert(0, PYTHON_DIR)
os.environ.pop("HDF5_PLUGIN_PATH", None)
os.environ["MMPACK_BIN"] = os.path.join(BIN_DIR, "mmpack")

import mmpack  # noqa: E402  (after sys.path)


def run(*args, timeout=600):
    """Runs a command (its arguments as str); returns the CompletedProcess, output as text."""
    return subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)

# Where each test session builds its sets: one build per set per session (a few seconds each).
_SETS = {
    # name: (input under DATA_DIR, extra mmpack build options)
    "coco": ("coco-cc/captions.jsonl", {"compression": "zstd"}),
    # 4 shards: 16,16,16,3
    "coco_multi": ("coco-cc/captions.jsonl", {"samples_per_shard": 16, "compression": "zstd"}),
    "coco_raw": ("coco-cc/captions.jsonl", {"compression": "none", "image_size": 96}),
    "openclipart": ("openclipart-pd/captions.jsonl", {"image_size": 64}),
    "skimage": ("skimage-micro/captions.jsonl", {"image_size": (80, 48), "resize_mode": "pad"}),
    "skimage_big": ("skimage-micro/captions.jsonl", {"image_size": 1024}),
}


@pytest.fixture(scope="session")
def build_set(tmp_path_factory):
    """build_set(name) -> the directory of that set, built once per session by mmpack.build."""
    built = {}
    root = tmp_path_factory.mktemp("sets")

    def get(name):
        if name not in built:
            raw, options = _SETS[name]
            out = os.path.join(str(root), name)
            mmpack.build(os.path.join(DATA_DIR, raw), out, tokenizer=ALBERT, lowercase=True,
                         threads=2, **options)
            built[name] = out
        return built[name]

    return get


@pytest.fixture(scope="session")
def coco(build_set):
    return build_set("coco")


@pytest.fixture(scope="session")
def coco_multi(build_set):
    return build_set("coco_multi")


@pytest.fixture(params=["coco", "coco_multi", "coco_raw", "openclipart", "skimage"])
def any_set(request, build_set):
    """Each real set in turn (zstd and raw chunks, one shard and several, three sizes; openclipart
    and skimage with the default, uncompressed)."""
    return build_set(request.param)


def require_data():
    if not os.path.isdir(DATA_DIR):
        pytest.fail("no test data at %s (set MM_SHARED_DIR)" % DATA_DIR)


require_data()


@pytest.fixture(scope="module")
def build_manifest(tmp_path_factory):
    """The input of the interrupted and split builds (build_inputs.py): real photos with
    duplicates and bad samples mixed in."""
    from build_inputs import make_manifest
    return make_manifest(tmp_path_factory.mktemp("build_input"))


@pytest.fixture(scope="module")
def build_reference(build_manifest, tmp_path_factory):
    """{variant: digest of the uninterrupted one-process build} (build_inputs.VARIANTS)."""
    from build_inputs import VARIANTS, reference_build
    return {v: reference_build(build_manifest, tmp_path_factory.mktemp("reference") / v, v)
            for v in VARIANTS}
