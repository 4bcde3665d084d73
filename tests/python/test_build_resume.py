"""`mmpack build --resume`: a build killed at any moment, SIGKILL included, and
started again with --resume keeps its finished shards, redoes only the rest, and ends with the same
bytes (every shard, index.json, report.json, tokenizer.model) as a build never interrupted.
The input (build_inputs.py): real photos with duplicates and bad samples mixed in, a trained
tokenizer, 3 samples a shard, so the kills land between and inside dozens of shards."""

import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

from build_inputs import MMPACK, VARIANTS, command, digest, make_manifest, start_and_kill
from conftest import run


def checkpoints(out):
    folder = str(out) + ".mmpack-partial/.resume"
    try:
        return sum(n.startswith("checkpoint-") and n.endswith(".json") for n in os.listdir(folder))
    except FileNotFoundError:
        return 0


def resume(args, out):
    r = run(*args, "--resume")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(str(out) + ".mmpack-partial")
    assert not os.path.exists(os.path.join(str(out), ".resume"))
    return r


def kept_shards(stderr):
    for line in stderr.splitlines():
        if "finished shard(s) kept" in line:
            return int(line.split("--resume: ")[1].split()[0])
    raise AssertionError("no resume line in: " + stderr)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("kill_after", [1, 6, 14])
def test_sigkill_after_n_checkpoints_then_resume_gives_the_same_bytes(
        build_manifest, build_reference, tmp_path, variant, kill_after):
    out = tmp_path / "out"
    args = command(build_manifest, out, variant)
    start_and_kill(args, lambda: checkpoints(out) >= kill_after)
    assert os.path.isdir(str(out) + ".mmpack-partial")
    r = resume(args, out)
    assert kept_shards(r.stderr) >= kill_after
    assert digest(out) == build_reference[variant]


