"""Loader.state_dict / load_state_dict: resume mid-epoch exactly, also at another world size."""

import io

import numpy as np
import pytest

import mmpack
from loader_util import global_order, rank_batches

N = 51


def take(loader, k):
    it = iter(loader)
    return [next(it) for _ in range(k)], it


def test_resume_gives_the_same_remaining_batches(coco_multi):
    a = mmpack.Loader(coco_multi, 4, seed=5, drop_last=False)
    a.set_epoch(2)
    _, it = take(a, 5)
    state = a.state_dict()
    identity = {k: state.pop(k) for k in ("set", "set_source", "caption_mode")}
    assert state == {"seed": 5, "epoch": 2, "consumed": 20, "world_size": 1, "batch_size": 4,
                     "items_per_epoch": N, "order": "global", "shuffle_window": 0}
    assert identity["set_source"] == coco_multi and identity["caption_mode"] == "random"
    state.update(identity)
    rest = list(it)
    assert len(rest) == 13 - 5

    b = mmpack.Loader(coco_multi, 4, seed=0, drop_last=False)  # the state brings its seed
    b.load_state_dict(state)
    b.set_epoch(2)  # the same epoch: keeps the restored position (a training loop's habit)
    resumed = list(b)
    assert [x["indices"].tolist() for x in resumed] == [x["indices"].tolist() for x in rest]
    assert [x["step"] for x in resumed] == [x["step"] for x in rest] == list(range(5, 13))
    for x, y in zip(resumed, rest):
        np.testing.assert_array_equal(x["images"], y["images"])
        np.testing.assert_array_equal(x["tokens"], y["tokens"])
    assert b.state_dict()["consumed"] == N
    # The next epoch after a resumed one is a whole, fresh epoch.
    b.set_epoch(3)
    a.set_epoch(3)
    assert [x["indices"].tolist() for x in b] == [x["indices"].tolist() for x in a]


@pytest.mark.parametrize("before,after", [((2, 4), (3, 5)), ((3, 2), (1, 7)), ((1, 8), (2, 8))])
def test_resume_at_another_world_size(coco_multi, before, after):
    (w0, b0), (w1, b1) = before, after
    reference = global_order(rank_batches(coco_multi, 1, 1, epoch=1, drop_last=False))
    states = []
    for rank in range(w0):  # ranks in lockstep, 3 batches each
        loader = mmpack.Loader(coco_multi, b0, rank=rank, world_size=w0, drop_last=False)
        loader.set_epoch(1)
        take(loader, 3)
        states.append(loader.state_dict())
    assert all(s == states[0] for s in states)  # any rank's state will do
    consumed = states[0]["consumed"]
    assert consumed == 3 * w0 * b0
    rest = global_order(rank_batches(coco_multi, w1, b1, state=states[0], drop_last=False))
    # The rest of the same global order from `consumed`, padded with the epoch's first items.
    assert rest[:N - consumed] == reference[consumed:]
    assert rest[N - consumed:] == reference[:len(rest) - (N - consumed)]


def test_resume_with_all_captions(coco):
    a = mmpack.Loader(coco, 16, caption_mode="all", seed=3)
    _, it = take(a, 7)
    state = a.state_dict()
    b = mmpack.Loader(coco, 16, caption_mode="all")
    b.load_state_dict(state)
    pairs = [(x["indices"].tolist(), x["caption_index"].tolist()) for x in b]
    assert pairs == [(x["indices"].tolist(), x["caption_index"].tolist()) for x in it]
    assert len(pairs) == 255 // 16 - 7


def test_state_round_trips_through_torch_save(coco):
    torch = pytest.importorskip("torch")
    a = mmpack.Loader(coco, 8, seed=9)
    take(a, 2)
    buf = io.BytesIO()
    torch.save({"loader": a.state_dict()}, buf)
    buf.seek(0)
    b = mmpack.Loader(coco, 8)
    b.load_state_dict(torch.load(buf)["loader"])
    assert b.state_dict() == a.state_dict()


