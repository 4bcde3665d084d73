"""mmpack.Loader: this rank's batches of a shard set, for PyTorch training loops."""

import json
import operator
import os
import pickle
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from mmpack import _ahead, _device, _mmpack, _tokens, _torch
from mmpack._device import ARRAY_KEYS as _ARRAY_KEYS
from mmpack._shard_set import PathLike, ShardSet

if TYPE_CHECKING:
    import torch
_CAPTION_MODES = {"random": _mmpack.CaptionMode.RANDOM, "all": _mmpack.CaptionMode.ALL}
_SHUFFLE_MODES = {"auto": _mmpack.ShuffleMode.AUTO, "global": _mmpack.ShuffleMode.GLOBAL,
                  "block": _mmpack.ShuffleMode.BLOCK}


_CROPS = {"none": _mmpack.ImageCrop.NONE, "center": _mmpack.ImageCrop.CENTER,
          "rrc": _mmpack.ImageCrop.RANDOM_RESIZED}
_INTERPOLATIONS = {"lanczos": _mmpack.Interpolation.LANCZOS,
                   "bilinear": _mmpack.Interpolation.BILINEAR}


def _augmentation(options: "_mmpack.LoaderOptions", crop: str,
                  output_size: Optional[Tuple[int, int]], horizontal_flip: bool,
                  interpolation: str = "bilinear") -> None:
    """The one place where the Python augmentation keywords become LoaderOptions fields."""
    if crop not in _CROPS:
        raise ValueError("crop must be 'none', 'center' or 'rrc', not %r" % (crop,))
    options.crop = _CROPS[crop]
    if interpolation not in _INTERPOLATIONS:
        raise ValueError("interpolation must be 'lanczos' or 'bilinear', not %r"
                         % (interpolation,))
    options.interpolation = _INTERPOLATIONS[interpolation]
    if output_size is not None:
        options.output_height, options.output_width = _size("output_size", output_size)
    options.horizontal_flip = _flag("horizontal_flip", horizontal_flip)


_INT32 = (-(2 ** 31), 2 ** 31 - 1)


