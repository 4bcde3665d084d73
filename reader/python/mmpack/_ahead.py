"""mmpack.Loader's transform stage: a Python thread that takes batches from the C++ loader,
applies the user's transforms (transform=, text_transform=, pad_to) and queues them a few
batches ahead, so that the transforms of batch n+1 run while the training step works on batch n.

That overlap is real because neither side holds the GIL for long: the C++ loader's next()
releases it while it waits for its decode threads, and torch operators (torchvision's colour
jitter, resizes, normalisation) release it inside their kernels. Pure-Python work in a
transform does contend with the training thread for the GIL.

State: a loader state read right after each batch is taken from the C++ loader travels with
that batch through the queue; `state` is the one of the batch last handed out, so that the
Loader's state_dict() counts batches the caller has, never those transformed ahead (the same
rule as the CUDA copier's one batch ahead, mmpack/_device.py).
"""

import queue
import threading
from typing import Any, Callable, Dict, Iterator

Batch = Dict[str, Any]

_END = object()  # the queue's end-of-epoch marker


class Ahead:
    """Iterates `batches` through `apply` in a thread, at most `depth` batches ahead.

    Errors from `batches` or from `apply` (a damaged sample, a transform that raises) are raised
    by __next__ in the iterating thread, after the batches before them, and end the stage.
    close() stops the thread (it finishes the batch it is in; at most one C++ next() and one
    transform); it is idempotent and called when the consumer is done or superseded.
    """

    def __init__(self, batches: Iterator[Batch], apply: Callable[[Batch], Batch],
                 state: Callable[[], str], depth: int, initial_state: str) -> None:
        self.state = initial_state  # the state after the batch last handed out
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, args=(batches, apply, state),
                                        name="mmpack-transform", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, batches: Iterator[Batch], apply: Callable[[Batch], Batch],
             state: Callable[[], str]) -> None:
        try:
            for batch in batches:
                taken = state()  # before anything else reaches the C++ loader
                if not self._put((apply(batch), taken, None)):
                    return
                if self._stop.is_set():
                    return
        except BaseException as e:  # noqa: BLE001  (handed to the consumer)
            self._put((None, None, e))
            return
        self._put(_END)

    def __iter__(self) -> "Ahead":
        return self

    def __next__(self) -> Batch:
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._done = True
            raise StopIteration
        batch, taken, error = item
        if error is not None:
            self._done = True
            raise error
        self.state = taken
        return batch

    def close(self) -> None:
        """Stops the thread and waits for it (it drops what it had queued)."""
        self._done = True
        self._stop.set()
        while self._thread.is_alive():
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)

