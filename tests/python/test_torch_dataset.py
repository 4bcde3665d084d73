"""mmpack.Loader as a torch IterableDataset: DataLoader(loader,
batch_size=None) over ranks and over DataLoader workers without double-reading, torchdata's
Stateful protocol (save mid-epoch, restore in a new process), pickling as a description, and
the size keyword as torchvision takes it. On the real coco_multi set (51 samples, 4 shards).

torchdata is not installable here (not on Debian 12, no PyPI): what its StatefulDataLoader does
with an IterableDataset at num_workers=0 is done by hand (stateful_data_loader_state below):
it treats the dataset as Stateful when it has callable state_dict and load_state_dict
(torchdata.stateful_dataloader.Stateful, a runtime-checkable Protocol), saves
dataset.state_dict() after the batches it yielded, and on load_state_dict calls
dataset.load_state_dict(saved) before iter(dataset).
"""

import copy
import os
import pickle
import subprocess
import sys
from typing import Any, Dict, Protocol, runtime_checkable

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import mmpack
from conftest import PYTHON_DIR

N = 51


@runtime_checkable
class Stateful(Protocol):
    """torchdata.stateful_dataloader.Stateful, as torchdata 0.8+ defines it."""

    def state_dict(self) -> Dict[str, Any]: ...

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None: ...


def indices(batches):
    return [b["indices"].tolist() for b in batches]


def test_the_loader_is_an_iterable_dataset_that_data_loader_iterates(coco_multi):
    loader = mmpack.Loader(coco_multi, 8, seed=3)
    assert isinstance(loader, IterableDataset) and isinstance(loader, Stateful)
    reference = indices(mmpack.Loader(coco_multi, 8, seed=3))
    # Before: TypeError: 'Loader' object is not subscriptable.
    batches = list(DataLoader(loader, batch_size=None))
    assert indices(batches) == reference and len(batches) == len(loader) == 6
    b = batches[0]
    assert isinstance(b["images"], torch.Tensor) and b["images"].dtype == torch.uint8
    assert b["images"].shape[0] == 8 and b["tokens"].dtype == torch.int32
    assert len(b["keys"]) == 8 and b["epoch"] == 0


@pytest.mark.parametrize("drop_last", [True, False])
def test_data_loader_over_two_ranks_gives_every_sample_once_per_epoch(coco_multi, drop_last):
    ranks = []
    for rank in range(2):
        loader = mmpack.Loader(coco_multi, 8, rank=rank, world_size=2, seed=7,
                               drop_last=drop_last)
        loader.set_epoch(1)
        ranks.append([i for b in DataLoader(loader, batch_size=None)
                      for i in b["indices"].tolist()])
    seen = ranks[0] + ranks[1]
    if drop_last:  # 3 global batches of 16: 48 distinct samples, none twice
        assert len(seen) == len(set(seen)) == 48
    else:  # 4 global batches: all 51, and 13 of them (the pad) a second time
        assert set(seen) == set(range(N)) and len(seen) == 64


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_data_loader_workers_split_the_rank_and_read_nothing_twice(coco_multi, context):
    # Two ranks, two workers each (spawn: the Loader is pickled into the workers and rebuilt
    # there). Before: fork raised RuntimeError in the worker; spawn could not pickle it.
    world = 1 if context == "spawn" else 2  # spawn starts slowly: one rank is enough
    seen = []
    for rank in range(world):
        loader = mmpack.Loader(coco_multi, 4, rank=rank, world_size=world, num_threads=2)
        loader.set_epoch(2)
        dl = DataLoader(loader, batch_size=None, num_workers=2, multiprocessing_context=context)
        batches = list(dl)
        assert all(b["images"].shape[0] == 4 and b["epoch"] == 2 for b in batches)
        seen += [i for b in batches for i in b["indices"].tolist()]
    assert len(seen) == len(set(seen)), "a sample was read twice"
    global_batch = 4 * world * 2
    assert len(seen) == N // global_batch * global_batch


