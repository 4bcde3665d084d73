"""mmpack.ShardSet: random access to the samples of a shard set."""

import json
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from mmpack import _mmpack

PathLike = Union[str, "os.PathLike[str]"]


class ShardSet:
    """A shard set opened from its index.json (written by `mmpack build`).

    Opening maps every shard read-only and learns where each image chunk lies; every offset is
    checked against the file first (reader/README.md lists the checks). Afterwards the set is
    immutable and safe to read from several threads. Reading an image decompresses one zstd
    chunk (about 0.1 ms at 224 px) with the GIL released.

    Errors: FileNotFoundError (no index.json or a shard missing), mmpack.CorruptionError (index
    and shard disagree, a chunk or table outside the file, a checksum mismatch with
    verify_checksums; the message names the shard), mmpack.UnsupportedError (a format version
    outside the readable range), OSError (open or mmap failed).

    A remote set ("s3://BUCKET/PREFIX", "http(s)://HOST/PATH"; S3 credentials, region and
    endpoint from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION,
    AWS_ENDPOINT_URL) reads only index.json at open. Each per-sample access downloads the
    sample's shard into the cache (checked against index.json's XXH3-64) unless it is there,
    and keeps the last shard used pinned (resident, never evicted), so reading a shard's
    samples in order downloads and maps it once; random access across shards re-pins (a cache
    hit, or a download when the cache limit evicted it). Remote errors: OSError naming the URL
    after the retries, FileNotFoundError (HTTP 404), mmpack.CorruptionError (checksum).

    A mixture of sets ("a:0.7,b:0.3", or a JSON file {"sets": [{"path": ..., "weight": ...}],
    "epoch_size": N}; reader/README.md "Several sets by weight") opens as one ShardSet: len() is
    the sum of the sets' samples, global index i runs through the sets in the mixture's order
    (set 0's samples first), the same indices a Loader's batch["indices"] gives; `sets` lists
    each set (path, weight, first index, samples, its share of a Loader's epoch) and
    set_of(i) says which set holds sample i (a batch's "set_index"). The weights matter only
    to a Loader's epoch. The sets must share their tokenizer; they may be stored at different
    image sizes (a Loader over them then needs output_size).

    Args:
        path: the set's directory (holding index.json), a remote set's URL, or a mixture.
        verify_checksums: recompute every shard's XXH3-64 and compare with index.json (reads
            every byte of the set once).
        cache_dir: a remote set's shard cache (None: $XDG_CACHE_HOME/mmpack, else
            ~/.cache/mmpack); processes may share it.
        cache_limit: bytes the cache may hold, an int or a size with a unit such as "20GiB" or
            "500MB" (powers of 1024 for K/KiB..., of 1000 for KB...; 0: no limit; least recently
            used shards are evicted, never a pinned one). ValueError when it is not a size.
    """

    def __init__(self, path: PathLike, *, verify_checksums: bool = False,
                 cache_dir: Optional[PathLike] = None,
                 cache_limit: Union[int, str] = 0) -> None:
        text = os.fspath(path)
        # A local set: absolute, so that info, pickling and messages do not depend on a later
        # chdir. A remote one stays its URL; a mixture "a:0.7,b:0.3" as given (the C++ parser
        # owns its syntax; each local set of it is opened relative to the working directory).
        root = text if is_remote(text) or _is_mixture_list(text) else os.path.abspath(text)
        self._set = _mmpack.ShardSet(
            root, verify_checksums=verify_checksums,
            cache_dir=os.path.abspath(os.fspath(cache_dir)) if cache_dir is not None else "",
            cache_limit=byte_size(cache_limit))
        self._info: Optional[Dict[str, Any]] = None

    def __len__(self) -> int:
        """Samples (images) in the set."""
        return len(self._set)

    def __getitem__(self, i: int) -> Dict[str, Any]:
        """Sample `i` (negative counts from the end) as a dict:

        - "image": numpy uint8 [H, W, 3], RGB, row-major (a new array), the stored image: H, W
          are image_shape's, or in a keep-ratio set (format 2) the sample's own image_size(i);
        - "captions": list of str, the sample's captions as the input gave them;
        - "tokens": list of numpy int32 [n_c] arrays, the token ids of each caption (bos/eos
          included where the tokenizer defines them), in the order of "captions";
        - "key": str, the sample's key, unique in the set;
        - "source": str, the image's path (or tar member) as the input gave it;
        - "metadata": dict of the manifest fields kept with `mmpack build --keep-fields`
          ({} when none), see metadata(i);
        - "index": int, the sample's index in [0, len).

        Captions and source are HDF5 strings in format 1, read through HDF5 (tens of
        microseconds, shards kept open, at most 8 at a time); the rest comes from the mapping.
        For images alone, image(i) is cheaper. Errors: IndexError, mmpack.CorruptionError.
        """
        return self._set[i]

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for i in range(len(self)):
            yield self._set[i]

    def image(self, i: int, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Decodes sample i's image: numpy uint8 [H, W, 3], RGB, row-major; into `out` when
        given (a writable C-contiguous uint8 array of that shape, else ValueError), else into
        a new array. Errors: IndexError, mmpack.CorruptionError (names shard and sample)."""
        return self._set.image(i, out=out)

    def image_size(self, i: int) -> Tuple[int, int]:
        """(width, height) of sample i's stored image, pixels: image_shape's, except in a
        keep-ratio set (``mmpack build --codec jpeg --resize-mode keep-ratio[-largest]``),
        whose images keep their aspect ratio (the shard's image_size table)."""
        return self._set.image_size(i)

    def tokens(self, i: int) -> List[np.ndarray]:
        """Token ids of each caption of sample i: a list of numpy int32 [n_c] arrays (copies)."""
        return self._set.tokens(i)

    def captions(self, i: int) -> List[str]:
        """Captions of sample i (str), in the order of tokens(i). Read through HDF5."""
        return self._set.captions(i)

    def source(self, i: int) -> str:
        """Sample i's image path (or tar member) as the input gave it. Read through HDF5."""
        return self._set.source(i)

    def metadata(self, i: int) -> Dict[str, Union[int, float, str]]:
        """Sample i's kept manifest fields (`mmpack build --keep-fields`): {name: value} in the
        order of metadata_fields, as the shard stores them (schemas/FORMAT.md "Kept fields"):
        int from an int64 column, float from a float64 one (a missing value is nan), str from a
        string one (a missing value is ""). {} when the set keeps no field. Read through HDF5.
        Errors: IndexError, mmpack.CorruptionError (a column that is not [N] int64, float64 or
        UTF-8 strings)."""
        return self._set.metadata(i)

    @property
    def metadata_fields(self) -> List[str]:
        """Names of the kept manifest fields (index.json "metadata.fields"), [] when none."""
        return list(self._set.metadata_fields)

    def key(self, i: int) -> str:
        """Sample i's key (unique in the set)."""
        return self._set.key(i)

    def locate(self, i: int) -> str:
        """Where sample i lives, as messages name it: "shard-000002.h5 sample 17"."""
        return self._set.locate(i)

    @property
    def info(self) -> Dict[str, Any]:
        """index.json as a dict (format_version, image size, compression, tokenizer with
        vocab_size / pad_id / bos_id / eos_id, shards, totals; schemas/FORMAT.md). Read once,
        on first use. A mixture: {"mixture": root, "sets": [each set's index.json dict with its
        "path" and "weight" added]}."""
        if self._info is None:
            sets = self._set.sets
            if len(sets) == 1 and sets[0]["weight"] is None and sets[0]["path"] == self.root:
                self._info = json.loads(self._set.index_text())
            else:
                self._info = {"mixture": self.root, "sets": [
                    dict(json.loads(self._set.index_text(p)), path=s["path"], weight=s["weight"])
                    for p, s in enumerate(sets)]}
        return self._info

    @property
    def sets(self) -> List[Dict[str, Any]]:
        """The sets opened, in the mixture's order (one for a single set), each a dict:
        "path" (str, as the mixture names it), "weight" (float, or None when the mixture gives
        none: the sets concatenated), "first" (int: global index of its first sample),
        "samples", "captions" (int), "epoch_samples" (int: items a Loader's epoch draws from
        it with caption_mode="random": its weighted share of the epoch) and "image_shape"
        ((H, W, 3), its stored size)."""
        return self._set.sets

    def set_of(self, i: int) -> int:
        """Which of `sets` holds sample i (negative counts from the end): the batch key
        "set_index" of a Loader. Errors: IndexError."""
        return self._set.set_of(i)

    @property
    def root(self) -> str:
        """The set's directory (absolute), or a remote set's URL."""
        return self._set.root

    @property
    def remote(self) -> bool:
        """True for a set read from s3:// or http(s)://."""
        return self._set.remote

    @property
    def image_shape(self) -> Tuple[int, int, int]:
        """(H, W, 3), pixels: the shape of every image, and the loader's default output size;
        in a keep-ratio set (format 2) (max_size, max_size, 3), each stored image having its
        own size (image_size). A mixture: the first set's (`sets` gives each set's)."""
        return self._set.image_shape

    @property
    def num_captions(self) -> int:
        """Captions in the set (>= len(self): every sample has at least one)."""
        return self._set.num_captions

    @property
    def pad_id(self) -> int:
        """The token id that pads Loader batches' token rows (index.json tokenizer.pad_id)."""
        return self._set.pad_id

    @property
    def vocab_size(self) -> int:
        """Token ids lie in [0, vocab_size)."""
        return self._set.vocab_size

    def __repr__(self) -> str:
        h, w, c = self.image_shape
        return "mmpack.ShardSet(%r: %d samples, %d captions, %dx%dx%d)" % (
            self.root, len(self), self.num_captions, h, w, c)

    def __reduce__(self):
        # Pickled as its path (for DataLoader workers started with spawn): reopened on load.
        return (_reopen, (self.root, self._set.verify_checksums, self._set.cache_dir or None,
                          self._set.cache_limit))


def _reopen(root: str, verify_checksums: bool, cache_dir: Optional[str] = None,
            cache_limit: int = 0) -> ShardSet:
    return ShardSet(root, verify_checksums=verify_checksums, cache_dir=cache_dir,
                    cache_limit=cache_limit)


def byte_size(value: Union[int, str]) -> int:
    """`value` in bytes: an int as it is, "0" as 0, else a size such as "20GiB" (ValueError)."""
    if isinstance(value, str):
        return 0 if value.strip() == "0" else _mmpack.parse_byte_size(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError("a byte size is an int or a str such as '20GiB', not %r" % (value,))
    if not 0 <= int(value) < 2 ** 63:
        raise ValueError("a byte size must be in [0, 2**63), not %d" % int(value))
    return int(value)


def _is_mixture_list(path: str) -> bool:
    """True when `path` is not an existing file or folder but lists sets ("a:0.7,b:0.3", "a,b",
    "a:2"): the C++ reader parses it (mm/internal/mixture.h)."""
    return not os.path.exists(path) and ("," in path or ":" in path)


def is_remote(path: str) -> bool:
    """True when `path` names a remote set (s3://, http://, https://)."""
    return path.startswith(("s3://", "http://", "https://"))
