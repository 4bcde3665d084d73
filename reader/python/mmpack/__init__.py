"""mmpack: read mmpack shard sets from Python at the C++ reader's speed.

    import mmpack
    loader = mmpack.Loader("shards/", batch_size=32, as_torch=True)
    for epoch in range(10):
        loader.set_epoch(epoch)
        for batch in loader:
            images = batch["images"]   # [B, H, W, 3] uint8 (torch.Tensor with as_torch=True)
            tokens = batch["tokens"]   # [B, L] int32, padded with the set's pad_id

- ShardSet(path): random access to samples (image, captions, token ids, key, source).
- Loader(path_or_set, batch_size, ...): this rank's shuffled batches, decoded by C++ threads
  outside the GIL; set_epoch / state_dict / load_state_dict as PyTorch's DistributedSampler
  and torchdata's StatefulDataLoader have them; a torch.utils.data.IterableDataset of batches
  where torch is importable (DataLoader(loader, batch_size=None)); pad_to=77 for one token
  shape; transform= / text_transform= run in a thread ahead of the loop.
- build(raw, out, **options): runs `mmpack build` (the compiler of raw image-text pairs).
- Writer(out, image_size=..., codec=..., tokenizer=...): the same compiler fed sample by
  sample from Python (w.write(image=bytes|path|[H, W, 3] uint8, captions=[...], key=...));
  the same shards, byte for byte, as `mmpack build` of the same samples.
- plugin_dir(): the folder of the zstd HDF5 filter plugin that came with the package
  (HDF5_PLUGIN_PATH for h5dump, or for an h5py whose libhdf5 is not the one mmpack links).

Importing mmpack registers the zstd HDF5 filter (id 32015) with the process's libhdf5, so h5py
(Debian's, which links the same libhdf5) reads zstd shards without HDF5_PLUGIN_PATH.

Errors: FileNotFoundError (no set, no shard), ValueError (a bad option or loader state),
IndexError (a sample index out of range), mmpack.CorruptionError (a damaged shard; the
message names the shard file and the sample), mmpack.UnsupportedError (a format version this
mmpack cannot read), mmpack.BuildError (`mmpack build` failed); all of mmpack's own derive
from mmpack.Error. What `mmpack build` warns of (a high <unk> rate, ...) comes as
warnings.warn(mmpack.BuildWarning).
"""

from typing import TYPE_CHECKING, Any

from mmpack._mmpack import (  # noqa: F401  (re-exported)
    CorruptionError,
    Error,
    UnsupportedError,
    hdf5_version,
    zstd_filter_registered,
)
from mmpack._build import BuildError, BuildWarning, build, find_mmpack  # noqa: F401
from mmpack._config import VERSION as __version__  # noqa: F401
from mmpack._resources import plugin_dir  # noqa: F401
from mmpack._shard_set import ShardSet  # noqa: F401
from mmpack._writer import Writer  # noqa: F401

if TYPE_CHECKING:
    from mmpack._loader import Loader  # noqa: F401


def __getattr__(name: str) -> Any:
    # mmpack.Loader is a torch.utils.data.IterableDataset where torch is importable, so its
    # module imports torch (about 2 s): loaded on first use (PEP 562), so that `import mmpack`
    # for the CLI, ShardSet or build never pays for it.
    if name == "Loader":
        from mmpack._loader import Loader
        globals()["Loader"] = Loader  # found directly from now on
        return Loader
    raise AttributeError("module 'mmpack' has no attribute %r" % (name,))


def __dir__() -> "list[str]":
    return sorted(set(globals()) | {"Loader"})

__all__ = [
    "BuildError",
    "BuildWarning",
    "CorruptionError",
    "Error",
    "Loader",
    "ShardSet",
    "UnsupportedError",
    "Writer",
    "build",
    "find_mmpack",
    "hdf5_version",
    "plugin_dir",
    "zstd_filter_registered",
]
