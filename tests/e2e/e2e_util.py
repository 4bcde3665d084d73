"""Shared helpers of the mmpack end-to-end tests (tests/e2e/build_*_test.py).

The tests run the real `mmpack` binary on the real data in MM_SHARED_DIR/data and on hostile
files generated in a temporary folder, then read what it wrote with h5py (through the zstd
filter plugin on HDF5_PLUGIN_PATH), h5dump and Debian's sentencepiece, independently of
mmpack's own reader.

Environment (set by ctest from tests/CMakeLists.txt MM_TEST_ENV):
  MM_SHARED_DIR     ../shared (data/, tokenizers/)
  MM_BIN_DIR        the build tree's bin/ (mmpack)
  HDF5_PLUGIN_PATH  the folder holding the zstd filter plugin (id 32015)
  MM_SOURCE_DIR     the checkout
Run with Debian's /usr/bin/python3 (h5py, numpy, PIL, sentencepiece).
"""

import collections
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import unittest
import zlib

import h5py
import numpy as np
import sentencepiece as spm
from PIL import Image, ImageCms, ImageOps

SHARED_DIR = os.environ.get("MM_SHARED_DIR", "")
BIN_DIR = os.environ.get("MM_BIN_DIR", "")
DATA_DIR = os.path.join(SHARED_DIR, "data")
ALBERT = os.path.join(SHARED_DIR, "tokenizers", "albert-30k-clean.model")
MMPACK = os.path.join(BIN_DIR, "mmpack")
SETS = ("coco-cc", "openclipart-pd", "skimage-micro")

# Seconds one mmpack call may take before the test fails (the sets here take a few seconds).
TIMEOUT_S = 240


def require_environment():
    """Raises unittest.SkipTest naming what is missing (never silently passes a check)."""
    missing = [n for n in ("MM_SHARED_DIR", "MM_BIN_DIR", "HDF5_PLUGIN_PATH") if not os.environ.get(n)]
    if missing:
        raise RuntimeError("environment not set (run through ctest): " + ", ".join(missing))
    if not os.access(MMPACK, os.X_OK):
        raise RuntimeError("no mmpack binary at " + MMPACK)


class Run:
    """One finished mmpack process: rc, stdout, stderr (str, UTF-8 with replacement)."""

    def __init__(self, args, proc):
        self.args = args
        self.rc = proc.returncode
        self.stdout = proc.stdout.decode("utf-8", "replace")
        self.stderr = proc.stderr.decode("utf-8", "replace")

    def __str__(self):
        return "mmpack %s -> rc %d\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(self.args), self.rc, self.stdout[-3000:], self.stderr[-3000:])


def mmpack(*args, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=None):
    """Runs `mmpack ARGS...` (in `cwd`, default ours) with pipes for stdout/stderr (not a
    terminal)."""
    args = [str(a) for a in args]
    proc = subprocess.run([MMPACK] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=stdin, timeout=timeout, cwd=cwd)
    return Run(args, proc)


def build(raw, out, *extra, tokenizer=ALBERT, threads=2, lowercase=None):
    """`mmpack build RAW -o OUT` that must succeed (AssertionError otherwise); returns the Run.
    With the ALBERT model, --lowercase is passed (its pieces are lowercase) unless `lowercase`
    is False or `extra` has it already."""
    args = ["build", raw, "-o", out, "--threads", threads]
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    if lowercase is None:
        lowercase = tokenizer == ALBERT
    if lowercase and "--lowercase" not in [str(e) for e in extra]:
        args += ["--lowercase"]
    args += list(extra)
    run = mmpack(*args)
    if run.rc != 0:
        raise AssertionError("build failed: " + str(run))
    return run


