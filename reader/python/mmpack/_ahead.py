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
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, Optional

Batch = Dict[str, Any]

_END = object()  # the queue's end-of-epoch marker


def _stopped() -> RuntimeError:
    return RuntimeError("this iterator of the Loader was stopped: the Loader was closed, or a "
                        "newer iter() or load_state_dict() replaced it")


class Ahead:
    """Iterates `batches` through `apply`, at most `depth` batches ahead, in order.

    One thread ("mmpack-transform") takes the batches (and the state after each) from
    `batches`; with threads == 1 it applies `apply` itself, with threads > 1 it hands each batch
    to a pool of that many threads ("mmpack-transform_N") so that several batches are
    transformed at once (torch operators release the GIL), and __next__ still returns them in
    their order. Errors from `batches` or from `apply` (a damaged sample, a transform that
    raises) are raised by __next__ in the iterating thread, after the batches before them, and
    end the stage. close() stops the threads (each finishes the batch it is in: at most one C++
    next() and one transform per thread); it is idempotent and called when the consumer is done
    or superseded.
    """

    def __init__(self, batches: Iterator[Batch], apply: Callable[[Batch], Batch],
                 state: Callable[[], str], depth: int, initial_state: str,
                 threads: int = 1) -> None:
        self.state = initial_state  # the state after the batch last handed out
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, depth, threads))
        self._stop = threading.Event()
        self._done = False   # the end, or an error, was handed out
        self._closed = False  # close() ran: a consumer still waiting is told so
        self._pool: Optional[ThreadPoolExecutor] = None
        if threads > 1:
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="mmpack-transform")
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
                work = apply(batch) if self._pool is None else self._pool.submit(apply, batch)
                if not self._put((work, taken, None)):
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
        while True:
            if self._closed:
                raise _stopped()
            if self._done:
                raise StopIteration
            try:
                item = self._queue.get(timeout=0.05)  # polled: close() may come from elsewhere
                break
            except queue.Empty:
                continue
        if item is _END:
            self._done = True
            raise StopIteration
        work, taken, error = item
        if error is None and isinstance(work, Future):
            try:
                work = work.result()
            except CancelledError:  # close() cancelled it
                raise _stopped() from None
            except BaseException as e:  # noqa: BLE001  (the transform's, in its place)
                error = e
        if error is not None:
            self._done = True
            raise error
        self.state = taken
        return work

    def close(self) -> None:
        """Stops the threads and waits for them (what they had queued is dropped); a consumer
        waiting in __next__, or calling it later, gets RuntimeError."""
        self._closed = True
        self._stop.set()
        while self._thread.is_alive():
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
