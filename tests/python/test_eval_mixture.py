"""Exact evaluation (even_batches=False), mixtures of sets in the open and the default load-time
filter: on sets the real `mmpack build` makes from ../shared/data
(coco-cc: 51 images)."""

import json
import os

import numpy as np
import pytest

import mmpack
from conftest import DATA_DIR, run
from loader_util import rank_batches

MMPACK = os.environ["MMPACK_BIN"]


def _items(batches):
    return [i for rank in sorted(batches) for b in batches[rank] for i in b["indices"].tolist()]


@pytest.mark.parametrize("batch_size", [32, 16, 8, 5])
def test_exact_evaluation_gives_51_distinct_items_over_2_ranks(coco, batch_size):
    # Padded (the default): 51 items come back as whole global batches, repeats included.
    padded = _items(rank_batches(coco, 2, batch_size, shuffle=False, drop_last=False))
    assert len(padded) == -(-51 // (2 * batch_size)) * 2 * batch_size
    # even_batches=False: every item once over both ranks, the last batches short.
    exact = rank_batches(coco, 2, batch_size, shuffle=False, drop_last=False, even_batches=False)
    items = _items(exact)
    assert len(items) == 51 and sorted(items) == list(range(51))
    rem = 51 % (2 * batch_size)
    for rank, batches in exact.items():
        last = min(batch_size, max(0, rem - rank * batch_size)) if rem else 0
        sizes = [len(b["indices"]) for b in batches]
        assert sizes == [batch_size] * (51 // (2 * batch_size)) + ([last] if last else []), rank
        for b in batches:  # every array of a short batch has its rows
            n = len(b["indices"])
            assert b["images"].shape[0] == b["tokens"].shape[0] == len(b["keys"]) == n
            assert b["set_index"].shape == (n,) and b["set_index"].dtype == np.int32
            assert not b["set_index"].any()


def test_exact_evaluation_resumes_under_another_world_size(coco):
    seen = []
    state = None
    for rank in range(2):
        loader = mmpack.Loader(coco, 8, rank=rank, world_size=2, drop_last=False,
                               even_batches=False, seed=3)
        it = iter(loader)
        for _ in range(2):
            seen += next(it)["indices"].tolist()
        state = loader.state_dict()
    assert state["consumed"] == 32
    rest = rank_batches(coco, 3, 4, state=state, drop_last=False, even_batches=False, seed=3)
    assert [len(rest[r]) for r in range(3)] == [2, 2, 1]  # 19 left: 12, then 4 + 3 + 0
    seen += _items(rest)
    assert sorted(seen) == list(range(51))


def test_even_batches_false_needs_drop_last_false(coco):
    with pytest.raises(ValueError, match="drop_last=false"):
        mmpack.Loader(coco, 8, even_batches=False)


@pytest.fixture(scope="module")
def mixture(coco, coco_multi):
    return "%s:0.7,%s:0.3" % (coco, coco_multi)


def test_shard_set_opens_a_mixture(mixture, coco, coco_multi):
    ds = mmpack.ShardSet(mixture)
    a, b = mmpack.ShardSet(coco), mmpack.ShardSet(coco_multi)
    assert len(ds) == 102
    sets = ds.sets
    assert [s["path"] for s in sets] == [coco, coco_multi]
    assert [s["weight"] for s in sets] == [0.7, 0.3]
    assert [s["first"] for s in sets] == [0, 51]
    assert [s["samples"] for s in sets] == [51, 51]
    # 102 items an epoch: 71.4 -> 71, 30.6 -> 30, the one left to the larger fraction (b).
    assert [s["epoch_samples"] for s in sets] == [71, 31]
    assert ds.set_of(50) == 0 and ds.set_of(51) == 1 and ds.set_of(-1) == 1
    assert ds[51]["key"] == b[0]["key"] and ds[3]["key"] == a[3]["key"]
    assert np.array_equal(ds.image(60), b.image(9))
    assert ds.info["mixture"] == mixture
    assert [s["totals"]["samples"] for s in ds.info["sets"]] == [51, 51]
    with pytest.raises(IndexError):
        ds.set_of(102)


def test_loader_batches_say_which_set_each_row_came_from(mixture):
    ds = mmpack.ShardSet(mixture)
    loader = mmpack.Loader(ds, 8, drop_last=False, even_batches=False, seed=1)
    per_set = [0, 0]
    for batch in loader:
        assert batch["set_index"].dtype == np.int32
        for i, s in zip(batch["indices"].tolist(), batch["set_index"].tolist()):
            assert s == ds.set_of(i)
            per_set[s] += 1
    assert per_set == [s["epoch_samples"] for s in ds.sets]  # each set's weighted share


def test_mixture_of_stored_sizes_needs_an_output_size(build_set, coco):
    small = build_set("coco_raw")  # 96 px, coco 224 px by default
    mix = "%s:1,%s:1" % (coco, small)
    with pytest.raises(ValueError, match="output size"):
        mmpack.Loader(mix, 8)
    loader = mmpack.Loader(mix, 8, crop="rrc", output_size=(64, 64), drop_last=False,
                           even_batches=False)
    shapes = {tuple(b["images"].shape[1:]) for b in loader}
    assert shapes == {(64, 64, 3)}


def test_info_verify_stats_of_a_mixture(mixture):
    for command in ("info", "verify", "stats"):
        r = run(MMPACK, command, mixture)
        assert r.returncode == 0, r.stderr
        assert "== set 0 of 2" in r.stdout and "== set 1 of 2" in r.stdout, r.stdout
        assert "total:" in r.stdout and "102 samples" in r.stdout, r.stdout
        r = run(MMPACK, command, mixture, "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["total"]["samples"] == 102 and doc["epoch_items"] == 102
        assert [s["epoch_samples"] for s in doc["sets"]] == [71, 31]
        assert all(isinstance(s["report"], dict) for s in doc["sets"]), doc
        assert doc["ok"] is True
    info = json.loads(run(MMPACK, "info", mixture, "--json").stdout)
    assert [s["report"]["samples"] for s in info["sets"]] == [51, 51]


def test_verify_of_a_mixture_names_the_set_that_fails(mixture, tmp_path):
    r = run(MMPACK, "verify", mixture + ",%s:0.1" % (tmp_path / "missing"))
    assert r.returncode != 0
    assert "set 2" in r.stderr and "missing" in r.stderr, r.stderr


def test_default_filter_is_bilinear_and_lanczos_is_on_request(coco):
    def first(**kw):
        loader = mmpack.Loader(coco, 4, shuffle=False, crop="rrc", output_size=(40, 40), **kw)
        return next(iter(loader))["images"].copy()
    by_default = first()
    assert np.array_equal(by_default, first(interpolation="bilinear"))
    assert not np.array_equal(by_default, first(interpolation="lanczos"))


def test_verify_of_a_mixture_refuses_sets_tokenized_differently(coco, tmp_path):
    text_only = tmp_path / "text_only"
    mmpack.build(os.path.join(DATA_DIR, "coco-cc", "captions.jsonl"), str(text_only),
                 tokenizer="none", threads=2)
    mix = "%s:1,%s:1" % (coco, text_only)
    r = run(MMPACK, "verify", mix, "--json")
    assert r.returncode != 0
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and "tokenized differently" in doc["error"], doc
    # Each set alone verifies.
    assert run(MMPACK, "verify", str(text_only)).returncode == 0
