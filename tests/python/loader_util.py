"""Helpers of the Loader tests: run an epoch on every rank, rebuild the epoch's global order."""

import mmpack


def rank_batches(root, world_size, batch_size, epoch=0, state=None, **options):
    """{rank: [batch, ...]} for one epoch (or the rest of `state`'s epoch) on every rank of
    `world_size`; numpy batches, indices copied out with the batch kept."""
    out = {}
    for rank in range(world_size):
        loader = mmpack.Loader(root, batch_size, rank=rank, world_size=world_size, **options)
        if state is not None:
            loader.load_state_dict(state)
        else:
            loader.set_epoch(epoch)
        out[rank] = list(loader)
        if state is None:
            assert len(out[rank]) == len(loader)
    return out


def global_order(batches, key="indices"):
    """The global order the ranks' batches cover: global batch g is rank 0's batch g, then rank
    1's, ... (reader/README.md, 'Split'); entries of `key` (a list of ints, or of pairs for
    key=("indices", "caption_index"))."""
    ranks = sorted(batches)
    counts = {len(batches[r]) for r in ranks}
    assert len(counts) == 1, "ranks got different numbers of batches: %s" % counts
    order = []
    for g in range(counts.pop()):
        for r in ranks:
            b = batches[r][g]
            if isinstance(key, tuple):
                order += list(zip(*(b[k].tolist() for k in key)))
            else:
                order += b[key].tolist()
    return order
