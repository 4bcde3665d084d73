"""mmpack.ShardSet: every sample of every real set equals what h5py reads; index rules; info."""

import json
import os
import pickle

import numpy as np
import pytest

import mmpack
from h5ref import H5Set


def test_every_sample_equals_h5py(any_set):
    s = mmpack.ShardSet(any_set)
    ref = H5Set(any_set)
    assert len(s) == len(ref) == ref.index["totals"]["samples"]
    for i in range(len(s)):
        sample = s[i]
        assert sample["index"] == i
        assert sample["image"].dtype == np.uint8
        assert sample["image"].shape == s.image_shape
        np.testing.assert_array_equal(sample["image"], ref.image(i))
        assert sample["key"] == ref.key(i)
        assert sample["source"] == ref.source(i)
        assert sample["captions"] == ref.captions(i)
        tokens = sample["tokens"]
        assert len(tokens) == len(sample["captions"]) >= 1
        for got, want in zip(tokens, ref.tokens(i)):
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want)
    ref.close()


def test_shapes_follow_the_build_options(build_set):
    # skimage was built with image_size=(80, 48) (W x H) and resize_mode pad.
    s = mmpack.ShardSet(build_set("skimage"))
    assert s.image_shape == (48, 80, 3)
    assert s[0]["image"].shape == (48, 80, 3)
    assert s.info["image"]["resize_mode"] == "pad"


def test_info_is_index_json(coco_multi):
    s = mmpack.ShardSet(coco_multi)
    with open(os.path.join(coco_multi, "index.json"), encoding="utf-8") as f:
        assert s.info == json.load(f)
    assert [sh["samples"] for sh in s.info["shards"]] == [16, 16, 16, 3]
    assert s.num_captions == s.info["totals"]["captions"] == 255
    assert s.pad_id == s.info["tokenizer"]["pad_id"]
    assert s.vocab_size == 30000
    # What the token ids mean: ALBERT sets are built with --lowercase.
    assert s.info["text"] == {"lowercase": True, "normalize": "none"}
    assert 0 <= s.info["tokenizer"]["unk_rate"] < 0.01
    assert s.root == coco_multi
    assert s.locate(17) == "shard-000001.h5 sample 1"
    assert "51 samples" in repr(s)


def test_python_index_rules(coco):
    s = mmpack.ShardSet(coco)
    n = len(s)
    assert s[-1]["key"] == s[n - 1]["key"]
    assert s[-n]["key"] == s[0]["key"]
    assert s[np.int64(3)]["key"] == s[3]["key"]
    for bad in (n, -n - 1, 10**12):
        with pytest.raises(IndexError, match="out of range for a set of 51 samples"):
            s[bad]
        with pytest.raises(IndexError):
            s.image(bad)
    with pytest.raises(TypeError):
        s["0"]
    assert [x["index"] for x in s] == list(range(n))  # iteration stops at IndexError-free end


def test_image_into_caller_buffer(coco):
    s = mmpack.ShardSet(coco)
    out = np.zeros(s.image_shape, np.uint8)
    got = s.image(5, out=out)
    assert got is out
    np.testing.assert_array_equal(out, s[5]["image"])
    for bad in (np.zeros((224, 224, 3), np.int32), np.zeros((224, 224), np.uint8),
                np.zeros((224, 224, 3), np.uint8)[:, ::-1], np.zeros((3, 224, 224), np.uint8)):
        with pytest.raises(ValueError, match="writable C-contiguous uint8 array of shape"):
            s.image(0, out=bad)
    frozen = np.zeros(s.image_shape, np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        s.image(0, out=frozen)
    with pytest.raises(ValueError):
        s.image(0, out=[0] * 10)


def test_tokens_and_text_accessors_agree_with_getitem(coco):
    s = mmpack.ShardSet(coco)
    sample = s[7]
    assert s.key(7) == sample["key"]
    assert s.captions(7) == sample["captions"]
    assert s.source(7) == sample["source"]
    assert all(np.array_equal(a, b) for a, b in zip(s.tokens(7), sample["tokens"]))


def test_root_is_absolute(coco, monkeypatch):
    monkeypatch.chdir(os.path.dirname(coco))
    s = mmpack.ShardSet(os.path.basename(coco))
    assert s.root == coco
    monkeypatch.chdir("/")
    assert s.info["totals"]["samples"] == 51


def test_pickles_as_its_path(coco):
    s = mmpack.ShardSet(coco, verify_checksums=True)
    t = pickle.loads(pickle.dumps(s))
    assert t.root == s.root and len(t) == len(s)
    np.testing.assert_array_equal(t.image(9), s.image(9))


def test_works_in_a_torch_dataloader_with_workers(coco):
    torch = pytest.importorskip("torch")

    class Images(torch.utils.data.Dataset):
        def __init__(self, root):
            self.set = mmpack.ShardSet(root)

        def __len__(self):
            return len(self.set)

        def __getitem__(self, i):
            return torch.from_numpy(self.set.image(i)), self.set.captions(i)[0]

    data = Images(coco)
    loader = torch.utils.data.DataLoader(data, batch_size=10, num_workers=2, shuffle=False,
                                         collate_fn=lambda xs: xs)
    seen = [x for batch in loader for x in batch]
    assert len(seen) == 51
    ref = H5Set(coco)
    for i in (0, 25, 50):
        np.testing.assert_array_equal(seen[i][0].numpy(), ref.image(i))
        assert seen[i][1] == ref.captions(i)[0]