def test_sigkill_at_random_moments_then_resume_gives_the_same_bytes(build_manifest, build_reference,
                                                                    tmp_path):
    """Kills at random moments (before the tokenizer, inside a shard, while a checkpoint is
    written), and a resumed build killed again, then resumed to the end."""
    rng = random.Random(13)
    variant = "raw_dedup"
    for trial in range(4):
        out = tmp_path / ("out%d" % trial)
        args = command(build_manifest, out, variant)
        kills = 0
        for _ in range(3):  # killed, resumed and killed, resumed and killed
            if os.path.exists(out):
                break
            delay = rng.uniform(0.05, 0.8)
            t0 = time.monotonic()
            p = subprocess.Popen([str(a) for a in args + ["--resume"]],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while p.poll() is None and time.monotonic() - t0 < delay:
                time.sleep(0.002)
            if p.poll() is None:
                p.kill()
                kills += 1
            p.wait(timeout=60)
        assert kills >= 1  # the first run lasts longer than 0.8 s
        if not os.path.exists(out):
            resume(args, out)
        assert digest(out) == build_reference[variant]


def test_a_damaged_finished_shard_is_built_again(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    args = command(build_manifest, out, "raw_dedup")
    start_and_kill(args, lambda: checkpoints(out) >= 5)
    shard = os.path.join(str(out) + ".mmpack-partial", "shard-000002.h5")
    data = bytearray(open(shard, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(shard, "wb").write(data)
    r = resume(args, out)
    assert "not kept: shard-000002.h5 does not match its checksum" in r.stderr
    assert kept_shards(r.stderr) == 2
    assert digest(out) == build_reference["raw_dedup"]


def test_a_checkpoint_past_the_sample_list_or_not_json_is_not_kept(build_manifest,
                                                                    build_reference, tmp_path):
    out = tmp_path / "out"
    args = command(build_manifest, out, "jpeg")
    start_and_kill(args, lambda: checkpoints(out) >= 4)
    folder = str(out) + ".mmpack-partial/.resume/"
    c2 = json.load(open(folder + "checkpoint-000002.json"))
    c2["next_sample"] = 10**12
    open(folder + "checkpoint-000002.json", "w").write(json.dumps(c2))
    open(folder + "checkpoint-000003.json", "w").write("{not json")
    r = resume(args, out)
    assert "not kept: checkpoint-000002.json does not follow" in r.stderr
    assert kept_shards(r.stderr) == 1
    assert digest(out) == build_reference["jpeg"]


def test_resume_with_other_options_is_refused_and_keeps_the_partial_build(build_manifest, build_reference,
                                                                         tmp_path):
    out = tmp_path / "out"
    args = command(build_manifest, out, "raw_dedup")
    start_and_kill(args, lambda: checkpoints(out) >= 3)
    before = digest(str(out) + ".mmpack-partial")
    r = run(*command(build_manifest, out, "raw_dedup", "--min-size", "10"), "--resume")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--resume" in lines[0] and "other options or input" in lines[0]
    assert digest(str(out) + ".mmpack-partial") == before
    assert not os.path.exists(out)
    resume(args, out)
    assert digest(out) == build_reference["raw_dedup"]


def test_a_build_without_resume_replaces_the_partial_build_and_says_resume_exists(
        build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    args = command(build_manifest, out, "jpeg")
    start_and_kill(args, lambda: checkpoints(out) >= 2)
    r = run(*args)
    assert r.returncode == 0, r.stderr
    assert "left by an interrupted build" in r.stderr and "--resume" in r.stderr
    assert "finished shard(s) kept" not in r.stderr
    assert digest(out) == build_reference["jpeg"]


def test_resume_with_nothing_to_resume_builds_from_the_start(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    r = resume(command(build_manifest, out, "jpeg"), out)
    assert "no interrupted build" in r.stderr
    assert digest(out) == build_reference["jpeg"]


def test_ctrl_c_says_that_resume_continues_the_build(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    args = command(build_manifest, out, "jpeg")
    err = start_and_kill(args, lambda: checkpoints(out) >= 2, sig=signal.SIGINT)
    assert "interrupted" in err and "--resume" in err, err
    assert os.path.isdir(str(out) + ".mmpack-partial")
    resume(args, out)
    assert digest(out) == build_reference["jpeg"]


def test_a_build_that_ignores_ctrl_c_keeps_ignoring_it(build_manifest, build_reference, tmp_path):
    """A build started with SIGINT ignored (a script's background job) is not stopped by it."""
    out = tmp_path / "out"
    p = subprocess.Popen([str(a) for a in command(build_manifest, out, "jpeg")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 120
    while checkpoints(out) < 2 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert digest(out) == build_reference["jpeg"]


def test_resume_refuses_append(build_manifest, tmp_path):
    r = run(*command(build_manifest, tmp_path / "out", "jpeg", "--append", "--resume"))
    assert r.returncode != 0
    assert "--resume" in r.stderr and "--append" in r.stderr


def test_a_resume_that_fails_after_its_tokenizer_keeps_every_finished_shard(
        build_manifest, build_reference, tmp_path):
    """A resume that failed for a transient reason (here: index.json cannot be written, as on a
    full disk) removed the whole staging folder, the shards of the earlier run included (issue
    23 item 7). Now the finished shards stay, and the next --resume goes on from them."""
    out = tmp_path / "out"
    staging = str(out) + ".mmpack-partial"
    args = command(build_manifest, out, "raw_dedup")
    start_and_kill(args, lambda: checkpoints(out) >= 4)
    blocker = os.path.join(staging, "index.json")
    os.makedirs(os.path.join(blocker, "in_the_way"))  # writing index.json fails: EISDIR
    r = run(*args, "--resume")
    assert r.returncode != 0
    line = r.stderr.strip().splitlines()[-1]
    assert "index.json" in line and "finished shard(s)" in line and "--resume" in line, r.stderr
    assert os.path.isdir(staging), "the finished shards were deleted"
    done = checkpoints(out)
    assert done >= 4
    shards = sorted(n for n in os.listdir(staging) if n.endswith(".h5"))
    assert len(shards) == done  # the checkpointed shards, nothing unfinished
    assert not [n for n in os.listdir(staging) if n.endswith(".tmp")]
    shutil.rmtree(blocker)
    r = resume(args, out)
    assert kept_shards(r.stderr) == done
    assert digest(out) == build_reference["raw_dedup"]


def test_an_image_replaced_before_the_resume_is_built_from_its_new_bytes(tmp_path):
    """An image replaced between a killed build and its --resume was kept with its old pixels in
    the finished shards while later shards read the new file: a set that matched neither input.
    Checkpoints name what their shards were made from."""
    root = tmp_path / "input"
    root.mkdir()
    manifest = make_manifest(root)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    args = command(manifest, out, "jpeg")
    start_and_kill(args, lambda: checkpoints(out) >= 8)
    first = json.loads(open(manifest).readline())["image"]  # sample 0: in the first shard
    others = sorted(os.listdir(os.path.dirname(os.path.realpath(first))))
    other = os.path.join(os.path.dirname(os.path.realpath(first)),
                         next(n for n in others if n != os.path.basename(os.path.realpath(first))))
    os.unlink(first)
    os.symlink(other, first)  # another photo under the same name
    r = resume(args, out)
    assert "not kept: an input file of the samples of checkpoint-000001.json changed" in r.stderr
    assert kept_shards(r.stderr) == 0
    r = run(*command(manifest, fresh, "jpeg"))
    assert r.returncode == 0, r.stderr
    assert digest(out) == digest(fresh)


def test_resume_publishes_only_what_the_build_wrote(build_manifest, build_reference, tmp_path):
    """Files found in the staging folder (a user's notes.txt, a folder) were published into OUT,
    which verify accepted and a later --overwrite then refused."""
    out = tmp_path / "out"
    staging = str(out) + ".mmpack-partial"
    args = command(build_manifest, out, "jpeg")
    start_and_kill(args, lambda: checkpoints(out) >= 3)
    with open(os.path.join(staging, "notes.txt"), "w") as f:
        f.write("mine\n")
    os.makedirs(os.path.join(staging, "extra", "sub"))
    r = run(*args, "--resume")
    assert r.returncode == 0, r.stderr
    assert digest(out) == build_reference["jpeg"]  # nothing but the set
    assert "notes.txt" in r.stderr and "not published" in r.stderr
    assert open(os.path.join(staging, "notes.txt")).read() == "mine\n"
    assert os.path.isdir(os.path.join(staging, "extra", "sub"))
    assert sorted(os.listdir(staging)) == ["extra", "notes.txt"]
    assert run(MMPACK, "verify", out).returncode == 0
    # A new build does not delete what it did not write either: it refuses, naming it.
    r = run(*args, "--overwrite")
    assert r.returncode != 0 and "no build wrote" in r.stderr, r.stderr
    assert open(os.path.join(staging, "notes.txt")).read() == "mine\n"
    assert digest(out) == build_reference["jpeg"]