def test_state_before_and_between_epochs(coco):
    loader = mmpack.Loader(coco, 10, seed=4)
    assert loader.state_dict()["consumed"] == 0 and loader.state_dict()["epoch"] == 0
    loader.set_epoch(6)
    assert (loader.state_dict()["epoch"], loader.state_dict()["consumed"]) == (6, 0)
    list(loader)
    assert (loader.state_dict()["epoch"], loader.state_dict()["consumed"]) == (6, 50)  # drop_last
    loader.set_epoch(7)
    assert (loader.state_dict()["epoch"], loader.state_dict()["consumed"]) == (7, 0)
    assert loader.state_dict()["seed"] == 4
    # A state saved at the end of an epoch resumes to an empty rest of that epoch.
    end = mmpack.Loader(coco, 10)
    end.load_state_dict({"seed": 4, "epoch": 6, "consumed": 51})
    assert list(end) == []
    # set_epoch to another epoch drops a restored position.
    other = mmpack.Loader(coco, 10)
    other.load_state_dict({"seed": 4, "epoch": 6, "consumed": 20})
    other.set_epoch(8)
    assert len(list(other)) == 5


def test_a_state_is_refused_by_a_loader_of_another_order(coco_multi):
    # Every key reaches the C++ Restore: a block-shuffle state used to restore under the global
    # order (or another window) silently, the same positions then being other items.
    a = mmpack.Loader(coco_multi, 4, seed=3, shuffle_mode="block", shuffle_window=2)
    _, it = take(a, 3)
    state = a.state_dict()
    assert (state["order"], state["shuffle_window"]) == ("block", 2)
    for other in ({"shuffle_mode": "global"}, {"shuffle_mode": "block", "shuffle_window": 3},
                  {"shuffle": False}):
        b = mmpack.Loader(coco_multi, 4, **other)
        with pytest.raises(ValueError, match="saved under order 'block' \\(window 2\\)"):
            b.load_state_dict(state)
    # Between epochs too (set_epoch moved on, nothing read): the state names its order.
    a.set_epoch(4)
    with pytest.raises(ValueError, match="order 'block'"):
        mmpack.Loader(coco_multi, 4).load_state_dict(a.state_dict())
    same = mmpack.Loader(coco_multi, 4, shuffle_mode="block", shuffle_window=2)
    same.load_state_dict(state)
    assert [x["indices"].tolist() for x in same] == [x["indices"].tolist() for x in it]


def test_a_state_is_refused_by_a_loader_of_another_set_or_mixture(coco, coco_multi):
    # Same items per epoch (the old check), other items at the same positions.
    mix, swapped = ("%s:0.7,%s:0.3" % (coco, coco_multi), "%s:0.3,%s:0.7" % (coco, coco_multi))
    a = mmpack.Loader(mix, 8, seed=1)
    _, it = take(a, 2)
    state = a.state_dict()
    assert len(state["set"]) == 16 and state["caption_mode"] == "random"
    b = mmpack.Loader(swapped, 8)
    assert b.items_per_epoch == a.items_per_epoch
    with pytest.raises(ValueError, match="another set or mixture"):
        b.load_state_dict(state)
    single = mmpack.Loader(coco, 8)
    take(single, 1)
    with pytest.raises(ValueError, match="saved reading '%s'" % coco):
        mmpack.Loader(coco_multi, 8).load_state_dict(single.state_dict())
    # The same sets and weights: accepted, the rest of the epoch as the first loader gives it.
    same = mmpack.Loader(mix, 8)
    same.load_state_dict(state)
    assert [x["indices"].tolist() for x in same] == [x["indices"].tolist() for x in it]
    # A state saved before identities existed restores unchecked, as it always did.
    old = {k: state[k] for k in ("seed", "epoch", "consumed", "world_size", "batch_size")}
    mmpack.Loader(swapped, 8).load_state_dict(old)


def test_bad_states_are_value_errors(coco):
    loader = mmpack.Loader(coco, 10)
    with pytest.raises(ValueError, match="lacks consumed"):
        loader.load_state_dict({"seed": 1, "epoch": 0})
    with pytest.raises(ValueError, match="outside the epoch's 51 items"):
        loader.load_state_dict({"seed": 1, "epoch": 0, "consumed": 52})
    with pytest.raises(ValueError, match="epoch"):
        loader.load_state_dict({"seed": 1, "epoch": -1, "consumed": 0})
    with pytest.raises(ValueError, match="255 items per epoch, this one has 51"):
        loader.load_state_dict({"seed": 1, "epoch": 0, "consumed": 0, "items_per_epoch": 255})
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        loader.set_epoch(-1)
