#!/usr/bin/python3
"""Trains a small CLIP-style model (Radford et al. 2021, "Learning Transferable Visual Models
From Natural Language Supervision": contrastive image-text loss) on mmpack shards with the
Python loader: PyTorch, AdamW, bf16 autocast, checkpoints that resume exactly.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_clip.py \\
        --shards out/quickstart/train --out out/clip --steps 60
    ... --steps 120 --resume      # continues from out/clip/checkpoint.pt

The model is deliberately tiny (a 2-layer ViT over 32-px patches, a 2-layer text transformer,
64-d joint space) so that it trains on 2 CPU cores in seconds; the loop is what a real run
looks like. Each step appends {"step", "epoch", "loss", "samples_per_s", "indices"} to
OUT/metrics.jsonl (indices: the batch's sample indices, to check a resume).
"""

import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

import mmpack

MEAN = torch.tensor([0.481, 0.458, 0.408]).view(1, 3, 1, 1)  # CLIP's RGB statistics
STD = torch.tensor([0.269, 0.261, 0.276]).view(1, 3, 1, 1)


class ImageEncoder(nn.Module):
    """[B, H, W, 3] uint8 -> [B, embed] float: 32x32 patches, 2 transformer layers, mean pool."""

    def __init__(self, height, width, dim=128, embed=64, patch=32):
        super().__init__()
        self.patchify = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.position = nn.Parameter(torch.zeros(1, (height // patch) * (width // patch), dim))
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=2 * dim, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2)
        self.project = nn.Linear(dim, embed)

    def forward(self, images):
        x = images.permute(0, 3, 1, 2).float().div(255).sub(MEAN).div(STD)  # [B, 3, H, W]
        x = self.patchify(x).flatten(2).transpose(1, 2) + self.position     # [B, P, dim]
        return self.project(self.blocks(x).mean(dim=1))                     # [B, embed]


class TextEncoder(nn.Module):
    """[B, L] int32 token ids + [B] lengths -> [B, embed] float: 2 transformer layers, mean pool
    over the real tokens (padding masked)."""

    def __init__(self, vocab_size, dim=128, embed=64, max_len=77):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, dim)
        self.position = nn.Parameter(torch.zeros(1, max_len, dim))
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=2 * dim, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2)
        self.project = nn.Linear(dim, embed)

    def forward(self, tokens, lengths):
        L = tokens.shape[1]
        pad = torch.arange(L).unsqueeze(0) >= lengths.unsqueeze(1)         # [B, L] True = pad
        x = self.tokens(tokens.long()) + self.position[:, :L]               # [B, L, dim]
        x = self.blocks(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(2).to(x.dtype)
        return self.project((x * keep).sum(1) / keep.sum(1).clamp(min=1))   # [B, embed]


class Clip(nn.Module):
    def __init__(self, height, width, vocab_size):
        super().__init__()
        self.image = ImageEncoder(height, width)
        self.text = TextEncoder(vocab_size)
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # CLIP's temperature

    def forward(self, images, tokens, lengths):
        """Symmetric InfoNCE over the batch: image j's caption is text j."""
        i = F.normalize(self.image(images), dim=-1)
        t = F.normalize(self.text(tokens, lengths), dim=-1)
        logits = self.log_scale.exp().clamp(max=100) * i @ t.t()            # [B, B]
        target = torch.arange(len(logits))
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2


def save(path, model, optimizer, loader, step):
    """Model, optimizer, loader position and step, written atomically (tmp + rename)."""
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "loader": loader.state_dict(), "step": step}, path + ".tmp")
    os.replace(path + ".tmp", path)


def train(args):
    torch.manual_seed(args.seed)
    loader = mmpack.Loader(args.shards, args.batch_size, seed=args.seed, num_threads=1,
                           horizontal_flip=True, as_torch=True)
    height, width, _ = loader.dataset.image_shape
    model = Clip(height, width, loader.dataset.vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    checkpoint = os.path.join(args.out, "checkpoint.pt")
    step = 0
    if args.resume:
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        step = state["step"]
        print("resumed at step %d (epoch %d, %d items in)" % (
            step, state["loader"]["epoch"], state["loader"]["consumed"]))
    epoch = loader.epoch
    with open(os.path.join(args.out, "metrics.jsonl"), "a") as metrics:
        while step < args.steps:
            loader.set_epoch(epoch)  # after a resume: the same epoch, from where it stopped
            tick = time.perf_counter()
            for batch in loader:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16"):
                    loss = model(batch["images"], batch["tokens"], batch["lengths"])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                step += 1
                now = time.perf_counter()
                record = {"step": step, "epoch": epoch, "loss": loss.item(),
                          "samples_per_s": len(batch["keys"]) / (now - tick),
                          "indices": batch["indices"].tolist()}
                tick = now
                metrics.write(json.dumps(record) + "\n")
                if step % args.log_every == 0 or step == args.steps:
                    print("step %4d  epoch %3d  loss %.4f  %6.1f samples/s" % (
                        step, epoch, record["loss"], record["samples_per_s"]), flush=True)
                if step % args.save_every == 0 or step == args.steps:
                    save(checkpoint, model, optimizer, loader, step)
                if step == args.steps:
                    break
            else:
                epoch += 1
    print("train_clip: %d steps; checkpoint %s" % (step, checkpoint))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", required=True, help="shard set (mmpack build output)")
    p.add_argument("--out", required=True, help="directory for checkpoint.pt and metrics.jsonl")
    p.add_argument("--steps", type=int, default=60, help="total optimizer steps")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--amp", choices=["bf16", "off"], default="bf16", help="CPU autocast")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=20, help="checkpoint every N steps")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train(args)


if __name__ == "__main__":
    main()