def h5dump(*args, timeout=120):
    proc = subprocess.run(["h5dump"] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def xxh3_64_file(path):
    """XXH3-64 (seed 0) of a file as 16 hex digits, through Debian's libxxhash (ctypes)."""
    import ctypes
    lib = ctypes.CDLL("libxxhash.so.0")
    fn = lib.XXH3_64bits
    fn.restype = ctypes.c_uint64
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    with open(path, "rb") as f:
        data = f.read()
    return "%016x" % fn(data, len(data))


def reseal_index(out):
    """Rewrites index.json's bytes and xxh3_64 of every shard after a deliberate edit, so that
    only the edit itself is left for `mmpack verify` to find."""
    path = os.path.join(out, "index.json")
    with open(path) as f:
        idx = json.load(f)
    for s in idx["shards"]:
        shard = os.path.join(out, s["file"])
        s["bytes"] = os.path.getsize(shard)
        s["xxh3_64"] = xxh3_64_file(shard)
    idx["totals"]["bytes"] = sum(s["bytes"] for s in idx["shards"])
    with open(path, "w") as f:
        json.dump(idx, f, indent=2)


def read_manifest_jsonl(path):
    """JSONL manifest -> OrderedDict image path (as written) -> [caption bytes, ...]."""
    samples = collections.OrderedDict()
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            samples.setdefault(row["image"], []).append(row["text"].encode("utf-8"))
    return samples


def _strings(ds):
    """h5py string dataset -> list of bytes (vlen and fixed-length, NULs stripped)."""
    out = []
    for v in ds[()]:
        if isinstance(v, str):
            v = v.encode("utf-8")
        out.append(bytes(v).rstrip(b"\0"))
    return out


class ShardSet:
    """A shard set as h5py sees it: index, report and every sample (images loaded lazily)."""

    def __init__(self, out):
        self.out = out
        with open(os.path.join(out, "index.json"), "rb") as f:
            self.index = json.load(f)
        report = os.path.join(out, "report.json")
        self.report = None
        if os.path.exists(report):
            with open(report, "rb") as f:
                self.report = json.load(f)
        self.samples = []  # dicts: shard, row, key, source, original_size, valid_box, captions, tokens
        self.attrs = []
        for s in self.index["shards"]:
            path = os.path.join(out, s["file"])
            with h5py.File(path, "r") as f:
                self.attrs.append({k: f.attrs[k] for k in f.attrs})
                keys = _strings(f["keys"])
                sources = _strings(f["sources"])
                captions = _strings(f["captions"])
                cap_off = f["caption_offsets"][()]
                tok_off = f["token_offsets"][()]
                tokens = f["tokens"][()]
                osize = f["original_size"][()]
                vbox = f["valid_box"][()]
                for i in range(len(keys)):
                    caps, toks = [], []
                    for c in range(cap_off[i], cap_off[i + 1]):
                        caps.append(captions[c])
                        toks.append([int(t) for t in tokens[tok_off[c]:tok_off[c + 1]]])
                    self.samples.append(dict(shard=path, row=i, key=keys[i], source=sources[i],
                                             original_size=tuple(int(x) for x in osize[i]),
                                             valid_box=tuple(int(x) for x in vbox[i]),
                                             captions=caps, tokens=toks))

    def image(self, sample):
        with h5py.File(sample["shard"], "r") as f:
            return f["images"][sample["row"]]

    def by_source(self):
        """source (bytes, as mmpack stored it) -> sample."""
        return {s["source"]: s for s in self.samples}

    def by_basename(self):
        return {os.path.basename(s["source"].decode("utf-8")): s for s in self.samples}


class Tokenizer:
    """sentencepiece as Debian's Python binding runs it, with mmpack's bos/eos/truncation rule."""

    def __init__(self, model_path, lowercase=None):
        """`lowercase`: lowercase captions first (str.lower(), as `--lowercase`); by default
        for the ALBERT model, which the tests build with --lowercase (build())."""
        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self.lowercase = model_path == ALBERT if lowercase is None else lowercase

    def expected(self, caption_bytes, max_tokens):
        """ids of one caption: [bos] + pieces + [eos] where defined, at most max_tokens."""
        text = caption_bytes.decode("utf-8")
        ids = self.sp.encode(text.lower() if self.lowercase else text)
        bos, eos = self.sp.bos_id(), self.sp.eos_id()
        room = max_tokens - (bos >= 0) - (eos >= 0)
        truncated = len(ids) > room
        ids = ids[:max(room, 0)]
        if bos >= 0:
            ids = [bos] + ids
        if eos >= 0:
            ids = ids + [eos]
        return ids[:max_tokens], truncated


def oriented_rgb(path, background=(255, 255, 255)):
    """PIL's reading of an image as mmpack should see it: first frame, EXIF-oriented,
    alpha composited onto `background`, 8-bit RGB, converted to sRGB from an embedded RGB or
    grey ICC profile that is not sRGB (ImageCms, relative colorimetric)."""
    im = Image.open(path)
    im.seek(0)
    icc = im.info.get("icc_profile")
    im = ImageOps.exif_transpose(im)
    if icc and im.mode in ("RGB", "L") and icc[16:20] == (b"RGB " if im.mode == "RGB" else b"GRAY"):
        src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        if not re.search(r"(?<![A-Za-z0-9])sRGB(?![A-Za-z0-9])", ImageCms.getProfileDescription(src)):
            im = ImageCms.profileToProfile(im, src, ImageCms.createProfile("sRGB"),
                                           renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
                                           outputMode="RGB")
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        im = Image.fromarray((np.asarray(im, dtype=np.uint32) >> 8).astype(np.uint8), "L")
    if im.mode == "P":
        im = im.convert("RGBA")
    if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
        im = im.convert("RGBA")
        bg = Image.new("RGBA", im.size, tuple(background) + (255,))
        im = Image.alpha_composite(bg, im)
    return im.convert("RGB")


def reference_image(path, width, height, mode="center-crop", background=(255, 255, 255)):
    """An independent PIL implementation of mmpack's resize modes: [height, width, 3] uint8."""
    im = oriented_rgb(path, background)
    w, h = im.size
    if mode == "stretch":
        return np.asarray(im.resize((width, height), Image.LANCZOS))
    if mode == "center-crop":
        scale = max(width / w, height / h)
        nw, nh = max(width, round(w * scale)), max(height, round(h * scale))
        im = im.resize((nw, nh), Image.LANCZOS)
        x, y = (nw - width) // 2, (nh - height) // 2
        return np.asarray(im.crop((x, y, x + width, y + height)))
    scale = min(width / w, height / h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = Image.new("RGB", (width, height), tuple(background))
    canvas.paste(im.resize((nw, nh), Image.LANCZOS), ((width - nw) // 2, (height - nh) // 2))
    return np.asarray(canvas)


def mean_abs_diff(a, b):
    return float(np.mean(np.abs(a.astype(np.int16) - b.astype(np.int16))))


def png_bytes(width, height, rows, bit_depth=8, color_type=2, header_height=None):
    """A PNG written by hand (16-bit RGB; huge headers PIL will not write).
    rows: raw scanline bytes without the filter byte (callable(y) -> bytes, or one bytes reused).
    header_height: a height for IHDR other than the rows given (a file cut short: no IEND)."""
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff)
    comp = zlib.compressobj(9)
    raw = []
    for y in range(height):
        row = rows(y) if callable(rows) else rows
        raw.append(comp.compress(b"\0" + row))
    raw.append(comp.flush())
    idat = b"".join(raw)
    ihdr = struct.pack(">IIBBBBB", width, header_height or height, bit_depth, color_type, 0, 0, 0)
    body = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat)
    if header_height is None:
        body += chunk(b"IEND", b"")
    return body


class TempDirTest(unittest.TestCase):
    """A test class with one temporary folder (self.tmp / cls.tmp) removed at the end."""

    @classmethod
    def setUpClass(cls):
        require_environment()
        cls.tmp = tempfile.mkdtemp(prefix="mm_e2e_")
        if os.environ.get("MM_KEEP_TMP"):
            print("keeping", cls.tmp)
        else:
            cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
