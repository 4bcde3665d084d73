"""mmpack.Loader: epochs over 1, 2 and 3 ranks, batches equal to h5py, options, defaults."""

import math

import numpy as np
import pytest

import mmpack
from h5ref import H5Set
from loader_util import global_order, rank_batches

N = 51  # coco-cc samples (coco_multi: 4 shards of 16, 16, 16, 3)


@pytest.mark.parametrize("world_size,batch_size", [(1, 4), (2, 4), (3, 5), (2, 51)])
def test_every_sample_once_per_epoch_with_padding(coco_multi, world_size, batch_size):
    reference = global_order(rank_batches(coco_multi, 1, 1, epoch=3, drop_last=False))
    assert sorted(reference) == list(range(N))
    batches = rank_batches(coco_multi, world_size, batch_size, epoch=3, drop_last=False)
    G = world_size * batch_size
    assert all(len(b) == math.ceil(N / G) for b in batches.values())
    order = global_order(batches)
    # Every sample exactly once, in the same global order whatever the world size; the last
    # global batch is padded with the epoch's first items (as DistributedSampler pads).
    assert order[:N] == reference
    assert order[N:] == reference[:len(order) - N]


@pytest.mark.parametrize("world_size,batch_size", [(1, 4), (2, 4), (3, 5)])
def test_drop_last_drops_the_tail_only(coco_multi, world_size, batch_size):
    reference = global_order(rank_batches(coco_multi, 1, 1, epoch=1, drop_last=False))
    batches = rank_batches(coco_multi, world_size, batch_size, epoch=1, drop_last=True)
    G = world_size * batch_size
    assert all(len(b) == N // G for b in batches.values())
    assert global_order(batches) == reference[:(N // G) * G]


def test_epochs_seeds_and_file_order(coco):
    def order(**kw):
        return global_order(rank_batches(coco, 1, 7, drop_last=False, **kw))[:N]

    e0, e1 = order(epoch=0), order(epoch=1)
    assert sorted(e0) == sorted(e1) == list(range(N))
    assert e0 != e1
    assert order(epoch=0) == e0
    assert order(epoch=0, seed=99) != e0
    assert order(epoch=4, shuffle=False) == list(range(N))


def test_iterating_twice_without_set_epoch_repeats_the_epoch(coco):
    loader = mmpack.Loader(coco, 10, drop_last=False)
    first = [b["indices"].tolist() for b in loader]
    again = [b["indices"].tolist() for b in loader]
    loader.set_epoch(1)
    other = [b["indices"].tolist() for b in loader]
    assert first == again != other
    assert len(first) == len(loader) == 6


def test_all_captions_gives_every_pair_once(coco_multi):
    ref = H5Set(coco_multi)
    pairs = {(i, c) for i in range(N) for c in range(len(ref.captions(i)))}
    assert len(pairs) == 255
    batches = rank_batches(coco_multi, 2, 8, epoch=2, drop_last=False, caption_mode="all")
    order = global_order(batches, key=("indices", "caption_index"))
    assert len(order) == 16 * 16
    assert sorted(order[:255]) == sorted(pairs)
    for b in batches[1][:3]:  # tokens are those of the caption the batch names
        for j, (i, c) in enumerate(zip(b["indices"], b["caption_index"])):
            np.testing.assert_array_equal(b["tokens"][j, :b["lengths"][j]], ref.tokens(i)[c])


@pytest.mark.parametrize("as_torch", [False, True])
def test_batches_equal_h5py(coco_multi, as_torch):
    ref = H5Set(coco_multi)
    pad = ref.index["tokenizer"]["pad_id"]
    loader = mmpack.Loader(coco_multi, 6, seed=11, drop_last=False, as_torch=as_torch)
    seen = 0
    for b in loader:
        arrays = {k: (b[k].numpy() if as_torch else b[k])
                  for k in ("images", "tokens", "lengths", "indices", "caption_index")}
        if as_torch:
            import torch
            assert all(isinstance(b[k], torch.Tensor) for k in arrays)
        images, tokens, lengths = arrays["images"], arrays["tokens"], arrays["lengths"]
        assert images.dtype == np.uint8 and images.shape == (6, 224, 224, 3)
        assert tokens.dtype == np.int32 and tokens.shape == (6, max(1, lengths.max()))
        assert lengths.dtype == np.int32 and arrays["indices"].dtype == np.int64
        assert arrays["caption_index"].dtype == np.int32
        assert b["epoch"] == 0 and b["step"] == seen // 6
        for j, i in enumerate(arrays["indices"]):
            c = arrays["caption_index"][j]
            np.testing.assert_array_equal(images[j], ref.image(i))
            want = ref.tokens(i)[c]
            assert lengths[j] == len(want)
            np.testing.assert_array_equal(tokens[j, :lengths[j]], want)
            assert (tokens[j, lengths[j]:] == pad).all()
            assert b["keys"][j] == ref.key(i)
            assert 0 <= c < len(ref.captions(i))
        seen += 6
    assert seen == 54


def test_random_caption_varies_with_epoch(coco):
    def captions(epoch):
        loader = mmpack.Loader(coco, 51, shuffle=False)
        loader.set_epoch(epoch)
        return next(iter(loader))["caption_index"].tolist()

    c0, c1 = captions(0), captions(1)
    assert c0 == captions(0) and c0 != c1
    assert len(set(c0)) > 1 and all(0 <= c < 5 for c in c0 + c1)


def test_horizontal_flip_mirrors_about_half(coco):
    ref = H5Set(coco)
    loader = mmpack.Loader(coco, 17, shuffle=False, horizontal_flip=True)
    flipped = same = 0
    for b in loader:
        for img, i in zip(b["images"], b["indices"]):
            want = ref.image(i)
            if np.array_equal(img, want[:, ::-1]):
                flipped += 1
            else:
                np.testing.assert_array_equal(img, want)
                same += 1
    assert flipped + same == N and 10 <= flipped <= 41


def test_random_crop_is_seeded(coco):
    ref = H5Set(coco)

    def images(seed):
        loader = mmpack.Loader(coco, 51, shuffle=False, crop="rrc", seed=seed)
        return next(iter(loader))["images"].copy()

    a, b, c = images(1), images(1), images(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    changed = sum(not np.array_equal(a[i], ref.image(i)) for i in range(N))
    assert changed > N // 2


def test_rank_and_world_size_default_to_the_environment(coco, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    loader = mmpack.Loader(coco, 4)
    assert (loader.rank, loader.world_size) == (2, 3)
    assert len(loader) == N // 12
    assert mmpack.Loader(coco, 4, rank=0).rank == 0
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    loader = mmpack.Loader(coco, 4)
    assert (loader.rank, loader.world_size) == (0, 1)
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two' is not an integer"):
        mmpack.Loader(coco, 4)


def test_rank_and_world_size_default_to_torch_distributed(coco, monkeypatch, tmp_path):
    dist = pytest.importorskip("torch.distributed")
    monkeypatch.setenv("RANK", "1")  # torch.distributed wins over the environment
    monkeypatch.setenv("WORLD_SIZE", "4")
    dist.init_process_group("gloo", init_method="file://%s" % (tmp_path / "store"), rank=0,
                            world_size=1)
    try:
        loader = mmpack.Loader(coco, 4)
        assert (loader.rank, loader.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()
    assert mmpack.Loader(coco, 4).world_size == 4


def test_a_new_iteration_supersedes_the_old_iterator(coco):
    loader = mmpack.Loader(coco, 5)
    old = iter(loader)
    next(old)
    new = iter(loader)
    assert next(new)["step"] == 0
    with pytest.raises(RuntimeError, match="superseded"):
        next(old)


def test_properties_and_context_manager(coco):
    s = mmpack.ShardSet(coco)
    with mmpack.Loader(s, 8, caption_mode="all", num_threads=1, prefetch=1) as loader:
        assert loader.dataset is s
        assert loader.items_per_epoch == 255 and len(loader) == 255 // 8
        assert loader.batch_size == 8 and loader.epoch == 0
        batch = next(iter(loader))
    with pytest.raises(ValueError, match="closed"):
        next(iter(loader))
    assert batch["images"].shape[0] == 8  # still readable after close
    assert "batch_size=8" in repr(loader)


def test_state_dict_from_another_thread_while_iterating(coco):
    # The C++ Loader wants one consumer; the binding serialises calls (GIL released), so a
    # watcher thread may read the state while the main thread iterates.
    import threading
    loader = mmpack.Loader(coco, 3, drop_last=False)
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            seen.append(loader.state_dict()["consumed"])

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        batches = [b["indices"].tolist() for b in loader]
    finally:
        stop.set()
        thread.join()
    assert sorted(i for b in batches for i in b) == list(range(N))
    assert seen == sorted(seen) and all(c % 3 == 0 for c in seen) and seen
