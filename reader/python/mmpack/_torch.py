"""What mmpack.Loader takes from torch.utils.data when torch is importable: the IterableDataset
base class (so that DataLoader(loader, batch_size=None) iterates it instead of indexing it) and
the DataLoader worker's identity. Without torch, Loader derives from object and no worker
exists. Imported by mmpack._loader only, which `import mmpack` loads on first use of
mmpack.Loader, so that `import mmpack` alone (the CLI, ShardSet, build) never imports torch."""

from typing import Any, Optional, Tuple

try:
    from torch.utils.data import IterableDataset as DatasetBase
    from torch.utils.data import get_worker_info as _get_worker_info
except ImportError:  # no torch: a plain class, and never inside a DataLoader worker
    DatasetBase = object  # type: ignore[assignment,misc]
    _get_worker_info = None


def worker() -> Optional[Tuple[int, int]]:
    """(worker id, number of workers) inside a torch DataLoader worker process, else None."""
    info: Any = _get_worker_info() if _get_worker_info is not None else None
    if info is None:
        return None
    return int(info.id), int(info.num_workers)
