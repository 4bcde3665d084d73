"""Helpers of the packaging tests (tests/package): run a command, copy the checkout, use an
installed mmpack from another folder, find build-machine paths in installed files.

ctest passes (tests/package/CMakeLists.txt): MM_SOURCE_DIR (the checkout), MM_BUILD_ROOT (its
build tree), MM_BIN_DIR, MM_SHARED_DIR (data, tokenizers), MM_PYTHON (the interpreter of the
build tree's module), MM_WERROR, MM_TRAINER (ON/OFF: whether mmtrain is built).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = os.environ["MM_SOURCE_DIR"]
BUILD_ROOT = os.environ["MM_BUILD_ROOT"]
SHARED_DIR = os.environ["MM_SHARED_DIR"]
PYTHON = os.environ.get("MM_PYTHON", "/usr/bin/python3")
TRAINER = os.environ.get("MM_TRAINER", "OFF") == "ON"
RAW = os.path.join(SHARED_DIR, "data", "skimage-micro", "captions.jsonl")
ALBERT = os.path.join(SHARED_DIR, "tokenizers", "albert-30k-clean.model")
RAW_SAMPLES = 12  # lines of captions.jsonl; images repeat: counted below from index.json


def run(cmd, timeout=900, check=True, **kwargs):
    """Runs `cmd` (a list); returns the CompletedProcess with stdout+stderr as text. With
    check, a non-zero exit fails with the command's output."""
    cmd = [str(c) for c in cmd]
    start = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", timeout=timeout, **kwargs)
    r.seconds = time.monotonic() - start
    if check and r.returncode != 0:
        raise AssertionError("%s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stdout[-6000:]))
    return r


def copy_checkout(dest):
    """Copies the checkout's sources (not its build trees, outputs or .git) to `dest`."""
    everywhere = shutil.ignore_patterns("node_modules", "__pycache__", "*.pyc")
    at_top = shutil.ignore_patterns(".git", "build*", "out*", "runs")  # as .gitignore's /build*/

    def ignore(folder, names):
        skipped = set(everywhere(folder, names))
        if os.path.samefile(folder, SOURCE_DIR):  # tools/src/build/ is source, not a build tree
            skipped |= set(at_top(folder, names))
        return skipped

    shutil.copytree(SOURCE_DIR, dest, ignore=ignore, symlinks=True)


# Run by the installed package's interpreter from an empty folder: compiles a small set with
# mmpack.build (the package's own mmpack program), reads it back through ShardSet and one Loader
# epoch, and reports where everything came from.
USE_SCRIPT = r"""
import json, os, sys
sys.modules["torch"] = None  # what the package itself loads: torch, when a user has it, brings
import mmpack                # its own libraries (Debian's links libhdf5); Loader is then a plain class
raw, out, tokenizer = sys.argv[1:4]
index = mmpack.build(raw, out, tokenizer=tokenizer, image_size=32, samples_per_shard=4)
s = mmpack.ShardSet(out)
image = s[0]["image"]
loader = mmpack.Loader(out, batch_size=3, seed=1, num_threads=2, drop_last=False)
loader.set_epoch(0)
seen = sorted(int(i) for b in loader for i in b["indices"])
print("USE " + json.dumps({
    "module": mmpack.__file__, "extension": mmpack._mmpack.__file__,
    "mmpack": mmpack.find_mmpack(), "plugin": mmpack.plugin_dir(),
    "samples": len(s), "shards": len(index["shards"]), "shape": list(image.shape),
    "epoch": seen, "maps": sorted({l.split()[-1] for l in open("/proc/self/maps")
                                   if ".so" in l.split()[-1]})}))
"""


def use_installed(python, workdir, env=None, wrap=()):
    """Runs USE_SCRIPT with `python` in `workdir` (no PYTHONPATH, no MMPACK_BIN unless `env`
    sets them); returns its report as a dict. `wrap`: a command prefix (a mount namespace)."""
    os.makedirs(workdir, exist_ok=True)
    script = os.path.join(workdir, "use_mmpack.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(USE_SCRIPT)
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "MMPACK_BIN", "HDF5_PLUGIN_PATH")}
    base.update(env or {})
    r = run(list(wrap) + [python, script, RAW, os.path.join(workdir, "set"), ALBERT],
            cwd=workdir, env=base, timeout=600)
    lines = [line for line in r.stdout.splitlines() if line.startswith("USE ")]
    if not lines:
        raise AssertionError("no report from the installed mmpack:\n" + r.stdout[-4000:])
    return json.loads(lines[-1][4:])


def build_paths():
    """The absolute folders of this build that nothing installed may name."""
    paths = {os.path.realpath(SOURCE_DIR), os.path.realpath(BUILD_ROOT),
             os.path.abspath(SOURCE_DIR), os.path.abspath(BUILD_ROOT)}
    return sorted(p for p in paths if len(p) > 1)


def files_naming(root, paths):
    """The files under `root` whose bytes contain one of `paths` (as "file: path")."""
    needles = [p.encode() for p in paths]
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            found += ["%s: %s" % (path, n.decode()) for n in needles if n in data]
    return found


class TempDirTest(unittest.TestCase):
    """A temporary folder per class (under TMPDIR: tests/run.sh's per-run folder)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix=cls.__name__ + "-")

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("MM_KEEP_TMP"):
            shutil.rmtree(cls.tmp, ignore_errors=True)


def main(ordered_tests):
    """Runs the named tests of their classes in the given order (later ones use what earlier
    ones installed); exits non-zero on a failure."""
    suite = unittest.TestSuite(ordered_tests)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
