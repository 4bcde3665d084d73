"""transform= and text_transform=: run by a thread of the Loader, a few batches
ahead of the training loop, on every batch; state_dict() counts the batches handed out, not
those transformed ahead, so a resume with a transform on continues exactly. On the real sets."""

import os
import threading
import time

import pytest
import torch
import torchvision.transforms as T

import mmpack
from conftest import DATA_DIR


def invert(images):
    """[B, 3, H, W] uint8 -> 255 - images, and where it ran."""
    assert images.shape[1] == 3 and images.dtype == torch.uint8
    invert.threads.add(threading.current_thread().name.split("_")[0])
    return 255 - images


invert.threads = set()


@pytest.mark.parametrize("threads", [1, 3])
def test_a_transform_that_changes_pixels_is_applied_to_every_batch(coco_multi, threads):
    plain = list(mmpack.Loader(coco_multi, 4, seed=9, output_size=40, drop_last=False))
    invert.threads.clear()
    out = list(mmpack.Loader(coco_multi, 4, seed=9, output_size=40, drop_last=False,
                             transform=invert, transform_threads=threads))
    assert len(out) == len(plain) == 13
    for o, p in zip(out, plain):
        expected = 255 - torch.from_numpy(p["images"]).permute(0, 3, 1, 2)
        assert o["images"].shape == (4, 3, 40, 40) and torch.equal(o["images"], expected)
        assert o["indices"].tolist() == p["indices"].tolist()
        assert isinstance(o["tokens"], torch.Tensor)  # the arrays are tensors, as as_torch=True
    assert invert.threads == {"mmpack-transform"}  # off the training thread


def test_torchvision_colour_jitter_on_uint8_batches(coco_multi):
    torch.manual_seed(0)
    jitter = T.ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5, hue=0.1)
    plain = list(mmpack.Loader(coco_multi, 8, seed=1, output_size=32))
    out = list(mmpack.Loader(coco_multi, 8, seed=1, output_size=32, transform=jitter))
    for o, p in zip(out, plain):
        assert o["images"].dtype == torch.uint8 and o["images"].shape == (8, 3, 32, 32)
        assert not torch.equal(o["images"], torch.from_numpy(p["images"]).permute(0, 3, 1, 2))


@pytest.mark.parametrize("ahead,threads", [(1, 1), (3, 1), (2, 3)])
def test_a_resume_with_a_transform_on_continues_exactly(coco_multi, ahead, threads):
    a = mmpack.Loader(coco_multi, 4, seed=3, transform=invert, transform_ahead=ahead,
                      transform_threads=threads)
    a.set_epoch(1)
    it = iter(a)
    taken = [next(it) for _ in range(3)]
    state = a.state_dict()
    assert state["consumed"] == 12 and [b["step"] for b in taken] == [0, 1, 2]
    rest = list(it)
    b = mmpack.Loader(coco_multi, 4, transform=invert, transform_ahead=ahead,
                      transform_threads=threads)
    b.load_state_dict(state)
    resumed = list(b)
    assert len(resumed) == len(rest) == 12 - 3
    for x, y in zip(resumed, rest):
        assert x["step"] == y["step"] and torch.equal(x["images"], y["images"])
        assert torch.equal(x["tokens"], y["tokens"])


