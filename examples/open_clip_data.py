"""An open_clip-style get_data over mmpack shard sets: a replacement for
open_clip's training/data.py get_data(args, preprocess_fns, epoch, tokenizer) that returns
{"train": DataInfo, "val": DataInfo} with the contract its train.py relies on:

  - data["train"].set_epoch(epoch) before each epoch (DataInfo.set_epoch: it calls
    shared_epoch.set_value(epoch), and sampler.set_epoch(epoch) for a DistributedSampler);
  - dataloader = data["train"].dataloader, dataloader.num_batches and dataloader.num_samples
    (this rank's batches and samples per epoch);
  - each batch is (images, texts): [B, 3, H, W] float32, normalised with CLIP's mean and std,
    and [B, 77] int64 token ids.

Here the Loader is the sampler-like object (set_epoch, state_dict, load_state_dict) and also
drives shared_epoch (LoaderEpoch.set_value), so that open_clip's own DataInfo, which forwards
set_epoch to DistributedSampler instances only, still reaches it. open_clip itself (and its
webdataset) is not installable here; DataInfo below has the same fields and set_epoch, and
tests/python/test_examples.py runs a training loop shaped like open_clip's train_one_epoch.

    data = get_data(args)          # args.train_data, args.val_data, args.batch_size, ...
    for epoch in range(start_epoch, args.epochs):
        data["train"].set_epoch(epoch)
        for i, (images, texts) in enumerate(data["train"].dataloader): ...
"""

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch.utils.data import DataLoader

import mmpack

# CLIP's (OpenAI's) RGB statistics, open_clip's OPENAI_DATASET_MEAN / _STD.
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


class Normalize:
    """[B, 3, H, W] uint8 -> [B, 3, H, W] float32, (x / 255 - mean) / std: the Loader's
    transform= (run in its transform thread, ahead of the loop)."""

    def __init__(self, mean: Tuple[float, ...] = MEAN, std: Tuple[float, ...] = STD) -> None:
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        return images.float().div_(255).sub_(self.mean).div_(self.std)


def image_text_pair(batch: Dict[str, Any]) -> Tuple[torch.Tensor, torch.Tensor]:
    """The DataLoader's collate_fn (batch_size=None: one call per batch): the Loader's batch dict
    -> (images [B, 3, H, W] float32, texts [B, 77] int64), open_clip's (images, texts)."""
    return batch["images"], batch["tokens"].long()


class LoaderEpoch:
    """open_clip's SharedEpoch interface (set_value / get_value) over a Loader's epoch."""

    def __init__(self, loader: mmpack.Loader) -> None:
        self.loader = loader

    def set_value(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)

    def get_value(self) -> int:
        return self.loader.epoch


@dataclass
class DataInfo:
    """open_clip's DataInfo: the dataloader, a sampler(-like) and the shared epoch."""
    dataloader: DataLoader
    sampler: Any = None
    shared_epoch: Optional[LoaderEpoch] = None

    def set_epoch(self, epoch: int) -> None:
        if self.shared_epoch is not None:
            self.shared_epoch.set_value(epoch)


def get_mmpack_dataset(path: str, args: Any, is_train: bool, epoch: int = 0) -> DataInfo:
    """One split: a Loader (train: RandomResizedCrop's window and flips, shuffled; val: the
    centre crop in file order, every sample, the last global batch padded by wrap-around) in a
    DataLoader with num_workers=0; open_clip's --workers becomes the Loader's decode threads.
    args: batch_size, seed, rank, world_size (open_clip's), image_size (224), context_length
    (77), workers (None: one thread per CPU)."""
    size = getattr(args, "image_size", 224)
    loader = mmpack.Loader(
        path, args.batch_size, shuffle=is_train, drop_last=is_train, seed=args.seed,
        rank=args.rank, world_size=args.world_size, crop="rrc" if is_train else "center",
        horizontal_flip=is_train, output_size=size, pad_to=getattr(args, "context_length", 77),
        transform=Normalize(), num_threads=getattr(args, "workers", None) or None)
    loader.set_epoch(epoch)
    dataloader = DataLoader(loader, batch_size=None, collate_fn=image_text_pair,
                            pin_memory=torch.cuda.is_available())
    dataloader.num_batches = len(loader)  # type: ignore[attr-defined]
    dataloader.num_samples = len(loader) * args.batch_size  # type: ignore[attr-defined]
    return DataInfo(dataloader=dataloader, sampler=loader, shared_epoch=LoaderEpoch(loader))


def get_data(args: Any, preprocess_fns: Any = None, epoch: int = 0,
             tokenizer: Any = None) -> Dict[str, DataInfo]:
    """open_clip's get_data signature. preprocess_fns and tokenizer are not used: the images are
    cropped and resized by the Loader and normalised by Normalize, and the set holds token ids
    (built by `mmpack build --tokenizer ...` with the model's tokenizer)."""
    data = {}
    if getattr(args, "train_data", None):
        data["train"] = get_mmpack_dataset(args.train_data, args, True, epoch)
    if getattr(args, "val_data", None):
        data["val"] = get_mmpack_dataset(args.val_data, args, False)
    return data