def stateful_data_loader_state(loader, k):
    """StatefulDataLoader(loader, batch_size=None).state_dict() after k batches, num_workers=0:
    the dataset's own state (what torchdata stores under its dataset-state key)."""
    it = iter(DataLoader(loader, batch_size=None))
    taken = [next(it) for _ in range(k)]
    return taken, it, loader.state_dict()


RESTORE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
from torch.utils.data import DataLoader
import mmpack
state = torch.load(sys.argv[3])
# The same dataset as the saving process built, but seed 0: the state brings the order's seed.
loader = mmpack.Loader(sys.argv[2], 4, rank=int(sys.argv[4]), world_size=2, output_size=48,
                       crop="rrc", horizontal_flip=True)
loader.load_state_dict(state)  # what StatefulDataLoader.load_state_dict does with it
rest = list(DataLoader(loader, batch_size=None))
torch.save([(b["indices"], b["images"], b["tokens"], b["step"]) for b in rest], sys.argv[5])
"""


@pytest.mark.parametrize("rank", [0, 1])
def test_a_state_saved_mid_epoch_continues_exactly_in_a_new_process(coco_multi, tmp_path, rank):
    loader = mmpack.Loader(coco_multi, 4, rank=rank, world_size=2, seed=11, output_size=48,
                           crop="rrc", horizontal_flip=True)
    loader.set_epoch(3)
    _, it, state = stateful_data_loader_state(loader, 2)
    rest = list(it)
    torch.save(state, tmp_path / "state.pt")
    script = tmp_path / "restore.py"
    script.write_text(RESTORE)
    r = subprocess.run([sys.executable, str(script), PYTHON_DIR, coco_multi,
                        str(tmp_path / "state.pt"), str(rank), str(tmp_path / "rest.pt")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    resumed = torch.load(tmp_path / "rest.pt")
    assert len(resumed) == len(rest) == len(loader) - 2
    for (idx, images, tokens, step), b in zip(resumed, rest):
        assert idx.tolist() == b["indices"].tolist() and step == b["step"]
        assert torch.equal(images, b["images"]) and torch.equal(tokens, b["tokens"])


def test_a_pickled_loader_is_rebuilt_at_the_same_position(coco_multi):
    a = mmpack.Loader(coco_multi, 4, seed=2, output_size=32)
    a.set_epoch(1)
    it = iter(a)
    next(it), next(it)
    state = a.state_dict()
    b = pickle.loads(pickle.dumps(a))
    assert b.state_dict() == state and b.batch_size == 4 and b.epoch == 1
    # As the original, the copy restarts the epoch at a new iter() ...
    assert indices(b) == indices(a)
    # ... and a copy of a restored loader continues the restored position.
    c = mmpack.Loader(coco_multi, 4, output_size=32)
    c.load_state_dict(state)
    d = copy.deepcopy(c)
    rest = indices(c)
    assert indices(d) == rest and len(rest) == len(a) - 2
    assert next(iter(d))["images"].shape == (4, 32, 32, 3)


def double(images):  # module level: picklable
    return images


def test_pickling_refuses_what_cannot_be_described(coco_multi):
    with pytest.raises(TypeError, match="transform=.*cannot be pickled"):
        pickle.dumps(mmpack.Loader(coco_multi, 4, transform=lambda x: x))
    pickle.loads(pickle.dumps(mmpack.Loader(coco_multi, 4, transform=double)))


def test_output_size_takes_an_int_as_torchvision_does(coco_multi):
    # Before: TypeError: 'int' object is not iterable.
    b = next(iter(mmpack.Loader(coco_multi, 4, output_size=40)))
    assert b["images"].shape == (4, 40, 40, 3)
    b = next(iter(mmpack.Loader(coco_multi, 4, output_size=[40, 24])))
    assert b["images"].shape == (4, 40, 24, 3)
    with pytest.raises(ValueError, match="output_size"):
        mmpack.Loader(coco_multi, 4, output_size=(40,))
    with pytest.raises(TypeError, match="output_size"):
        mmpack.Loader(coco_multi, 4, output_size="40")
    with pytest.raises(TypeError, match="output_size"):
        mmpack.Loader(coco_multi, 4, output_size=40.0)


def test_import_mmpack_alone_does_not_import_torch():
    code = ("import sys; sys.path.insert(0, %r); import mmpack; assert 'torch' not in "
            "sys.modules; mmpack.ShardSet; assert 'torch' not in sys.modules; mmpack.Loader; "
            "assert 'torch' in sys.modules" % PYTHON_DIR)
    r = subprocess.run([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ), timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["shuffle", "drop_last", "horizontal_flip", "as_torch",
                                  "pin_memory"])
@pytest.mark.parametrize("value", ["no", None, 2])
def test_a_flag_that_is_not_a_bool_is_a_type_error_naming_it(coco_multi, name, value):
    # Before: horizontal_flip="no" flipped, drop_last=None kept the tail, shuffle="yes" gave
    # pybind11's "incompatible function arguments".
    with pytest.raises(TypeError, match="%s must be True or False" % name):
        mmpack.Loader(coco_multi, 4, **{name: value})


def test_a_mixture_loader_pickles_as_its_description(coco, coco_multi):
    mix = "%s:0.7,%s:0.3" % (coco, coco_multi)
    a = mmpack.Loader(mix, 8, seed=4, pad_to=20)
    it = iter(a)
    next(it)
    b = pickle.loads(pickle.dumps(a))
    assert b.state_dict() == a.state_dict() and b.dataset.root == a.dataset.root
    assert next(iter(b))["tokens"].shape == (8, 20)  # the options came along
    assert indices(b) == indices(a)



def with_worker_state(batch):
    """collate_fn run in the worker: the batch and the worker's dataset state after it, as
    StatefulDataLoader snapshots each worker's dataset.state_dict() with its batches."""
    info = torch.utils.data.get_worker_info()
    return batch, info.id, info.dataset.state_dict()


