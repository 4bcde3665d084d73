"""The Loader's batches do not depend on how its work is shared among threads:
any num_threads and prefetch, and a restore in the middle of an epoch, give the same batches,
byte for byte (images, tokens, lengths, indices, caption choice, keys, epoch, step), on a raw
(zstd) set and a stored-JPEG set, both with random-resized crops and flips.

GOLDEN holds each case's digest of an epoch as main's loader gave it before the batch work was
shared among threads (commit e203e0b: each thread decoded whole batches), so the test compares
the new loader with the old one, not only with itself. It changes, legitimately, when the epoch
order, a transform or `mmpack build`'s output changes: then check that every thread count still
agrees and paste the new digest that the failure message prints.
"""

import hashlib
import os

import numpy as np
import pytest

import mmpack
from conftest import ALBERT, DATA_DIR

COCO = os.path.join(DATA_DIR, "coco-cc", "captions.jsonl")

# (num_threads, prefetch): one thread and one batch (the sequential path), fewer threads than
# prefetch, more, and more threads than the machine's 2 cores.
SCHEDULES = [(1, 1), (2, 1), (2, 4), (3, 2), (4, 8), (7, 1)]

# How each set is built (mmpack.build keywords) and read (mmpack.Loader keywords).
CASES = {
    "raw": (dict(image_size=96, samples_per_shard=16),
            dict(batch_size=4, seed=5, crop="rrc", output_size=(40, 56), horizontal_flip=True,
                 interpolation="bilinear", drop_last=False, rank=1, world_size=2)),
    "jpeg": (dict(codec="jpeg", resize_mode="keep-ratio", max_size=160, samples_per_shard=20),
             dict(batch_size=5, seed=11, crop="rrc", output_size=(64, 48), horizontal_flip=True,
                  interpolation="lanczos",  # the golden digest's filter (the default is bilinear)
                  caption_mode="all", rank=0, world_size=1)),
}
EPOCH = 1
STOP_AFTER = 3  # batches read before the state is saved and a new loader restores it

GOLDEN = {
    "raw": "075c7baa738ab18de0e7fcc62a9e97a29a1ab36b89a8a0e63999af64c565db87",
    "jpeg": "de8536c2fd0976bb76b757f9f477d9d8001bafb28bea4e3c039786a9c1c67a37",
}


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("threads")
    out = {}
    for name, (build, _) in CASES.items():
        out[name] = str(root / name)
        mmpack.build(COCO, out[name], tokenizer=ALBERT, lowercase=True, threads=2, **build)
    return out


def batch_digest(batch):
    """SHA-256 of everything a batch holds, in a fixed order."""
    h = hashlib.sha256()
    for key in ("images", "tokens", "lengths", "indices", "caption_index"):
        a = np.ascontiguousarray(batch[key])
        h.update(("%s %s %s\n" % (key, a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    h.update("\n".join(batch["keys"]).encode("utf-8"))
    h.update(("\nepoch %d step %d" % (batch["epoch"], batch["step"])).encode())
    return h.hexdigest()


def epoch_digests(root, threads, prefetch, options):
    loader = mmpack.Loader(root, num_threads=threads, prefetch=prefetch, **options)
    loader.set_epoch(EPOCH)
    return [batch_digest(b) for b in loader]


def resumed_digests(root, threads, prefetch, options):
    """STOP_AFTER batches, state_dict, then the rest of the epoch from a new loader."""
    first = mmpack.Loader(root, num_threads=threads, prefetch=prefetch, **options)
    first.set_epoch(EPOCH)
    it = iter(first)
    out = [batch_digest(next(it)) for _ in range(STOP_AFTER)]
    state = first.state_dict()
    first.close()
    second = mmpack.Loader(root, num_threads=threads, prefetch=prefetch, **options)
    second.load_state_dict(state)
    return out + [batch_digest(b) for b in second]


def sequence_digest(digests):
    return hashlib.sha256("".join(digests).encode()).hexdigest()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_schedule_and_a_restore_give_mains_batches(sets, case):
    options = CASES[case][1]
    reference = epoch_digests(sets[case], 1, 1, options)
    assert len(reference) > 2 * STOP_AFTER
    assert len(set(reference)) == len(reference)  # batches differ: the digest sees content
    for threads, prefetch in SCHEDULES:
        assert epoch_digests(sets[case], threads, prefetch, options) == reference, (
            "num_threads=%d prefetch=%d" % (threads, prefetch))
        assert resumed_digests(sets[case], threads, prefetch, options) == reference, (
            "restored, num_threads=%d prefetch=%d" % (threads, prefetch))
    got = sequence_digest(reference)
    assert got == GOLDEN[case], (
        "the %s epoch differs from main's loader before issue 24 (see the module docstring); "
        "digest now %s" % (case, got))
