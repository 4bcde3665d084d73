"""mmpack.Loader's batches in page-locked memory (pin_memory=True) and on a CUDA device
(device="cuda"), issue 24 item 4. Debian's torch is CPU-only: here the tests check the clear
errors, the CPU device, the one-batch-ahead pipeline and its state_dict with the real loader;
on a machine whose torch has CUDA the same tests check pinned and device batches against the
host's, byte for byte, and resume from a state saved while a batch was being copied.
"""

import json
import os

import numpy as np
import pytest
import torch

import mmpack
from mmpack import _device

CUDA = torch.cuda.is_available()
ARRAYS = ("images", "tokens", "lengths", "indices", "caption_index")
OPTIONS = dict(batch_size=6, seed=3, crop="rrc", output_size=(32, 32), horizontal_flip=True,
               num_threads=2)


def host_batches(root, epoch=0, **extra):
    loader = mmpack.Loader(root, **OPTIONS, **extra)
    loader.set_epoch(epoch)
    return [{k: b[k].copy() for k in ARRAYS} for b in loader]


def same(batch, want):
    for k in ARRAYS:
        got = batch[k].cpu().numpy() if isinstance(batch[k], torch.Tensor) else batch[k]
        assert np.array_equal(got, want[k]), k


@pytest.mark.parametrize("device", ["bogus", "mps", "meta", 3.5, torch.device("meta")])
def test_a_device_other_than_cpu_or_cuda_is_a_value_error(coco, device):
    with pytest.raises(ValueError, match="device"):
        mmpack.Loader(coco, 4, device=device)


def test_device_cpu_gives_torch_tensors_of_the_same_batches(coco):
    want = host_batches(coco)
    loader = mmpack.Loader(coco, device="cpu", **OPTIONS)
    assert loader.device == torch.device("cpu")
    got = list(loader)
    assert len(got) == len(want)
    for b, w in zip(got, want):
        assert all(isinstance(b[k], torch.Tensor) for k in ARRAYS)
        same(b, w)


@pytest.mark.parametrize("device", [None, "cpu"])
def test_pin_memory_gives_page_locked_copies_or_a_clear_error(coco, device):
    if not CUDA:
        with pytest.raises(RuntimeError, match=r"pin_memory=True\) needs CUDA.*torch\.cuda\."
                                               r"is_available\(\) is False"):
            mmpack.Loader(coco, 4, pin_memory=True, device=device)
        return
    want = host_batches(coco)
    got = list(mmpack.Loader(coco, pin_memory=True, device=device, **OPTIONS))
    assert len(got) == len(want)
    for b, w in zip(got, want):
        assert all(b[k].is_pinned() for k in ARRAYS)
        same(b, w)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda")])
def test_cuda_device_gives_the_batches_on_the_gpu_or_a_clear_error(coco, device):
    if not CUDA:
        with pytest.raises(RuntimeError, match=r"needs CUDA, and this torch .* has none usable"):
            mmpack.Loader(coco, 4, device=device)
        return
    loader = mmpack.Loader(coco, device=device, **OPTIONS)
    assert loader.device.type == "cuda"
    want = host_batches(coco)
    got = []
    for b in loader:
        assert all(b[k].is_cuda for k in ARRAYS)
        b["images"].float().mean()  # work on the current stream, as a training step
        got.append({k: b[k].cpu().numpy() for k in ARRAYS})
    assert len(got) == len(want)
    for b, w in zip(got, want):
        same(b, w)


def test_cuda_state_dict_counts_batches_handed_out_not_the_one_being_copied(coco):
    if not CUDA:
        pytest.skip("needs CUDA: the same contract is checked on the host by "
                    "test_one_ahead_hands_out_in_order_with_the_state_of_each_batch")
    want = host_batches(coco, epoch=1)
    loader = mmpack.Loader(coco, device="cuda", **OPTIONS)
    loader.set_epoch(1)
    it = iter(loader)
    for _ in range(3):
        next(it)  # batch 4 is being copied meanwhile
    state = loader.state_dict()
    assert state["consumed"] == 3 * OPTIONS["batch_size"]
    resumed = mmpack.Loader(coco, device="cuda", **OPTIONS)
    resumed.load_state_dict(state)
    rest = [{k: b[k].cpu().numpy() for k in ARRAYS} for b in resumed]
    assert len(rest) == len(want) - 3
    for b, w in zip(rest, want[3:]):
        same(b, w)


def test_one_ahead_hands_out_in_order_with_the_state_of_each_batch(coco):
    """The CUDA path's pipeline (mmpack/_device.py one_ahead) over the real loader's batches:
    batch n+1 is started before batch n is handed out, every batch comes out once and in order,
    and the state handed with batch n is the loader's state after batch n, as state_dict() of a
    plain iteration says it (not the state after n+1, which was already taken)."""
    plain = mmpack.Loader(coco, **OPTIONS)
    plain_states = []
    for _ in plain:
        plain_states.append(plain.state_dict()["consumed"])
    loader = mmpack.Loader(coco, **OPTIONS)
    events, handed = [], []

    def start(batch):
        events.append(("start", int(batch["step"])))
        return batch

    def finish(batch):
        events.append(("finish", int(batch["step"])))
        return batch

    steps = []
    for batch in _device.one_ahead(iter(loader), start, finish, loader._impl.state_json,
                                   lambda s: handed.append(json.loads(s)["consumed"])):
        steps.append(int(batch["step"]))
    n = len(plain_states)
    assert steps == list(range(n))
    assert handed == plain_states
    want = [("start", 0)]
    for k in range(n):
        want += ([("start", k + 1)] if k + 1 < n else []) + [("finish", k)]
    assert events == want


def test_one_ahead_raises_an_error_after_the_batches_before_it():
    def batches():
        yield {"step": 0}
        yield {"step": 1}
        raise ValueError("sample 17 is damaged")

    got, handed = [], []
    it = _device.one_ahead(batches(), lambda b: b, lambda b: b, lambda: "s", handed.append)
    got.append(next(it)["step"])
    got.append(next(it)["step"])
    with pytest.raises(ValueError, match="sample 17"):
        next(it)
    assert got == [0, 1] and handed == ["s", "s"]


def test_num_threads_none_is_one_per_available_cpu(coco, monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    cpus = min(len(os.sched_getaffinity(0)), 256)
    assert mmpack.Loader(coco, 4).num_threads == cpus
    assert mmpack.Loader(coco, 4, num_threads=3).num_threads == 3
    with pytest.raises(ValueError, match="num_threads -1 outside"):
        mmpack.Loader(coco, 4, num_threads=-1)
