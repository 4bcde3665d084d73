"""Zero-copy batches: a tensor outlives later batches and the loader; no leak over 10,000
batches; the GIL is free while the loader decodes."""

import gc
import os
import signal
import sys
import threading

import numpy as np
import pytest

import mmpack
from h5ref import H5Set


def rss_anon_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise RuntimeError("no RssAnon in /proc/self/status")


@pytest.mark.parametrize("as_torch", [False, True])
def test_a_kept_batch_survives_later_batches_and_the_loader(coco, as_torch):
    ref = H5Set(coco)
    # prefetch 2: the pool reuses freed buffers at once, so a batch handed back too early
    # would be overwritten by the next ones.
    loader = mmpack.Loader(coco, 8, prefetch=2, num_threads=2, as_torch=as_torch)
    it = iter(loader)
    first = next(it)
    images = first["images"]
    tokens = first["tokens"]
    indices = np.array(first["indices"])
    del first  # only the arrays keep the batch now
    copy = np.array(images).copy()
    for epoch in range(1, 4):  # three more epochs through the pool
        loader.set_epoch(epoch)
        for batch in loader:
            batch["images"][:] = 0  # the caller may write into its batches
    loader.close()
    del loader, it
    gc.collect()
    np.testing.assert_array_equal(np.asarray(images), copy)
    for j, i in enumerate(indices):
        np.testing.assert_array_equal(np.asarray(images[j]), ref.image(i))
    assert np.asarray(tokens).shape[0] == 8


def test_no_leak_over_10000_batches(build_set):
    root = build_set("coco_raw")  # 96 px, no zstd: 10,000 batches in a few seconds
    loader = mmpack.Loader(root, 8, drop_last=False, as_torch=True, num_threads=2)
    batches = 0
    epoch = 0
    checkpoints = {}
    while batches < 10000:
        loader.set_epoch(epoch)
        for batch in loader:
            batches += 1
            checksum = int(batch["images"][:, 0, 0, 0].sum()) + len(batch["keys"])
            assert checksum >= 0
            if batches in (1000, 10000):
                gc.collect()
                checkpoints[batches] = rss_anon_kib()
            if batches == 10000:
                break
        epoch += 1
    growth_mib = (checkpoints[10000] - checkpoints[1000]) / 1024
    print("RssAnon at batch 1,000 and 10,000: %d, %d KiB" % (checkpoints[1000], checkpoints[10000]))
    # A leaked batch would be 8 x 27 KiB of pixels, a leaked dict of arrays about 1 KiB: 9,000
    # batches would grow by hundreds of MiB or ~9 MiB. Allocator noise stays well below 4 MiB.
    assert growth_mib < 4, "anonymous RSS grew by %.1f MiB from batch 1,000 to 10,000" % growth_mib


def other_thread_runs_during(call, attempts):
    """True as soon as another Python thread makes progress while one call(i) runs, trying up
    to `attempts` times. With a long switch interval the main thread is never forced to hand
    the GIL over between the two reads of the counter: only a call that releases the GIL lets
    the other thread run. (Whether it gets the CPU in time depends on the load: hence several
    attempts; a call holding the GIL never lets it move.)"""
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    thread = threading.Thread(target=spin)
    thread.start()
    try:
        for i in range(attempts):
            before = count[0]
            call(i)
            if count[0] != before:
                return True
        return False
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


def test_the_gil_is_released_while_waiting_for_a_batch(coco):
    loader = mmpack.Loader(coco, 51, num_threads=1, prefetch=1, shuffle=False)

    def first_batch(i):
        it = iter(loader)  # restarts the epoch: the first batch must be decoded now
        next(it)

    assert other_thread_runs_during(first_batch, 20)


def test_the_gil_is_released_while_a_sample_is_read(build_set):
    # 1024 px: a few ms to decode. (captions() and source() release the GIL too, but their
    # HDF5 reads take tens of microseconds: too short to see another thread run under load.)
    s = mmpack.ShardSet(build_set("skimage_big"))
    assert other_thread_runs_during(lambda i: s.image(i % len(s)), 200)


def test_a_loader_used_in_a_forked_child_raises_at_once_naming_the_fix(coco):
    # A forked child (a DataLoader worker) has none of the Loader's threads: next() there
    # waited for ever, and closing it joined threads that do not exist.
    loader = mmpack.Loader(coco, 4, num_threads=2)
    it = iter(loader)
    first = next(it)["indices"].tolist()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        report = b"no error"
        try:
            signal.alarm(20)  # before the fix: stuck here until the alarm kills the child
            try:
                next(iter(loader))
            except RuntimeError as e:
                report = ("RuntimeError: " + str(e)).encode()
            loader.close()  # leaves the parent's threads alone
            del loader
            gc.collect()
            report += b" | closed"
        except BaseException as e:  # noqa: BLE001  (reported to the parent)
            report = repr(e).encode()
        finally:
            os.write(write, report[:4000])
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        report = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    assert report.startswith("RuntimeError: mmpack.Loader was created in process %d and is "
                             "used in process %d" % (os.getpid(), pid)), report
    assert "num_workers=0" in report and report.endswith(" | closed"), report
    # The parent's loader is untouched: the same epoch again gives the same first batch.
    assert next(iter(loader))["indices"].tolist() == first
