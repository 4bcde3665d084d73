"""mmpack.Writer: builds a shard set from samples a program hands over one by one.

    with mmpack.Writer("shards/", image_size=224, tokenizer="spm.model") as w:
        for row in rows:
            w.write(image=row["jpeg"], captions=[row["text"]], key=row["id"])

The samples are streamed to `mmpack build - --input-format feed` (the compiler, a separate
process: it links sentencepiece, whose protobuf must not meet torch's in one process; so this
module imports neither). The build after the samples is `mmpack build`'s own: the same drops,
report.json, tokenizer and pipeline, and the same shards, byte for byte, as `mmpack build` of
the same samples in the same order (index.json differs only in "input_format": "feed").
"""

import collections
import json
import os
import struct
import subprocess
import sys
import threading
import warnings
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from mmpack import _resources
from mmpack._build import _WARNING_PREFIX, BuildError, BuildWarning, _flag_args, find_mmpack
from mmpack._shard_set import PathLike

_MAGIC = b"MMFEED1\n"  # tools/src/ingest/feed.h: the stream's format
_REFUSED = {"part": "a Writer's samples come once, in one process",
            "resume": "a Writer's samples come once: write them again into a new build",
            "input_format": "a Writer feeds its samples itself"}
# FieldValue::Type (tools/src/ingest/ingest.h)
_MISSING, _INT, _FLOAT, _STRING, _UINT = range(5)

ImageLike = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", Any]


def _str(value: Union[str, bytes]) -> bytes:
    # Lone surrogates pass through as the bytes they would be, so that the build reports them
    # as invalid_utf8, as it does a manifest's "\\ud800".
    data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    return struct.pack("<I", len(data)) + data


def _field(name: str, value: Any) -> bytes:
    if value is None:
        return struct.pack("<B", _MISSING)
    if isinstance(value, bool):
        raise TypeError("metadata[%r]: a bool is not stored; give an int (0/1) or a str" % name)
    if isinstance(value, int):
        if -(1 << 63) <= value < (1 << 63):
            return struct.pack("<Bq", _INT, value)
        if value < (1 << 64):
            return struct.pack("<BQ", _UINT, value)
        raise ValueError("metadata[%r] = %d is outside [-2**63, 2**64)" % (name, value))
    if isinstance(value, float):
        return struct.pack("<Bd", _FLOAT, value)
    if isinstance(value, (str, bytes)):
        return struct.pack("<B", _STRING) + _str(value)
    raise TypeError("metadata[%r]: %s is not stored (int, float, str or None)" %
                    (name, type(value).__name__))


def _png(pixels: memoryview) -> bytes:
    """[H, W, 3] uint8 pixels as a PNG without compression (stored deflate blocks): a lossless
    container the build decodes; the work of fitting and encoding stays on its threads."""
    height, width, _ = pixels.shape
    raw = pixels.tobytes()  # C order, whatever the strides
    row = width * 3
    # Each row opens with filter byte 0 (none).
    rows = b"".join(b"\x00" + raw[y * row:(y + 1) * row] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0))
            + chunk(b"IEND", b""))


