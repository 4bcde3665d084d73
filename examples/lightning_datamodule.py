"""A Lightning-style DataModule over mmpack shard sets: what a PyTorch Lightning user writes to
train on mmpack (run by tests/python/test_examples.py).

    dm = MMPackDataModule("out/train", "out/val", batch_size=256, output_size=224)
    trainer = lightning.Trainer(reload_dataloaders_every_n_epochs=1, ...)
    trainer.fit(model, datamodule=dm)

It follows LightningDataModule's contract (prepare_data, setup(stage), train_dataloader,
val_dataloader, state_dict, load_state_dict) as a plain class: Lightning is not a Debian package
and cannot be installed here, so tests/python/test_examples.py drives the contract the way
Lightning's Trainer calls it. With Lightning installed, derive from lightning.LightningDataModule
and nothing else changes.

- Ranks: each Loader takes torch.distributed's rank and world size (or RANK / WORLD_SIZE), so
  under DDP every rank reads its own share; Lightning must not add a DistributedSampler (it
  does not for an IterableDataset).
- Epochs: Lightning calls set_epoch on a DataLoader's sampler only, and an IterableDataset has
  none that would reach the Loader. With reload_dataloaders_every_n_epochs=1 Lightning calls
  train_dataloader() at every epoch, which sets the epoch from trainer.current_epoch (a
  DataLoader over a Loader costs nothing to make: no worker processes). Without it, call
  dm.set_epoch(epoch) from LightningModule.on_train_epoch_start.
- Resume: Lightning saves DataModule.state_dict() in its checkpoints and calls load_state_dict
  after setup on restore; the train Loader then continues its epoch exactly (mid-epoch too).
- num_workers=0: the Loader decodes in its own C++ threads; Lightning's warning that suggests
  more workers does not apply.
Batches: dicts with "images" [B, H, W, 3] uint8 (or what transform= returns), "tokens" [B, 77]
int32 (pad_to: one shape for torch.compile), "lengths" [B] int32, "indices" [B] int64, ...
"""

from typing import Any, Callable, Dict, Optional, Tuple, Union

from torch.utils.data import DataLoader

import mmpack


class MMPackDataModule:
    """Train and validation Loaders of mmpack sets, as Lightning's DataModule hooks want them.

    Args:
        train, val: set directories or URLs (val may be None).
        batch_size: per rank.
        output_size: pixels (int or (height, width)); train crops with RandomResizedCrop's
            window and flips, val takes the centre crop.
        pad_to: tokens per row (CLIP's 77).
        transform: the Loader's transform= for training batches (run ahead in a thread).
        seed, rank, world_size, num_threads: as mmpack.Loader's.
    """

    def __init__(self, train: str, val: Optional[str] = None, *, batch_size: int = 32,
                 output_size: Union[int, Tuple[int, int]] = 224, pad_to: int = 77,
                 transform: Optional[Callable[[Any], Any]] = None, seed: int = 0,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 num_threads: Optional[int] = None) -> None:
        self.paths = {"train": train, "val": val}
        self.options = dict(output_size=output_size, pad_to=pad_to, seed=seed, rank=rank,
                            world_size=world_size, num_threads=num_threads)
        self.batch_size = batch_size
        self.transform = transform
        self.train: Optional[mmpack.Loader] = None
        self.val: Optional[mmpack.Loader] = None
        self.trainer: Any = None  # Lightning sets it on a LightningDataModule
        self._epoch = 0
        self._pending: Optional[Dict[str, Any]] = None  # load_state_dict before setup

    def prepare_data(self) -> None:
        """Nothing to download: the sets were built by `mmpack build`."""

    def setup(self, stage: Optional[str] = None) -> None:
        """Opens the Loaders of `stage` ("fit", "validate", None: both)."""
        if stage in (None, "fit") and self.train is None:
            self.train = mmpack.Loader(self.paths["train"], self.batch_size, crop="rrc",
                                       horizontal_flip=True, transform=self.transform,
                                       **self.options)
            if self._pending is not None:
                self.train.load_state_dict(self._pending)
                self._pending = None
        if stage in (None, "fit", "validate") and self.val is None and self.paths["val"]:
            self.val = mmpack.Loader(self.paths["val"], self.batch_size, crop="center",
                                     shuffle=False, drop_last=False, **self.options)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next train_dataloader() iteration runs (its shuffle)."""
        self._epoch = epoch

    def train_dataloader(self) -> DataLoader:
        assert self.train is not None, "call setup('fit') first"
        epoch = getattr(self.trainer, "current_epoch", None)
        self.train.set_epoch(self._epoch if epoch is None else epoch)
        return DataLoader(self.train, batch_size=None)

    def val_dataloader(self) -> DataLoader:
        assert self.val is not None, "call setup('validate') with a val set"
        return DataLoader(self.val, batch_size=None)

    def state_dict(self) -> Dict[str, Any]:
        """The train Loader's position (Lightning stores it in checkpoints)."""
        return {"train": self.train.state_dict() if self.train is not None else self._pending}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores the train Loader's position (before or after setup)."""
        if state.get("train") is None:
            return
        if self.train is None:
            self._pending = state["train"]
        else:
            self.train.load_state_dict(state["train"])
        self._epoch = int(state["train"]["epoch"])

    def teardown(self, stage: Optional[str] = None) -> None:
        for loader in (self.train, self.val):
            if loader is not None:
                loader.close()
