"""Where mmpack.Loader's batches go: page-locked host memory (pin_memory=True) or a CUDA
device (device="cuda"), the host-to-device copy overlapped with the training step as FFCV's
ToDevice and DALI's GPU outputs do.

The CUDA path, per batch (CudaCopier):
  1. each array is copied into page-locked memory (Tensor.pin_memory(): torch's caching host
     allocator, so after the first batches no cudaHostAlloc), then
  2. copied to the device with non_blocking=True on a side stream, and an event recorded;
  3. the batch is handed out one batch later (one_ahead): by then the training step of the
     previous batch has been queued, so the copy runs while the GPU computes; the caller's
     current stream waits for the event (on the GPU, not in Python), and every device tensor is
     marked as used on that stream (record_stream), so that the caching allocator does not
     reuse its memory for the side stream's next copies while the step still reads it.
The page-locked source may be freed right after step 2: torch records the copy's stream on its
block, and the caching host allocator reuses the block only when the copy has completed.
"""

from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Tuple

# The batch entries that are arrays (numpy, or torch tensors): what is pinned and copied.
ARRAY_KEYS = ("images", "tokens", "lengths", "indices", "caption_index", "set_index")

Batch = Dict[str, Any]


def _no_cuda(what: str, torch: Any) -> RuntimeError:
    return RuntimeError(
        "mmpack.Loader(%s) needs CUDA, and this torch %s has none usable (torch.version.cuda=%s, "
        "torch.cuda.is_available() is False): use a CUDA build of torch on a machine with an "
        "NVIDIA GPU and its driver, or leave %s at its default"
        % (what, torch.__version__, torch.version.cuda, what.split("=")[0]))


def resolve(device: Any, pin_memory: bool) -> Optional[Any]:
    """The torch.device batches are delivered on (None: numpy arrays, or torch tensors
    in the loader's own memory). `device`: None, "cpu", "cuda", "cuda:N" or a torch.device.
    pin_memory without a device means "cpu", in page-locked memory.

    Checked at once (no CUDA context is created: that waits for the first batch, so a Loader made
    before a fork stays usable in the child). Errors: ValueError (a device that is not a CPU or
    CUDA device, or a CUDA index past torch.cuda.device_count()), RuntimeError (CUDA or
    page-locked memory asked of a torch without CUDA, or on a machine without a GPU)."""
    if device is None and not pin_memory:
        return None
    import torch  # only when asked for: importing torch takes a second
    try:
        dev = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError("device must be None, 'cpu', 'cuda', 'cuda:N' or a torch.device, not %r"
                         % (device,)) from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError("device %r: mmpack.Loader delivers batches on the CPU or a CUDA device "
                         "only" % (str(dev),))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise _no_cuda("device=%r" % (str(dev),), torch)
    if pin_memory and not torch.cuda.is_available():
        raise _no_cuda("pin_memory=True", torch)
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError("device %r: this machine has %d CUDA device(s)"
                         % (str(dev), torch.cuda.device_count()))
    return dev


def host_converter(pin_memory: bool) -> Callable[[Any], Any]:
    """numpy array -> torch tensor on the host: the loader's buffer itself (torch.from_numpy, no
    copy) or a page-locked copy of it (pin_memory)."""
    import torch
    if pin_memory:
        return lambda a: torch.from_numpy(a).pin_memory()
    return torch.from_numpy


class CudaCopier:
    """Copies a batch's arrays to one CUDA device on its own side stream (see the module
    docstring). Made at the first batch of an iteration, in the thread that iterates."""

    def __init__(self, device: Any) -> None:
        import torch
        self._torch = torch
        index = torch.cuda.current_device() if device.index is None else device.index
        self.device = torch.device("cuda", index)
        self._stream = torch.cuda.Stream(device=self.device)

    def start(self, batch: Batch) -> Tuple[Batch, Any]:
        """Queues the copy of `batch`'s numpy arrays (replaced in `batch` by device tensors that
        are not to be read before finish()); returns what finish() takes."""
        torch = self._torch
        with torch.cuda.stream(self._stream):
            for key in ARRAY_KEYS:
                value = batch[key]  # numpy, or a tensor (a transform ran on the host)
                host = (value if isinstance(value, torch.Tensor) else torch.from_numpy(value))
                host = host.pin_memory()
                batch[key] = host.to(self.device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self._stream)
        return batch, copied

    def finish(self, started: Tuple[Batch, Any]) -> Batch:
        """The batch, ready for work queued on the caller's current stream from now on."""
        batch, copied = started
        stream = self._torch.cuda.current_stream(self.device)
        stream.wait_event(copied)
        for key in ARRAY_KEYS:
            batch[key].record_stream(stream)
        return batch


def one_ahead(batches: Iterable[Batch], start: Callable[[Batch], Any],
              finish: Callable[[Any], Batch], state: Callable[[], str],
              handed_out: Callable[[str], None]) -> Iterator[Batch]:
    """finish(start(b)) for each batch b of `batches`, in order, with batch n+1 started before
    batch n is finished and handed out, so that n+1's copy overlaps the caller's work on n.
    `state()` is read right after each batch is taken from `batches` (the loader's state after
    it), and handed_out(that state) is called just before the batch is yielded: the state of the
    batch the caller has, not of the one being copied. An error from `batches` (a damaged
    sample) is raised once the batches before it have been handed out, as without look-ahead."""
    pending, error = None, None
    it = iter(batches)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            break
        except Exception as e:  # noqa: BLE001  (raised below, after the batch before it)
            error = e
            break
        started = (start(batch), state())
        if pending is not None:
            handed_out(pending[1])
            yield finish(pending[0])
        pending = started
    if pending is not None:
        handed_out(pending[1])
        yield finish(pending[0])
    if error is not None:
        raise error