RESTORE_WORKERS = {}  # worker id -> state, read by restore_worker_state in the (forked) workers


def restore_worker_state(worker_id):
    """What StatefulDataLoader does in a worker on resume: dataset.load_state_dict(its state),
    then iter(dataset) (the fetcher)."""
    torch.utils.data.get_worker_info().dataset.load_state_dict(RESTORE_WORKERS[worker_id])


def test_per_worker_states_resume_each_workers_share(coco_multi):
    # Two workers alternate (worker 0's batch 0, worker 1's batch 0, ...); after 4 batches each
    # has given 2, and each one's state restores its own share's rest. Before: load_state_dict
    # in a forked worker raised RuntimeError (the parent's C++ loader).
    loader = mmpack.Loader(coco_multi, 2, seed=12, num_threads=2)
    loader.set_epoch(1)
    run = list(DataLoader(loader, batch_size=None, num_workers=2, collate_fn=with_worker_state,
                          multiprocessing_context="fork"))
    assert [w for _, w, _ in run[:4]] == [0, 1, 0, 1]
    RESTORE_WORKERS.clear()
    RESTORE_WORKERS.update({w: state for _, w, state in run[:4]})
    assert {s["consumed"] for s in RESTORE_WORKERS.values()} == {2 * 2 * 2}
    again = mmpack.Loader(coco_multi, 2, num_threads=2)
    resumed = list(DataLoader(again, batch_size=None, num_workers=2,
                              worker_init_fn=restore_worker_state,
                              multiprocessing_context="fork"))
    assert indices(resumed) == indices([b for b, _, _ in run[4:]])
    assert len(resumed) == len(run) - 4 > 0


def test_too_few_items_for_the_workers_split_says_so(coco_multi):
    # 51 items, 2 ranks x 2 workers x batch 16 = 64 > 51: no full batch for any worker.
    loader = mmpack.Loader(coco_multi, 16, rank=0, world_size=2)  # 32 <= 51: fine alone
    with pytest.raises(ValueError, match="DataLoader worker 0 of 2 \\(rank 0 of 4\\): drop_last"):
        list(DataLoader(loader, batch_size=None, num_workers=2, multiprocessing_context="fork"))
