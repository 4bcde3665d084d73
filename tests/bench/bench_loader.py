"""The timed loop the DataLoader baselines of the reader benchmark share
(reader_torch_baseline.py, reader_h5py_baseline.py)."""
import time


def time_loader(loader, seconds):
    """Iterates `loader` (epoch after epoch) until `seconds` have passed since its first batch.

    The first batch only starts the clock (the workers are up), so worker start-up is not
    timed and that batch is not counted. Returns (samples, elapsed seconds); the sample count
    is the first dimension of each batch's first tensor.
    """
    samples, elapsed, started = 0, 0.0, None
    while elapsed < seconds:
        for batch in loader:
            if started is None:  # first batch: workers are up
                started = time.perf_counter()
                continue
            samples += batch[0].shape[0]
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                break
    return samples, elapsed
