"""examples/train_clip.py on the quick start's train split: its loss falls, and a run stopped at
a checkpoint and resumed continues exactly as the uninterrupted run (same batches, same
losses)."""

import json
import os
import subprocess
import sys

import pytest

import mmpack
from conftest import PYTHON_DIR, SOURCE_DIR

EXAMPLE = os.path.join(SOURCE_DIR, "examples", "train_clip.py")


@pytest.fixture(scope="module")
def train_split(tmp_path_factory):
    # As examples/quickstart.sh packs it: 41 photos, a tokenizer trained on their captions.
    out = str(tmp_path_factory.mktemp("quickstart") / "train")
    mmpack.build(os.path.join(SOURCE_DIR, "examples", "data", "coco-cc", "train.jsonl"), out,
                 vocab_size=600, samples_per_shard=16, threads=2)
    return out


def train(shards, out, steps, save_every=30, resume=False):
    """Runs the example; its metrics.jsonl records (one per step, a resumed run's appended)."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    args = ["--shards", shards, "--out", out, "--steps", str(steps), "--save-every",
            str(save_every)] + (["--resume"] if resume else [])
    r = subprocess.run([sys.executable, EXAMPLE] + args, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f], r.stdout


def test_loss_falls_and_resume_is_exact(train_split, tmp_path):
    whole, stdout = train(train_split, str(tmp_path / "whole"), 60)
    assert [m["step"] for m in whole] == list(range(1, 61))
    assert "train_clip: 60 steps" in stdout
    losses = [m["loss"] for m in whole]
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < 0.8 * first, (first, last)
    # 41 images, batch 16, drop_last: 2 batches an epoch, each image at most once per epoch.
    assert [m["epoch"] for m in whole] == [s // 2 for s in range(60)]
    for epoch in range(30):
        seen = whole[2 * epoch]["indices"] + whole[2 * epoch + 1]["indices"]
        assert len(set(seen)) == 32

    parted = str(tmp_path / "parted")
    train(train_split, parted, 30)
    resumed, stdout = train(train_split, parted, 60, resume=True)
    assert "resumed at step 30 (epoch 14, 32 items in)" in stdout  # the end of epoch 14
    assert [m["step"] for m in resumed] == list(range(1, 61))
    assert [m["indices"] for m in resumed] == [m["indices"] for m in whole]
    assert [m["loss"] for m in resumed] == pytest.approx(losses, rel=1e-4)


def test_resume_mid_epoch(train_split, tmp_path):
    whole, _ = train(train_split, str(tmp_path / "whole"), 9, save_every=5)
    parted = str(tmp_path / "parted")
    train(train_split, parted, 5, save_every=5)
    resumed, stdout = train(train_split, parted, 9, save_every=5, resume=True)
    assert "resumed at step 5 (epoch 2, 16 items in)" in stdout
    assert [m["indices"] for m in resumed] == [m["indices"] for m in whole]
    assert [m["loss"] for m in resumed] == pytest.approx([m["loss"] for m in whole], rel=1e-4)
