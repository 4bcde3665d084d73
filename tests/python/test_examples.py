"""The recipes of examples/ on the real sets, at 1 and 2 ranks:
lightning_datamodule.py driven the way Lightning's Trainer calls a DataModule (Lightning is not
installable here: its contract is what is tested), and open_clip_data.py's get_data driven the
way open_clip's train.py uses it (DataInfo.set_epoch, dataloader.num_batches, (images, texts))."""

import os
import sys
from types import SimpleNamespace

import pytest
import torch

from conftest import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "examples"))

from lightning_datamodule import MMPackDataModule  # noqa: E402
from open_clip_data import get_data  # noqa: E402

N = 51


def per_rank_epoch(batches_of_rank):
    """All indices of one epoch over the ranks: (list, per-global-batch count)."""
    return [i for batches in batches_of_rank for b in batches for i in b]


@pytest.mark.parametrize("world", [1, 2])
def test_the_datamodule_gives_each_rank_its_share_and_new_orders_per_epoch(coco_multi, coco,
                                                                           world):
    modules = [MMPackDataModule(coco_multi, coco, batch_size=4, output_size=32, rank=r,
                                world_size=world, seed=5, num_threads=1) for r in range(world)]
    orders = []
    for dm in modules:
        dm.prepare_data()
        dm.setup("fit")
        dm.trainer = SimpleNamespace(current_epoch=0)  # what Lightning attaches
    for epoch in range(2):
        ranks = []
        for dm in modules:
            dm.trainer.current_epoch = epoch  # reload_dataloaders_every_n_epochs=1
            batches = list(dm.train_dataloader())
            assert all(b["tokens"].shape == (4, 77) and b["images"].shape == (4, 32, 32, 3)
                       and b["epoch"] == epoch for b in batches)
            ranks.append([b["indices"].tolist() for b in batches])
        seen = per_rank_epoch(ranks)
        assert len(seen) == len(set(seen)) == N // (4 * world) * 4 * world
        orders.append(seen)
    assert orders[0] != orders[1]
    val = [i for dm in modules for b in dm.val_dataloader() for i in b["indices"].tolist()]
    assert set(val) == set(range(N))  # file order, the last global batch padded
    for dm in modules:
        dm.teardown("fit")


@pytest.mark.parametrize("before_setup", [False, True])
def test_the_datamodule_resumes_mid_epoch_from_its_state_dict(coco_multi, before_setup):
    dm = MMPackDataModule(coco_multi, batch_size=4, output_size=32, seed=8, num_threads=1)
    dm.setup("fit")
    dm.set_epoch(1)
    it = iter(dm.train_dataloader())
    next(it), next(it)
    checkpoint = {"MMPackDataModule": dm.state_dict()}  # what Lightning saves
    rest = [b["indices"].tolist() for b in it]
    again = MMPackDataModule(coco_multi, batch_size=4, output_size=32, num_threads=1)
    if before_setup:
        again.load_state_dict(checkpoint["MMPackDataModule"])
        again.setup("fit")
    else:  # Lightning's order on restore: setup, then load_state_dict
        again.setup("fit")
        again.load_state_dict(checkpoint["MMPackDataModule"])
    resumed = [b["indices"].tolist() for b in again.train_dataloader()]
    assert resumed == rest and len(rest) == 12 - 2


@pytest.mark.parametrize("world", [1, 2])
def test_open_clip_get_data_runs_open_clips_epoch_loop(coco_multi, coco, world):
    data = [get_data(SimpleNamespace(train_data=coco_multi, val_data=coco, batch_size=4, seed=3,
                                     rank=r, world_size=world, image_size=32, workers=1))
            for r in range(world)]
    for epoch in range(2):
        for d in data:
            d["train"].set_epoch(epoch)  # open_clip's train_one_epoch starts so
            assert d["train"].shared_epoch.get_value() == epoch
            dataloader = d["train"].dataloader
            assert dataloader.num_batches == N // (4 * world)
            assert dataloader.num_samples == dataloader.num_batches * 4
            count = 0
            for i, (images, texts) in enumerate(dataloader):
                assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
                assert texts.shape == (4, 77) and texts.dtype == torch.int64
                assert -3 < images.mean().item() < 3  # normalised, not 0..255
                count += 1
            assert count == dataloader.num_batches
            state = d["train"].sampler.state_dict()
            assert state["epoch"] == epoch and state["consumed"] == count * 4 * world
    # Every rank's share of epoch 1, re-read through the sampler-like Loader: no overlap.
    shares = []
    for d in data:
        d["train"].set_epoch(1)
        shares.append({i for b in d["train"].sampler for i in b["indices"].tolist()})
    assert sum(len(s) for s in shares) == len(set().union(*shares)) == N // (4 * world) * 4 * world
    images, texts = next(iter(data[0]["val"].dataloader))
    assert images.shape == (4, 3, 32, 32) and texts.shape == (4, 77)