def test_a_new_iteration_after_a_dropped_one_gets_the_whole_epoch(coco_multi):
    reference = [b["indices"].tolist() for b in mmpack.Loader(coco_multi, 4, seed=6)]
    loader = mmpack.Loader(coco_multi, 4, seed=6, transform=invert, transform_ahead=4)
    it = iter(loader)
    next(it)  # the thread runs ahead; a new iter() must stop it before restarting the epoch
    assert [b["indices"].tolist() for b in loader] == reference
    loader.close()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_transform_error_comes_after_the_batches_before_it(coco_multi, threads):
    plain = iter(mmpack.Loader(coco_multi, 4, as_torch=True))
    third = [next(plain) for _ in range(3)][2]["images"].permute(0, 3, 1, 2)

    def third_fails(images):  # on the third batch, whichever thread runs it and when
        if torch.equal(images, third):
            raise ValueError("bad augmentation")
        return images

    it = iter(mmpack.Loader(coco_multi, 4, transform=third_fails, transform_threads=threads))
    next(it), next(it)
    with pytest.raises(ValueError, match="bad augmentation"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_text_transform_tokenizes_the_texts_in_the_transform_thread(tmp_path):
    out = str(tmp_path / "text")
    mmpack.build(os.path.join(DATA_DIR, "coco-cc", "captions.jsonl"), out, tokenizer="none",
                 threads=2)
    seen = set()

    def tokenize(texts):  # a user's tokenizer: [B, 77] int64, as open_clip's
        seen.add(threading.current_thread().name)
        ids = torch.zeros(len(texts), 77, dtype=torch.int64)
        for row, text in enumerate(texts):
            codes = [ord(c) for c in text[:77]]
            ids[row, :len(codes)] = torch.tensor(codes)
        return ids

    for b in mmpack.Loader(out, 8, text_transform=tokenize):
        assert b["tokens"].shape == (8, 77) and b["tokens"].dtype == torch.int64
        assert [chr(c) for c in b["tokens"][0, :5].tolist()] == list(b["texts"][0][:5])
    assert seen == {"mmpack-transform"}


def test_bad_transforms_are_refused(coco_multi):
    with pytest.raises(TypeError, match="transform must be callable"):
        mmpack.Loader(coco_multi, 4, transform="ColorJitter")
    with pytest.raises(ValueError, match="text_transform: .*token ids"):
        mmpack.Loader(coco_multi, 4, text_transform=str.split)
    with pytest.raises(ValueError, match="transform_ahead"):
        mmpack.Loader(coco_multi, 4, transform=invert, transform_ahead=0)
    with pytest.raises(ValueError, match="transform_threads"):
        mmpack.Loader(coco_multi, 4, transform=invert, transform_threads=0)


def test_an_iterator_never_advanced_starts_no_thread(coco_multi):
    before = threading.active_count()
    loader = mmpack.Loader(coco_multi, 4, transform=invert)
    it = iter(loader)
    assert threading.active_count() == before
    del it
    next(iter(loader))  # the first next() starts it; dropping the iterator stops it
    assert not any(t.name == "mmpack-transform" for t in threading.enumerate())
    it = iter(loader)
    next(it)
    assert sum(t.name == "mmpack-transform" for t in threading.enumerate()) == 1
    loader.close()
    assert not any(t.name == "mmpack-transform" for t in threading.enumerate())


class HostCopier:
    """The CudaCopier's interface on the host (this machine has no CUDA): start() marks the
    batch, finish() hands it back. Only the pipeline's order and state are under test here."""

    def start(self, batch):
        batch["started"] = True
        return batch

    def finish(self, batch):
        return batch


def test_transforms_before_the_device_copy_keep_the_state_of_the_batch_handed_out(coco_multi):
    # device="cuda" with transform=: the transform thread's batches go through the copier one
    # batch ahead; state_dict() must count neither the batch being copied nor those being
    # transformed (device="cuda" itself is tested in test_device.py where CUDA exists).
    loader = mmpack.Loader(coco_multi, 4, seed=2, transform=invert, transform_ahead=2)
    loader._device, loader._copier = torch.device("cuda"), HostCopier()
    it = iter(loader)
    for k in range(1, 5):
        batch = next(it)
        assert batch["started"] and batch["step"] == k - 1
        state = loader.state_dict()
        assert state["consumed"] == 4 * k
    rest = list(it)
    plain = mmpack.Loader(coco_multi, 4, transform=invert)
    plain.load_state_dict(state)
    assert [b["indices"].tolist() for b in plain] == [b["indices"].tolist() for b in rest]


def slow_invert(images):
    time.sleep(0.3)
    return 255 - images


@pytest.mark.parametrize("threads", [1, 2])
def test_close_from_another_thread_ends_a_waiting_iteration(coco_multi, threads):
    # The consumer waits for a slow transform; close() from another thread must wake it with an
    # error (it waited for ever on the queue the stopped thread no longer fills).
    loader = mmpack.Loader(coco_multi, 4, transform=slow_invert, transform_threads=threads)
    it = iter(loader)
    next(it)
    raised = []

    def consume():
        try:
            for _ in it:
                pass
        except RuntimeError as e:
            raised.append(str(e))

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    time.sleep(0.1)
    loader.close()
    consumer.join(timeout=30)
    assert not consumer.is_alive(), "the consumer still waits after close()"
    assert raised and "was stopped: the Loader was closed" in raised[0]


def test_an_old_iterator_is_told_it_was_replaced(coco_multi):
    loader = mmpack.Loader(coco_multi, 4, transform=invert)
    old = iter(loader)
    next(old)
    new = iter(loader)
    assert next(new)["step"] == 0
    with pytest.raises(RuntimeError, match="replaced it"):
        next(old)