class Writer:
    """Writes a shard set from samples given one by one: `mmpack build`'s compiler fed by the
    program instead of files (see the module's docstring; README "Writing from Python").

    Args:
        out: the output directory (must not exist unless overwrite=True).
        image_size: pixels, N (N x N) or (W, H), as --image-size (None: its default, 224; the
            keep-ratio resize modes take max_size= instead).
        codec: "raw" (decoded pixels) or "jpeg", as --codec (None: raw).
        tokenizer: a tokenizer file (as --tokenizer), "none" for captions as text only, or None
            to train a SentencePiece model on the captions at close() (they are all known by
            then, as in `mmpack build`).
        keep_fields: the metadata keys stored per sample (metadata/<name>), as --keep-fields;
            write()'s metadata may hold only these (and min_score's field).
        min_score: "FIELD=VALUE": drop samples whose metadata FIELD is missing or below VALUE.
        verbose: pass the compiler's progress and summary (stderr) through to sys.stderr.
        mmpack: the binary to run (default: find_mmpack()).
        **options: the other `mmpack build --help` flags with _ for -: samples_per_shard=1000,
            resize_mode="pad", compression="zstd", threads=8, overwrite=True, append=True...;
            part, resume and input_format are refused (ValueError).

    Errors: ValueError (an option a Writer refuses), BuildError (the compiler refused an
    option or OUT, e.g. "output 'x' already exists": raised here, before any sample);
    FileNotFoundError (no mmpack binary).

    Not thread-safe: one thread writes. The samples are spooled by the compiler (image bytes
    on disk in OUT.mmpack-feed beside OUT, as much disk as the bytes given; paths as they
    are); decoding, fitting, encoding and tokenizing run on
    its threads at close(), after every sample is known, as `mmpack build` runs after reading
    its manifest. A Writer cannot be resumed: the compiler gets the samples once (a Writer that
    fails or is left without close() publishes nothing; write the samples again).
    """

    def __init__(self, out: PathLike, *, image_size: Union[int, Sequence[int], None] = None,
                 codec: Optional[str] = None, tokenizer: Optional[PathLike] = None,
                 keep_fields: Optional[Sequence[str]] = None, min_score: Optional[str] = None,
                 verbose: bool = False, mmpack: Optional[str] = None,
                 **options: Union[str, int, bool, None]) -> None:
        for name, why in _REFUSED.items():
            if options.get(name):
                raise ValueError("Writer: %s= is not an option of a Writer (%s)" % (name, why))
        self._extra: List[str] = list(keep_fields or [])
        if min_score:
            field = str(min_score).split("=", 1)[0]
            if field not in self._extra:
                self._extra.append(field)
        flags = dict(image_size=image_size, codec=codec,
                     tokenizer=os.fspath(tokenizer) if tokenizer is not None else None,
                     keep_fields=list(keep_fields) if keep_fields else None, min_score=min_score)
        flags.update(options)
        self._out = os.fspath(out)
        self._verbose = verbose
        cmd = [mmpack or find_mmpack(), "build", "-", "--input-format", "feed", "-o", self._out]
        cmd += _flag_args(flags)
        self._tail: "collections.deque[str]" = collections.deque(maxlen=50)
        self._warnings: List[str] = []
        self._count = 0
        self._index: Optional[Dict[str, Any]] = None
        self._proc: Optional[subprocess.Popen] = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=_resources.program_env(),
            # Ctrl-C reaches this process only: the Writer's with block then ends the stream
            # without its end record, and the compiler removes what it made.
            start_new_session=True)
        self._stderr = threading.Thread(target=self._drain, daemon=True)
        self._stderr.start()
        assert self._proc.stdout is not None
        # "ready": the options were accepted and OUT claimed (tools/src/build/feed_source.h).
        if self._proc.stdout.readline() != b"ready\n":
            self._finish(expect_ok=False)
        self._send(_MAGIC)

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in self._proc.stderr:
            line = raw.decode("utf-8", "replace")
            self._tail.append(line.rstrip("\n"))
            if line.startswith(_WARNING_PREFIX):
                self._warnings.append(line[len(_WARNING_PREFIX):].rstrip("\n"))
            if self._verbose:
                sys.stderr.write(line)

    def _send(self, *parts: Union[bytes, memoryview]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            for part in parts:
                self._proc.stdin.write(part)  # the GIL is released while the pipe takes it
        except (BrokenPipeError, OSError):
            self._finish(expect_ok=False)  # the compiler stopped: raise its error line

    def _finish(self, expect_ok: bool) -> Optional[Dict[str, Any]]:
        """Closes the stream, waits for the compiler; raises BuildError unless it succeeded."""
        proc, self._proc = self._proc, None
        if proc is None:
            return self._index
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass  # a pipe the compiler closed first
        try:
            proc.wait()
        except BaseException:  # Ctrl-C while the build runs: stop it, publish nothing
            proc.terminate()
            proc.wait()
            raise
        self._stderr.join()
        for text in self._warnings:
            warnings.warn(text, BuildWarning, stacklevel=3)
        if proc.returncode != 0 or not expect_ok:
            lines = [l for l in self._tail if l.strip() and not l.startswith("Run with --help")]
            message = (lines[-1] if lines else
                       "mmpack build exited with status %d" % proc.returncode)
            raise BuildError(message, proc.returncode, "\n".join(self._tail))
        with open(os.path.join(self._out, "index.json"), encoding="utf-8") as f:
            self._index = json.load(f)
        return self._index

    def write(self, image: ImageLike, captions: Sequence[Union[str, bytes]] = (), *,
              metadata: Optional[Mapping[str, Any]] = None, key: Optional[str] = None,
              source: Optional[str] = None) -> None:
        """Adds one sample; it is read, checked and written at close(), in the order given.

        Args:
            image: the encoded image as bytes (JPEG, PNG, WebP, GIF, TIFF, BMP, as a file of
                them holds it); a path (str or os.PathLike, read by the compiler, relative to
                the current folder); or decoded pixels, [H, W, 3] uint8 RGB (a numpy array or
                any buffer of that shape, e.g. memoryview(...).cast("B", (H, W, 3))), passed to
                the compiler losslessly.
            captions: the sample's captions (str, or bytes taken as UTF-8), in order; bad ones
                (empty, over --max-caption-bytes, not UTF-8) are dropped as `mmpack build`
                drops them, and a sample left without one is dropped (report.json).
            metadata: values of keep_fields (and min_score's field): int, float, str or None
                (missing), as a manifest's fields.
            key: the sample's key, unique in the set (default: source without its extension).
                A repeated key is made unique as `mmpack build` does ("KEY#2", ...).
            source: what report.json and the shards name the sample by (default: the path as
                given; for bytes or pixels, the key, else the sample's 0-based position).

        Errors: ValueError (a closed Writer; pixels that are not [H, W, 3] uint8; a metadata
        key not in keep_fields), TypeError (an image or value of another type), BuildError
        (the compiler stopped: its error line). A bad image is not an error: it is dropped at
        close() and listed in OUT/report.json.
        """
        if self._proc is None:
            raise ValueError("write to a closed Writer (%s)" % self._out)
        fields = []
        meta = dict(metadata or {})
        unknown = [k for k in meta if k not in self._extra]
        if unknown:
            raise ValueError("metadata key %r is not kept: pass keep_fields=[...] naming it (kept: "
                             "%s)" % (unknown[0], self._extra))
        for name in self._extra:
            fields.append(_field(name, meta.get(name)))
        payload: Union[bytes, memoryview]
        if isinstance(image, (str, os.PathLike)):
            given = os.fsdecode(image)
            if source is None:
                source = given
            kind = b"P" + _str(os.fsdecode(os.path.abspath(given)))
            payload = b""
        else:
            if isinstance(image, (bytes, bytearray)):
                view = memoryview(image)
            else:
                try:
                    view = memoryview(image)
                except TypeError:
                    raise TypeError("image: bytes, a path or [H, W, 3] uint8 pixels, not %s" %
                                    type(image).__name__) from None
            if view.ndim == 3:
                if view.format not in ("B", "<B", "=B") or view.shape[2] != 3:
                    raise ValueError("image: pixels must be [H, W, 3] uint8, got shape %s format "
                                     "%r" % (tuple(view.shape), view.format))
                view = memoryview(_png(view))
            elif view.ndim != 1:
                raise ValueError("image: pixels must be [H, W, 3] uint8, got %d dimensions" %
                                 view.ndim)
            view = view.cast("B") if view.format != "B" or view.itemsize != 1 else view
            if source is None:
                source = key if key else str(self._count)
            kind = b"B" + struct.pack("<Q", view.nbytes)
            payload = view
        if isinstance(captions, (str, bytes)):
            captions = [captions]
        header = [b"S", _str(key or ""), _str(source), struct.pack("<I", len(captions))]
        header += [_str(c) for c in captions]
        header += [struct.pack("<I", len(fields))] + fields + [kind]
        self._send(b"".join(header), payload)
        self._count += 1

    def close(self) -> Dict[str, Any]:
        """Ends the samples and runs the build: decode, fit, encode, tokenize on the compiler's
        threads, then report.json and index.json, and publishes OUT. Returns index.json as a
        dict (mmpack.ShardSet(out) opens the set); again the same dict if called again.
        Errors: BuildError (the compiler failed, e.g. no usable sample: nothing is published).
        Warnings: as mmpack.build (BuildWarning)."""
        if self._proc is not None:
            self._send(b"E" + struct.pack("<Q", self._count))
        result = self._finish(expect_ok=True)
        assert result is not None
        return result

    def abort(self) -> None:
        """Stops without publishing: the stream ends without its end record, so the compiler
        removes what it made. A Writer given up in a `with` block that raised is aborted."""
        try:
            self._finish(expect_ok=True)
        except BuildError:
            pass

    @property
    def closed(self) -> bool:
        """Whether close() or abort() has run (write() then raises ValueError)."""
        return self._proc is None

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None:
            self.abort()
