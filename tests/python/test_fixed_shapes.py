"""pad_to: every batch's tokens are [B, pad_to], so that torch.compile and
CUDA graphs see one shape (the width was the batch's longest caption: 16, 17, 21, ...). Rows are
padded with the set's pad_id; a longer caption keeps its first pad_to tokens with the end token
last (open_clip's tokenize()), lengths clipped. On the real coco_multi set (ALBERT: no end
token) and on one built with a trained SentencePiece model (bos 2, eos 3)."""

import os

import numpy as np
import pytest

import mmpack
from conftest import DATA_DIR


@pytest.fixture(scope="module")
def with_eos(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("eos") / "set")
    index = mmpack.build(os.path.join(DATA_DIR, "coco-cc", "captions.jsonl"), out,
                         vocab_size=300, threads=2)
    assert index["tokenizer"]["eos_id"] >= 0
    return out


def test_pad_to_gives_one_token_shape_for_a_whole_epoch(coco_multi):
    plain = list(mmpack.Loader(coco_multi, 4, seed=4, drop_last=False, caption_mode="all"))
    assert len({b["tokens"].shape[1] for b in plain}) > 1  # the problem: widths vary
    padded = list(mmpack.Loader(coco_multi, 4, seed=4, drop_last=False, caption_mode="all",
                                pad_to=77, as_torch=True))
    assert {tuple(b["tokens"].shape) for b in padded} == {(4, 77)}
    pad_id = mmpack.ShardSet(coco_multi).pad_id
    for p, b in zip(padded, plain):
        width = b["tokens"].shape[1]
        np.testing.assert_array_equal(p["tokens"][:, :width].numpy(), b["tokens"])
        assert (p["tokens"][:, width:] == pad_id).all()
        np.testing.assert_array_equal(p["lengths"].numpy(), b["lengths"])


@pytest.mark.parametrize("pad_to", [5, 9])
def test_a_longer_caption_is_cut_with_its_end_token_last(with_eos, pad_to):
    eos = mmpack.ShardSet(with_eos).info["tokenizer"]["eos_id"]
    plain = list(mmpack.Loader(with_eos, 8, seed=1, drop_last=False))
    cut = list(mmpack.Loader(with_eos, 8, seed=1, drop_last=False, pad_to=pad_to))
    long_rows = 0
    for c, b in zip(cut, plain):
        assert c["tokens"].shape == (8, pad_to)
        for row, length in enumerate(b["lengths"]):
            tokens = b["tokens"][row, :length]
            assert tokens[-1] == eos  # the set's rows end with eos
            if length > pad_to:
                long_rows += 1
                np.testing.assert_array_equal(c["tokens"][row, :pad_to - 1], tokens[:pad_to - 1])
                assert c["tokens"][row, pad_to - 1] == eos and c["lengths"][row] == pad_to
            else:
                np.testing.assert_array_equal(c["tokens"][row, :length], tokens)
                assert c["lengths"][row] == length
    assert long_rows > 0


def test_pad_to_without_an_end_token_just_cuts(coco_multi):
    plain = next(iter(mmpack.Loader(coco_multi, 8, seed=2)))
    cut = next(iter(mmpack.Loader(coco_multi, 8, seed=2, pad_to=3)))
    np.testing.assert_array_equal(cut["tokens"], plain["tokens"][:, :3])
    np.testing.assert_array_equal(cut["lengths"], np.minimum(plain["lengths"], 3))


def test_bad_pad_to_is_refused(coco_multi, tmp_path):
    with pytest.raises(ValueError, match="pad_to"):
        mmpack.Loader(coco_multi, 4, pad_to=0)
    with pytest.raises(TypeError, match="pad_to"):
        mmpack.Loader(coco_multi, 4, pad_to="77")
    text_only = str(tmp_path / "text")
    mmpack.build(os.path.join(DATA_DIR, "coco-cc", "captions.jsonl"), text_only,
                 tokenizer="none", threads=2)
    with pytest.raises(ValueError, match="pad_to: .*--tokenizer none"):
        mmpack.Loader(text_only, 4, pad_to=77)


def test_pad_to_on_a_mixture(coco, coco_multi):
    # A mixture's ShardSet has no single index.json (reading it failed at construction).
    mix = "%s:0.5,%s:0.5" % (coco, coco_multi)
    shapes = {tuple(b["tokens"].shape) for b in mmpack.Loader(mix, 8, pad_to=40)}
    assert shapes == {(8, 40)}