def _flag(name: str, value: Any) -> bool:
    """`value` as a bool for the option `name`: True, False (numpy's too), 1 or 0; TypeError
    otherwise (a str such as "no" was truthy, None falsy, and pybind11 said only "incompatible
    function arguments" for shuffle="yes")."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError("%s must be True or False, not %r" % (name, value))


def _size(name: str, value: Any) -> Tuple[int, int]:
    """(height, width) from an int n (as (n, n), torchvision's convention) or a pair of ints.
    TypeError / ValueError naming the option otherwise."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        try:
            n = _integer(name, value, *_INT32)
        except TypeError:
            raise TypeError("%s must be an int or a (height, width) pair of ints, not %r"
                            % (name, value)) from None
        return n, n
    if len(value) != 2:
        raise ValueError("%s must be an int or a (height, width) pair, not %r" % (name, value))
    return _integer(name, value[0], *_INT32), _integer(name, value[1], *_INT32)


def _integer(name: str, value: Any, low: int, high: int) -> int:
    """`value` as an int in [low, high] for the C++ option `name`: TypeError when it is not an
    integer, ValueError naming the option when it is out of range (pybind11 would only say
    "incompatible function arguments ... Invoked with: <LoaderOptions>"). The C++ Loader checks
    the meaning (batch_size >= 1, rank < world_size...) with its own messages."""
    if isinstance(value, bool):
        raise TypeError("%s must be an integer, not %r" % (name, value))
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %r" % (name, value)) from None
    if not low <= number <= high:
        raise ValueError("%s must be an integer in [%d, %d], not %d" % (name, low, high, number))
    return number


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError("%s=%r is not an integer" % (name, value)) from None


def default_rank_and_world_size() -> Tuple[int, int]:
    """(rank, world_size): torch.distributed's when it is initialised, else the RANK and
    WORLD_SIZE environment variables (as torchrun and mpirun wrappers set them), else (0, 1).
    torch is not imported for this: if it is not imported yet, no process group exists."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)


def _plain_state(state: Dict[str, Any]) -> Dict[str, Any]:
    """`state` with JSON types only: strs stay, integers (numpy's, torch's 0-d tensors after a
    round trip) become ints. ValueError for anything else, naming the key."""
    plain: Dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, str):
            plain[key] = value
            continue
        try:
            plain[key] = operator.index(value)
        except TypeError:
            raise ValueError("loader state: %r is %r, not an int or a str" % (key, value)) from None
    return plain


class Loader(_torch.DatasetBase):
    """This rank's batches of a shard set: a seeded permutation of the whole set per epoch,
    split so that every rank gets the same number of batches, decoded by C++ threads into a
    bounded pool of reusable buffers while the GIL is released.

    Iterating gives one epoch of batches, each a dict:
        "images":        [B, H, W, 3] uint8, RGB
        "tokens":        [B, L] int32, L = the longest caption in the batch (>= 1), or
                         pad_to when given (one shape every batch), rows padded with the
                         set's pad_id; [B, 0] for a set built with
                         `--tokenizer none`, whose batches carry "texts" instead
        "lengths":       [B] int32, tokens per row before padding
        "indices":       [B] int64, global sample index (ShardSet(path)[i] is the sample)
        "caption_index": [B] int32, which caption of the sample the tokens are
        "set_index":     [B] int32, which set of a mixture ("a:0.7,b:0.3": 0 for a, 1 for b)
                         each row came from; 0 for a single set
        "keys":          list of B str, the samples' keys
        "texts":         list of B str, each row's caption text, only for a set built with
                         `--tokenizer none` (tokenize them in the training loop); read through
                         HDF5 by the decode threads (tens of microseconds a row)
        "epoch", "step": int, the epoch and the batch's index among this rank's batches
    The arrays are numpy arrays, or torch.Tensors with as_torch=True (torch.from_numpy: no copy),
    pin_memory=True (page-locked copies) or a device (see pin_memory and device below).

    Buffer lifetime: the arrays are views of the C++ batch's buffers, whose numpy base object
    holds the batch (a shared_ptr). The batch goes back to the loader's pool only when the last
    array (and every tensor made from one) is gone, so keeping a batch, or a tensor, past the
    next batches, past the end of the epoch or past the Loader itself is safe and costs only its
    memory; the loader allocates a new buffer meanwhile and never blocks on it. The arrays are
    writable (in-place normalisation is fine).

    Epochs, ranks, resume (the conventions of torch's DistributedSampler and torchdata's
    StatefulDataLoader):
      - set_epoch(e) before iterating picks epoch e's order; without it every iteration repeats
        the same epoch (as DistributedSampler). A new iter() restarts the epoch.
      - drop_last=True drops the tail that does not fill world_size * batch_size; False pads the
        last global batch with the epoch's first items, so every rank gets full batches.
      - Exact evaluation: drop_last=False, even_batches=False (Accelerate's name) hands out
        every item of the epoch exactly once over all ranks, no padding. With G = world_size *
        batch_size and r = items_per_epoch % G (when not 0), rank k's last batch has
        min(batch_size, max(0, r - k * batch_size)) rows: the first ranks full, one rank short,
        the ranks past it one batch fewer. len() is this rank's count, so it may differ by one
        between ranks (a collective per batch would then wait: gather after the loop instead).
      - state_dict() after any batch, load_state_dict() into a new Loader (any world size, same
        set and caption_mode): the next iteration continues that epoch's global order exactly
        where it stopped. A following set_epoch with the same epoch keeps the position.

    Threads: iterate from one thread at a time; calls from other threads (state_dict, close)
    are serialised with it in C++ and never hold the GIL while they wait.

    PyTorch: where torch is importable the Loader is a torch.utils.data.IterableDataset that
    yields whole batches, so DataLoader(loader, batch_size=None) iterates it (its default
    collate turns the numpy arrays into tensors, no copy; pin_memory=True works), and it has
    torchdata's Stateful protocol (state_dict / load_state_dict: StatefulDataLoader saves and
    restores it with its own state). num_workers=0 is the intended use: the Loader decodes in
    its own C++ threads already. With num_workers=W > 0 each worker process builds its own C++
    loader for its share, as one more level of the rank split (rank * W + worker id of
    world_size * W, num_threads divided by W), so no sample is read twice; then len(loader)
    may overcount the batches by a few, only StatefulDataLoader resumes exactly (it calls
    state_dict and load_state_dict in each worker, on that worker's share; a plain DataLoader
    cannot: the workers' progress is theirs), and set_epoch reaches workers only when they are
    started per epoch (persistent_workers=False, the default). A Loader created before a fork and iterated
    directly in the child (not as a DataLoader's dataset) raises RuntimeError at once.

    Pickling (DataLoader workers started with spawn, copy.deepcopy) stores a description, not the
    threads: the set's path or URL, the options and the state_dict(); unpickling opens the set
    and builds the C++ loader anew in that process, at the same position. TypeError when the
    ShardSet or a transform cannot be pickled (a lambda: define it at module level).

    Transforms (transform=, text_transform=): run by transform_threads Python threads, up to
    transform_ahead batches ahead of the training loop, on torch tensors (the arrays become
    tensors as with as_torch=True). transform(images) gets batch["images"] as a channels-first view
    [B, 3, H, W] uint8 (torchvision's and Kornia's tensor layout, no copy), and what it returns
    replaces batch["images"] (for example torchvision.transforms.ColorJitter(0.4, 0.4, 0.4) on
    uint8, or a Compose ending in ConvertImageDtype and Normalize: [B, 3, H, W] float32;
    torchvision v1 draws one set of jitter factors per call, so per batch, not per image).
    text_transform(texts) gets batch["texts"] (B str, a set built with --tokenizer none) and
    what it returns replaces batch["tokens"] (open_clip's tokenizer: [B, 77] int64). Their
    randomness is torch's global generator, which a resume does not restore (the items and the
    loader's own crops and flips are restored exactly). state_dict() counts the batches handed
    out, never those transformed ahead. Debian 12's torchvision 0.14 has no transforms.v2; the
    v1 transforms accept uint8 tensors [..., 3, H, W].
    GPU-side recipe (the transform on the GPU, after the copy): leave transform=None, pass
    device="cuda", and in the loop
        images = batch["images"].permute(0, 3, 1, 2)        # [B, 3, H, W] uint8 on the GPU
        images = gpu_augment(images)                         # torchvision v1 / Kornia ops
        images = images.float().div_(255).sub_(mean).div_(std)
    (mean, std as [1, 3, 1, 1] tensors on the device); the copy of the next batch overlaps it.

    Args:
        path_or_set: a set directory, a remote set's URL (s3://, http(s)://; opened with
            cache_dir and cache_limit) or an open ShardSet (shared, not copied).
        batch_size: samples per batch on this rank (B).
        shuffle: a seeded permutation per (seed, epoch); False: file order.
        shuffle_mode: "auto" (the global permutation, unless the set is remote and its cache
            limit cannot hold it: then the block shuffle, said in one line on stderr and in
            `notice`), "global" (any item may follow any other; refused when the cache limit
            cannot hold a remote set) or "block" (shards permuted, items shuffled within
            windows of shuffle_window shards: a remote set needs two windows in its cache).
        shuffle_window: "block": shards per window (0: the largest window two of which fit in
            the cache limit, else 8).
        cache_dir, cache_limit: a remote set's cache when path_or_set is a URL (ShardSet).
        seed: the permutation's and caption choice's seed (the same on every rank).
        rank, world_size: None: default_rank_and_world_size() (torch.distributed, else RANK /
            WORLD_SIZE, else 0 / 1).
        drop_last: see above.
        even_batches: with drop_last=False: True pads the last global batch (every rank the
            same number of full batches); False hands out each item once, the last batches short
            (see above). False with drop_last=True is a ValueError.
        num_threads: C++ decode threads; they share the work of each batch, so all of them
            decode whatever prefetch is. None (or 0): one per CPU this process may run on
            (sched_getaffinity), divided by the ranks on this node when the launcher says how
            many (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE); at most 256.
        prefetch: batches decoded ahead (being decoded or waiting), at most: memory, not speed,
            once it is 2 (at 1 the threads wait while the training loop takes each batch).
        caption_mode: "random" (one item per image, its caption drawn per seed, epoch and
            sample) or "all" (one item per (image, caption) pair).
        crop: "none" (the largest centred window of the output's shape: the stored image at
            the stored size), "center" (FFCV's 224/256 centre crop, for evaluation) or "rrc"
            (torchvision's RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3)) window, drawn
            per (seed, epoch, sample)); the window is resized with `interpolation`.
        output_size: (height, width) of the batch's images in pixels, or an int n for (n, n)
            (as torchvision's sizes); None: the stored size.
        horizontal_flip: mirror with probability 1/2, seeded per (seed, epoch, sample).
        interpolation: the crop's resize filter, both antialiased as Pillow's resize(box=...):
            "bilinear" (the default: the triangle, Pillow's BILINEAR and torchvision's
            RandomResizedCrop default; a third of the taps) or "lanczos" (Lanczos-3, Pillow's
            LANCZOS: sharper, slower).
        as_torch: give torch.Tensors (torch.from_numpy) instead of numpy arrays.
        pad_to: None (rows padded to the batch's longest caption, L varies per batch) or L:
            every batch's tokens are [B, L] (CLIP's context length is 77): rows padded with
            pad_id, a longer caption cut to its first L tokens with the set's end token (eos_id,
            when its tokenizer has one) put last, as open_clip's tokenize() truncates; lengths
            clipped to L. ValueError for a set without token ids (--tokenizer none).
        transform: a callable on the images, [B, 3, H, W] uint8 -> anything (see Transforms).
        text_transform: a callable on the captions' texts, List[str] -> the new "tokens"
            (see Transforms); only for a set built with --tokenizer none (ValueError else).
        transform_ahead: batches transformed ahead of the loop (>= 1) when a transform is set.
        transform_threads: threads that run the transforms, each on its own batch (batches are
            handed out in order): more than 1 when one thread cannot keep up with the step
            (torch operators release the GIL; torch's own intra-op threads come on top).
        pin_memory: give the arrays as torch.Tensors in page-locked host memory (a copy of each
            batch, made in the iterating thread), ready for .to("cuda", non_blocking=True), as
            DataLoader(pin_memory=True). Needs torch with CUDA and a GPU: RuntimeError otherwise.
        device: None (the host), "cpu" (torch.Tensors, as as_torch), or "cuda", "cuda:N" or a
            torch.device: the arrays arrive as tensors on that GPU (images still [B, H, W, 3]
            uint8: convert and normalise there). Each batch is pinned and copied on a side CUDA
            stream one batch ahead, so the copy overlaps the step on the previous batch; the
            tensors are ready for work queued on the stream current when the batch is handed
            out (the caller's current stream waits for the copy on the GPU, not in Python).
            One batch more is held (being copied). state_dict() counts the batches handed out,
            not the one being copied. RuntimeError where torch has no CUDA.

    Errors: FileNotFoundError (no set), ValueError (a bad option: batch_size < 1, rank outside
    [0, world_size), caption_mode, crop, output_size, device, pad_to; drop_last with fewer
    items than one global batch; an empty set), TypeError (an option of the wrong type, a
    transform that is not callable), RuntimeError (pin_memory or a CUDA device without CUDA),
    mmpack.CorruptionError while iterating (a damaged chunk; names shard and sample); an error
    raised by a transform is raised by the iteration, after the batches before it.
    """

    def __init__(self, path_or_set: Union[PathLike, ShardSet], batch_size: int, *,
                 shuffle: bool = True, seed: int = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None, drop_last: bool = True,
                 num_threads: Optional[int] = None, prefetch: int = 4,
                 caption_mode: str = "random",
                 crop: str = "none", output_size: Optional[Tuple[int, int]] = None,
                 horizontal_flip: bool = False, interpolation: str = "bilinear",
                 as_torch: bool = False, pin_memory: bool = False,
                 device: Union[None, str, "torch.device"] = None,
                 shuffle_mode: str = "auto", shuffle_window: int = 0,
                 cache_dir: Optional[PathLike] = None,
                 cache_limit: Union[int, str] = 0, even_batches: bool = True,
                 pad_to: Optional[int] = None,
                 transform: Optional[Callable[[Any], Any]] = None,
                 text_transform: Optional[Callable[[List[str]], Any]] = None,
                 transform_ahead: int = 2, transform_threads: int = 1) -> None:
        # What pickling stores (the description; rank and world_size resolved below): every
        # keyword argument, so that one added later is stored too.
        description = dict(locals())
        del description["self"], description["path_or_set"]
        if caption_mode not in _CAPTION_MODES:
            raise ValueError("caption_mode must be 'random' or 'all', not %r" % (caption_mode,))
        if shuffle_mode not in _SHUFFLE_MODES:
            raise ValueError("shuffle_mode must be 'auto', 'global' or 'block', not %r"
                             % (shuffle_mode,))
        as_torch, pin_memory = _flag("as_torch", as_torch), _flag("pin_memory", pin_memory)
        self._device = _device.resolve(device, pin_memory)  # before any thread starts
        if isinstance(path_or_set, ShardSet):
            self._set = path_or_set
        else:
            self._set = ShardSet(path_or_set, cache_dir=cache_dir, cache_limit=cache_limit)
        default_rank, default_world = default_rank_and_world_size()
        options = _mmpack.LoaderOptions()
        options.batch_size = _integer("batch_size", batch_size, *_INT32)
        options.shuffle = _flag("shuffle", shuffle)
        options.seed = _integer("seed", seed, 0, 2 ** 64 - 1)
        options.rank = _integer("rank", default_rank if rank is None else rank, *_INT32)
        options.world_size = _integer(
            "world_size", default_world if world_size is None else world_size, *_INT32)
        options.drop_last = _flag("drop_last", drop_last)
        options.even_batches = _flag("even_batches", even_batches)
        options.num_threads = 0 if num_threads is None else _integer(
            "num_threads", num_threads, *_INT32)
        options.prefetch_batches = _integer("prefetch", prefetch, 1, _INT32[1])  # 0: no such mode
        options.caption_mode = _CAPTION_MODES[caption_mode]
        options.shuffle_mode = _SHUFFLE_MODES[shuffle_mode]
        options.shuffle_window = _integer("shuffle_window", shuffle_window, *_INT32)
        _augmentation(options, crop, output_size, horizontal_flip, interpolation)
        self._options = options
        self._text_hooks(pad_to, transform, text_transform, transform_ahead, transform_threads)
        description.update(rank=options.rank, world_size=options.world_size,
                           cache_dir=None, cache_limit=0)  # the set is pickled by itself
        self._description = description
        self._impl = _mmpack.Loader(self._set._set, options)
        self._threads = self._impl.num_threads  # resolved, for a DataLoader worker's share
        self.notice: str = self._impl.notice
        """One line when the loader chose for the user (auto became the block shuffle), else ''."""
        if self.notice:
            sys.stderr.write("mmpack.Loader: %s\n" % self.notice)
        self._from_numpy = None   # numpy array -> what the batch holds (None: the array)
        self._copier = None       # a CUDA device: the CudaCopier, made at the first batch
        if self._device is None:
            if as_torch or self._transforming:
                self._from_numpy = _device.host_converter(False)
        elif self._device.type == "cpu":
            self._from_numpy = _device.host_converter(pin_memory)
        elif self._transforming:  # CUDA: transforms on host tensors, then the copy
            self._from_numpy = _device.host_converter(False)
        self._handed_out = None   # CUDA: (generation, state after the batch last handed out)
        self._seed = seed         # the order's seed (a restored state brings its own)
        self._epoch = 0           # the epoch the next iteration runs
        self._run_epoch = None    # the epoch the C++ loader was last started or restored at
        self._resume = False      # load_state_dict happened; the next iteration continues it
        self._generation = 0      # bumped by iter() and load_state_dict: older iterators stop
        self._restored: Optional[Dict[str, Any]] = None  # the state load_state_dict was given
        self._ahead: Optional[_ahead.Ahead] = None   # the transform thread of the iteration
        self._worker: Optional[Tuple[int, int]] = None  # (id, count) once split for a worker

    def _text_hooks(self, pad_to: Optional[int], transform: Any, text_transform: Any,
                    transform_ahead: int, transform_threads: int) -> None:
        """Checks and keeps pad_to and the transforms (see the class docstring)."""
        # A set built with --tokenizer none has vocab_size 0 (a mixture's sets share one).
        tokenized = self._set.vocab_size > 0
        self._pad_to = None if pad_to is None else _integer("pad_to", pad_to, 1, 2 ** 31 - 1)
        if self._pad_to is not None and not tokenized:
            raise ValueError("pad_to: %s holds no token ids (built with --tokenizer none): pad "
                             "the output of text_transform instead" % self._set.root)
        self._eos_id = self._set._set.eos_id
        for name, hook in (("transform", transform), ("text_transform", text_transform)):
            if hook is not None and not callable(hook):
                raise TypeError("%s must be callable, not %r" % (name, hook))
        if text_transform is not None and tokenized:
            raise ValueError("text_transform: %s holds token ids, not caption text (build the "
                             "set with --tokenizer none to tokenize in the loop)" % self._set.root)
        self._transform, self._text_transform = transform, text_transform
        self._transforming = transform is not None or text_transform is not None
        self._transform_ahead = _integer("transform_ahead", transform_ahead, 1, 64)
        self._transform_threads = _integer("transform_threads", transform_threads, 1, 64)

    # --- iteration -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Dict[str, Any]]:
        self._stop_ahead()  # an older iteration's transform thread must not take our batches
        self._follow_worker()
        self._generation += 1
        if self._resume:
            self._resume = False
        else:
            self._impl.start_epoch(self._epoch)
            self._run_epoch = self._epoch
        generation = self._generation
        cuda = self._device is not None and self._device.type == "cuda"
        if not self._transforming:
            batches = self._batches(generation)
            return self._on_device(generation, batches, self._impl.state_json) if cuda else batches
        self._handed_out = (generation, self._impl.state_json())  # nothing handed out yet
        return self._transformed(generation, cuda)

    def _transformed(self, generation: int, cuda: bool) -> Iterator[Dict[str, Any]]:
        """The batches through the transform threads (mmpack/_ahead.py), started at the first
        next() (an iterator never advanced starts no thread), then through the CUDA copier when
        `cuda` (which records each state itself); records the state of each batch handed out
        and stops the threads when the iteration ends or is dropped."""
        ahead = _ahead.Ahead(self._batches(generation), self._apply_transforms,
                             self._impl.state_json, self._transform_ahead, self._handed_out[1],
                             self._transform_threads)
        self._ahead = ahead
        try:
            if cuda:
                yield from self._on_device(generation, ahead, lambda: ahead.state)
                return
            for batch in ahead:
                self._handed_out = (generation, ahead.state)
                yield batch
        finally:
            ahead.close()

    def _apply_transforms(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        """transform and text_transform of one batch (in the transform thread)."""
        if self._transform is not None:
            batch["images"] = self._transform(batch["images"].permute(0, 3, 1, 2))
        if self._text_transform is not None:
            batch["tokens"] = self._text_transform(batch["texts"])
        return batch

    def _stop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def _follow_worker(self) -> None:
        """In a DataLoader worker, before anything reaches the C++ loader (the inherited one's
        threads are the parent's): the worker's own C++ loader (_split_for_worker). torchdata's
        StatefulDataLoader calls load_state_dict in the worker before iter()."""
        split = _torch.worker()
        if split is not None and split != self._worker:
            self._split_for_worker(*split)

    def _split_for_worker(self, worker_id: int, num_workers: int) -> None:
        """In a DataLoader worker: this worker's own C++ loader, reading its share (rank
        rank * num_workers + worker_id of world_size * num_workers), at the position this
        Loader had (a restored state, or the start of the epoch set)."""
        if self._device is not None and self._device.type == "cuda":
            raise RuntimeError("mmpack.Loader(device=%r) in a DataLoader worker: CUDA tensors are "
                               "made in the training process; use num_workers=0 (the Loader "
                               "decodes in its own threads)" % (str(self._device),))
        options = self._options
        options.rank = options.rank * num_workers + worker_id
        options.world_size *= num_workers
        options.num_threads = max(1, self._threads // num_workers)
        # The inherited C++ loader's threads live in the parent: dropping it only lets go of it.
        try:
            self._impl = _mmpack.Loader(self._set._set, options)
        except ValueError as e:  # drop_last with too few items for world_size * W batches...
            raise ValueError("DataLoader worker %d of %d (rank %d of %d): %s" % (
                worker_id, num_workers, options.rank, options.world_size, e)) from None
        self._worker = (worker_id, num_workers)
        self._copier = self._handed_out = None
        if self._resume:
            self._impl.restore_json(json.dumps(_plain_state(self._restored)))

    def _on_device(self, generation: int, batches: Iterator[Dict[str, Any]],
                   state: Callable[[], str]) -> Iterator[Dict[str, Any]]:
        """`batches` through the CUDA copier, one batch ahead (mmpack/_device.py)."""
        if self._copier is None:
            self._copier = _device.CudaCopier(self._device)

        def handed_out(state: str) -> None:
            self._handed_out = (generation, state)

        return _device.one_ahead(batches, self._copier.start, self._copier.finish, state,
                                 handed_out)

    def _batches(self, generation: int) -> Iterator[Dict[str, Any]]:
        next_batch = self._impl.next
        from_numpy = self._from_numpy
        while True:
            if generation != self._generation:
                raise RuntimeError("this iterator of the Loader was superseded by a newer "
                                   "iter() or load_state_dict()")
            batch = next_batch()
            if batch is None:
                return
            if self._pad_to is not None:
                batch["tokens"] = _tokens.pad_tokens(batch["tokens"], batch["lengths"],
                                                     self._pad_to, self._set.pad_id, self._eos_id)
            if from_numpy is not None:
                for k in _ARRAY_KEYS:
                    batch[k] = from_numpy(batch[k])
            yield batch

    def __len__(self) -> int:
        """Batches this rank gets in one full epoch: the same on every rank, except with
        even_batches=False (the ranks past the last items get one fewer; see the class)."""
        return self._impl.batches_per_epoch

    # --- epochs and resume -----------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration run epoch `epoch` (>= 0), as DistributedSampler.set_epoch.
        After load_state_dict, set_epoch with the restored epoch keeps the restored position."""
        epoch = _integer("epoch", epoch, -(2 ** 63), 2 ** 63 - 1)
        if epoch < 0:
            raise ValueError("epoch must be >= 0, not %d" % epoch)
        if self._resume and epoch == self._epoch:
            return
        self._resume = False
        self._epoch = epoch

    def state_dict(self) -> Dict[str, Any]:
        """Where this loader is, after the last batch it gave: {"seed", "epoch", "consumed" (items
        of the epoch's global order handed out over all ranks), "world_size", "batch_size",
        "items_per_epoch"}, ints, "order" ("global", "block" or "none") and "shuffle_window"
        (the C++ LoaderState's; load_state_dict refuses another order); torch.save-able. Save
        it on any rank (ranks in lockstep agree)."""
        self._follow_worker()
        if self._run_epoch == self._epoch:
            handed = self._handed_out  # a CUDA device: not the batch being copied
            state = json.loads(handed[1] if handed and handed[0] == self._generation
                               else self._impl.state_json())  # every field the C++ state has
        else:  # set_epoch moved on, nothing ran yet: its start
            state = json.loads(self._impl.state_json())
            state.update({"seed": self._seed, "epoch": self._epoch, "consumed": 0})
        state["items_per_epoch"] = self._impl.items_per_epoch
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continues from `state` (a state_dict() of a Loader over the same set and
        caption_mode, at any world size and batch size): the next iteration gives the rest of
        that epoch. Every key of `state` reaches the C++ LoaderState. Errors: ValueError
        (missing keys, consumed past the epoch, a state from a set or caption_mode with another
        number of items per epoch, a state saved under another order or block window)."""
        self._follow_worker()
        missing = [k for k in ("seed", "epoch", "consumed") if k not in state]
        if missing:
            raise ValueError("loader state lacks %s" % ", ".join(missing))
        items = self._impl.items_per_epoch
        if "items_per_epoch" in state and int(state["items_per_epoch"]) != items:
            raise ValueError("loader state is from a loader with %d items per epoch, this one "
                             "has %d (another set or caption_mode?)"
                             % (int(state["items_per_epoch"]), items))
        # Every key goes to the C++ Restore, which checks what it knows (the order and its
        # window; 23.10: passing five keys let a block-shuffle state restore under another order).
        self._stop_ahead()
        self._impl.restore_json(json.dumps(_plain_state(state)))
        self._restored = dict(state)
        self._epoch = self._run_epoch = int(state["epoch"])
        self._seed = int(state["seed"])
        self._resume = True
        self._generation += 1

    # --- the rest --------------------------------------------------------------------------
    @property
    def dataset(self) -> ShardSet:
        """The ShardSet the loader reads."""
        return self._set

    @property
    def epoch(self) -> int:
        """The epoch the next (or current) iteration runs."""
        return self._epoch

    @property
    def rank(self) -> int:
        """This process's rank in [0, world_size)."""
        return self._options.rank

    @property
    def world_size(self) -> int:
        """The number of ranks the epoch is split over."""
        return self._options.world_size

    @property
    def num_threads(self) -> int:
        """The C++ decode threads running (num_threads resolved: None became a count)."""
        return self._impl.num_threads

    @property
    def device(self) -> Optional["torch.device"]:
        """Where batches are delivered: a torch.device, or None (numpy / as_torch on the host)."""
        return self._device

    @property
    def batch_size(self) -> int:
        """Samples per batch on this rank (B)."""
        return self._options.batch_size

    @property
    def items_per_epoch(self) -> int:
        """Items (images, or (image, caption) pairs with caption_mode="all") in one epoch's
        global order, over all ranks."""
        return self._impl.items_per_epoch

    def close(self) -> None:
        """Stops the transform thread and the decode threads now (also done when the Loader is
        garbage-collected). Batches already handed out stay valid."""
        self._stop_ahead()
        self._impl.close()

    # --- pickling: a description, rebuilt in the unpickling process ------------------------
    def __getstate__(self) -> Dict[str, Any]:
        for what, value in (("its ShardSet %r" % (self._set,), self._set),
                            ("transform=%r" % (self._transform,), self._transform),
                            ("text_transform=%r" % (self._text_transform,),
                             self._text_transform)):
            try:
                pickle.dumps(value)
            except Exception as e:  # noqa: BLE001  (one message naming what)
                raise TypeError("mmpack.Loader is pickled as a description (set, options, state) "
                                "and %s cannot be pickled (%s): define transforms at module "
                                "level" % (what, e)) from None
        # The position (so that the copy's state_dict() is this one's) and whether the next
        # iteration continues it (after load_state_dict) or restarts the epoch (iter() does).
        state = self._restored if self._resume else self.state_dict()
        return {"set": self._set, "options": self._description, "state": dict(state),
                "resume": self._resume}

    def __setstate__(self, description: Dict[str, Any]) -> None:
        self.__init__(description["set"], **description["options"])  # type: ignore[misc]
        self.load_state_dict(description["state"])
        self._resume = bool(description["resume"])

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "mmpack.Loader(%r, batch_size=%d, rank=%d, world_size=%d, epoch=%d)" % (
            self._set.root, self.batch_size, self.rank, self.world_size, self._epoch)
