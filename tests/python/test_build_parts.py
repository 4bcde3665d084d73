"""`mmpack build` in parts: `--part I/N` processes (a Slurm job array),
`mpirun -n N` (Open MPI) and srun's environment each build a share of the input into OUT's
shared staging folder, and the last part to finish writes the set, which must be byte for byte
the set one process builds with the same options, whatever N. The input (build_inputs.py) has
duplicates (--dedup exact drops them across part boundaries) and bad samples in every part, and a
trained tokenizer, which only part 0 trains."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from build_inputs import VARIANTS, command, digest, start_and_kill
from conftest import run

MPIRUN = shutil.which("mpirun")


def part_args(build_manifest, out, variant, index, count, *extra):
    return command(build_manifest, out, variant, "--part", "%d/%d" % (index, count), *extra)


def assert_finished(out):
    assert os.path.isfile(os.path.join(str(out), "index.json"))
    assert not os.path.exists(str(out) + ".mmpack-partial")
    assert not any(n in (".parts", ".resume") for n in os.listdir(str(out)))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("count", [1, 2, 3])
def test_parts_one_after_another_give_the_one_process_bytes(build_manifest, build_reference, tmp_path,
                                                            variant, count):
    out = tmp_path / "out"
    for index in range(count):
        r = run(*part_args(build_manifest, out, variant, index, count))
        assert r.returncode == 0, r.stderr
        if index + 1 < count:
            assert not os.path.exists(out)
            assert "still to finish" in r.stderr
    assert "the last part to finish" in r.stderr
    assert_finished(out)
    assert digest(out) == build_reference[variant]


def test_parts_at_once_in_reverse_order_give_the_one_process_bytes(build_manifest, build_reference,
                                                                   tmp_path):
    """Three parts started together, part 0 last: the others wait for the tokenizer it trains."""
    out = tmp_path / "out"
    procs = []
    for index in [2, 1, 0]:
        procs.append(subprocess.Popen([str(a) for a in part_args(build_manifest, out, "raw_dedup",
                                                                 index, 3)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        if index != 0:
            time.sleep(0.5)
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        errs.append(err)
    assert sum("the last part to finish" in e for e in errs) == 1
    assert any("waiting for part 0 to train the tokenizer" in e for e in errs[:2])
    assert_finished(out)
    assert digest(out) == build_reference["raw_dedup"]


@pytest.mark.skipif(MPIRUN is None, reason="mpirun (openmpi-bin) is not installed")
@pytest.mark.parametrize("count", [1, 2, 3])
def test_mpirun_gives_the_one_process_bytes(build_manifest, build_reference, tmp_path, count):
    out = tmp_path / "out"
    r = run(MPIRUN, "-n", count, "--allow-run-as-root", "--oversubscribe",
            *command(build_manifest, out, "jpeg", "--part", "auto", threads=1))
    assert r.returncode == 0, r.stdout + r.stderr
    if count > 1:
        assert "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE" in r.stderr
    assert_finished(out)
    assert digest(out) == build_reference["jpeg"]


def test_srun_environment_gives_the_one_process_bytes(build_manifest, build_reference, tmp_path):
    """What srun sets in each task (SLURM_PROCID, SLURM_STEP_NUM_TASKS); no Slurm runs here."""
    out = tmp_path / "out"
    procs = []
    for rank in range(2):
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_STEP_NUM_TASKS="2")
        procs.append(subprocess.Popen([str(a) for a in command(build_manifest, out, "raw_dedup",
                                                                 "--part", "auto")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "SLURM_PROCID/SLURM_STEP_NUM_TASKS" in err
    assert digest(out) == build_reference["raw_dedup"]


def test_a_failed_part_fails_the_build_and_resume_redoes_only_it(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    parts = str(out) + ".mmpack-partial/.parts"
    r0 = run(*part_args(build_manifest, out, "jpeg", 0, 2))
    assert r0.returncode == 0, r0.stderr
    os.makedirs(os.path.join(parts, "part-000001-of-000002.spool.tmp"))  # part 1 cannot write
    r1 = run(*part_args(build_manifest, out, "jpeg", 1, 2))
    assert r1.returncode != 0
    assert "part 1 of 2" in r1.stderr and "spool.tmp" in r1.stderr
    assert not os.path.exists(out)
    spool0 = os.path.join(parts, "part-000000-of-000002.spool")
    before = os.stat(spool0).st_mtime_ns
    r0 = run(*part_args(build_manifest, out, "jpeg", 0, 2, "--resume"))
    assert r0.returncode != 0 and "already done" in r0.stderr
    assert os.stat(spool0).st_mtime_ns == before  # not made again
    lines = r0.stderr.strip().splitlines()
    assert "the set is not finished: part 1 of 2 failed" in lines[-1]
    assert "--resume" in lines[-1]
    os.rmdir(os.path.join(parts, "part-000001-of-000002.spool.tmp"))
    r1 = run(*part_args(build_manifest, out, "jpeg", 1, 2, "--resume"))
    assert r1.returncode == 0, r1.stderr
    assert_finished(out)
    assert digest(out) == build_reference["jpeg"]


def test_a_killed_part_is_redone_with_resume(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    r0 = run(*part_args(build_manifest, out, "raw_dedup", 0, 2))
    assert r0.returncode == 0, r0.stderr
    tmp = str(out) + ".mmpack-partial/.parts/part-000001-of-000002.spool.tmp"
    start_and_kill(part_args(build_manifest, out, "raw_dedup", 1, 2),
                   lambda: os.path.exists(tmp) and os.path.getsize(tmp) >= 100000)
    assert not os.path.exists(out)
    r1 = run(*part_args(build_manifest, out, "raw_dedup", 1, 2, "--resume"))
    assert r1.returncode == 0, r1.stderr
    assert digest(out) == build_reference["raw_dedup"]


def test_a_killed_merge_resumes_from_its_checkpoints(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    r0 = run(*part_args(build_manifest, out, "jpeg", 0, 2))
    assert r0.returncode == 0, r0.stderr
    resume = str(out) + ".mmpack-partial/.resume"
    args = part_args(build_manifest, out, "jpeg", 1, 2)
    start_and_kill(args, lambda: os.path.isdir(resume) and
                   sum(n.startswith("checkpoint-") for n in os.listdir(resume)) >= 10)
    r = run(*args, "--resume")
    assert r.returncode == 0, r.stderr
    assert "already done" in r.stderr and "the last part to finish" in r.stderr
    assert digest(out) == build_reference["jpeg"]


def test_a_damaged_spool_is_found_before_use_and_made_again(build_manifest, build_reference, tmp_path):
    """A byte of part 0's spool changed after it was finished (its .done still matches in
    size): the finisher stops at that record, before it reaches a shard, and --resume makes
    part 0 again."""
    out = tmp_path / "out"
    parts = str(out) + ".mmpack-partial/.parts"
    assert run(*part_args(build_manifest, out, "raw_dedup", 0, 2)).returncode == 0
    spool = os.path.join(parts, "part-000000-of-000002.spool")
    data = bytearray(open(spool, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(spool, "wb").write(data)
    r = run(*part_args(build_manifest, out, "raw_dedup", 1, 2))
    assert r.returncode != 0
    assert "part-000000-of-000002.spool" in r.stderr and "checksum" in r.stderr
    assert "run part 0 again with --resume" in r.stderr
    assert not os.path.exists(out)
    r = run(*part_args(build_manifest, out, "raw_dedup", 0, 2, "--resume"))
    assert r.returncode == 0, r.stderr
    assert "already done" not in r.stderr
    assert digest(out) == build_reference["raw_dedup"]


def part_lock(out, index, count):
    return str(out) + ".mmpack-partial/.parts/part-%06d-of-%06d.lock" % (index, count)


def test_a_part_waiting_for_a_part_0_killed_in_its_ingest_fails_naming_it(build_manifest,
                                                                          tmp_path):
    """Part 0 killed before it took any tokenizer lock (during its ingest) used to leave part 1
    waiting for ever; part 0 now claims itself before its ingest."""
    out = tmp_path / "out"
    waiter = subprocess.Popen([str(a) for a in part_args(build_manifest, out, "jpeg", 1, 2)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = subprocess.Popen([str(a) for a in part_args(build_manifest, out, "jpeg", 0, 2)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while (not os.path.exists(part_lock(out, 0, 2)) or os.path.getsize(part_lock(out, 0, 2)) == 0) \
            and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert first.poll() is None, "part 0 ended before the kill"
    pid = first.pid
    first.kill()
    first.wait(timeout=60)
    try:
        _, err = waiter.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        waiter.kill()
        raise AssertionError("part 1 still waits for a dead part 0")
    if os.path.exists(str(out) + ".mmpack-partial/.resume/build.json"):
        pytest.skip("part 0 wrote the tokenizer before the kill landed")
    assert waiter.returncode != 0
    line = err.strip().splitlines()[-1]
    assert "part 0 (pid %d on host %s" % (pid, socket.gethostname()) in line, err
    assert "stopped before it made the tokenizer" in line and "run part 0 again" in line


def test_a_part_0_on_another_host_without_a_heartbeat_is_taken_for_dead(build_manifest, tmp_path):
    """Across hosts no pid can be checked: a part 0 whose lock file was not touched for the
    heartbeat timeout (300 s) is dead. Written as such a host would have left it."""
    out = tmp_path / "out"
    os.makedirs(os.path.dirname(part_lock(out, 0, 2)))
    with open(part_lock(out, 0, 2), "w") as f:
        f.write(json.dumps({"pid": 4242, "host": "node-that-died", "start": int(time.time())}))
    os.utime(part_lock(out, 0, 2), (time.time() - 3600, time.time() - 3600))
    r = run(*part_args(build_manifest, out, "jpeg", 1, 2), timeout=120)
    assert r.returncode != 0
    assert "part 0 (pid 4242 on host node-that-died" in r.stderr, r.stderr
    assert "stopped before it made the tokenizer" in r.stderr


def test_a_part_1_started_before_part_0_waits_for_it(build_manifest, build_reference, tmp_path):
    """A job array may start part 0 after the others, even after an earlier run's part 0 died:
    a dead claim of an earlier run is not this run's part 0, so part 1 waits for the new one."""
    out = tmp_path / "out"
    os.makedirs(os.path.dirname(part_lock(out, 0, 2)))
    with open(part_lock(out, 0, 2), "w") as f:  # an earlier run's part 0, long dead
        f.write(json.dumps({"pid": 2**22 + 17, "host": socket.gethostname(),
                            "start": int(time.time()) - 3600}))
    waiter = subprocess.Popen([str(a) for a in part_args(build_manifest, out, "jpeg", 1, 2)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert waiter.poll() is None, waiter.stderr.read()
    r0 = run(*part_args(build_manifest, out, "jpeg", 0, 2))
    assert r0.returncode == 0, r0.stderr
    _, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err
    assert_finished(out)
    assert digest(out) == build_reference["jpeg"]


def test_the_same_part_twice_at_once_names_the_other_process(build_manifest, tmp_path):
    """Before: the second failed with "rename ... No such file or directory"."""
    out = tmp_path / "out"
    first = subprocess.Popen([str(a) for a in part_args(build_manifest, out, "jpeg", 0, 2)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while (not os.path.exists(part_lock(out, 0, 2)) or os.path.getsize(part_lock(out, 0, 2)) == 0) \
            and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    second = run(*part_args(build_manifest, out, "jpeg", 0, 2))
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert second.returncode != 0
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "part 0 of 2 is being built by pid %d on host %s" % (first.pid, socket.gethostname()) \
        in lines[0]
    assert "No such file" not in lines[0]


def test_an_inherited_launcher_environment_builds_the_whole_set(build_manifest, build_reference,
                                                                tmp_path):
    """A training script started by mpirun/srun that builds its val set on rank 0 used to build
    a quarter of it, exit 0 and leave no OUT: splitting is now asked for
    (--part auto); without it the process builds the whole input and says where it runs."""
    for n, env in enumerate([{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"},
                             {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "4"}]):
        out = tmp_path / ("out%d" % n)
        r = subprocess.run([str(a) for a in command(build_manifest, out, "raw_dedup")],
                           env=dict(os.environ, **env), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "rank 0 of 4; this process builds the whole input (--part auto" in r.stderr
        assert_finished(out)
        assert digest(out) == build_reference["raw_dedup"]
    # The Python module, as such a script calls it.
    import mmpack
    out = tmp_path / "py"
    old = {k: os.environ.get(k) for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")}
    os.environ.update({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"})
    try:
        index = mmpack.build(build_manifest, str(out), vocab_size=300, threads=2, image_size=224,
                             samples_per_shard=3, dedup="exact", compression="zstd")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert index == json.load(open(os.path.join(str(out), "index.json")))
    assert digest(out) == build_reference["raw_dedup"]


def test_python_build_of_one_part_says_which_part_it_built(build_manifest, build_reference,
                                                           tmp_path):
    """mmpack.build(part=...) of a part that another part publishes returns None (it raised a
    bare FileNotFoundError for OUT/index.json); the last part returns the index."""
    import mmpack
    out = tmp_path / "out"
    options = dict(vocab_size=300, threads=2, codec="jpeg", resize_mode="keep-ratio-largest",
                   max_size=256, samples_per_shard=3)
    assert mmpack.build(build_manifest, str(out), part="0/2", **options) is None
    index = mmpack.build(build_manifest, str(out), part="1/2", **options)
    assert index is not None and len(index["shards"]) >= 17
    assert digest(out) == build_reference["jpeg"]


def test_a_stale_failure_of_an_earlier_run_is_ignored(build_manifest, build_reference, tmp_path):
    out = tmp_path / "out"
    parts = str(out) + ".mmpack-partial/.parts"
    os.makedirs(parts)
    stale = os.path.join(parts, "part-000001-of-000002.failed")
    open(stale, "w").write("an earlier run's failure\n")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    r0 = run(*part_args(build_manifest, out, "jpeg", 0, 2))
    assert r0.returncode == 0, r0.stderr
    assert "still to finish" in r0.stderr
    r1 = run(*part_args(build_manifest, out, "jpeg", 1, 2))
    assert r1.returncode == 0, r1.stderr
    assert digest(out) == build_reference["jpeg"]


def test_a_record_size_past_the_spool_end_is_refused_without_allocating(build_manifest, tmp_path):
    out = tmp_path / "out"
    assert run(*part_args(build_manifest, out, "jpeg", 0, 2)).returncode == 0
    spool = str(out) + ".mmpack-partial/.parts/part-000000-of-000002.spool"
    data = bytearray(open(spool, "rb").read())
    data[8:16] = (1 << 38).to_bytes(8, "little")  # the first record's size field
    open(spool, "wb").write(data)
    r = run(*part_args(build_manifest, out, "jpeg", 1, 2))
    assert r.returncode != 0
    assert "runs past its end" in r.stderr and "run part 0 again" in r.stderr


def test_parts_refuse_the_staging_folder_of_another_build(build_manifest, tmp_path):
    out = tmp_path / "out"
    assert run(*part_args(build_manifest, out, "jpeg", 0, 2)).returncode == 0
    r = run(*part_args(build_manifest, out, "jpeg", 1, 2, "--quality", "80"))
    assert r.returncode != 0
    assert "other options or input" in r.stderr and "rm -r" in r.stderr
    assert not os.path.exists(str(out) + ".mmpack-partial/.parts/part-000001-of-000002.failed")


@pytest.mark.parametrize("flag", ["2/2", "1", "a/2", "-1/2", "0/0", " 0/2", "0/+2", "00/02",
                                  "0/2 ", "0x0/2", "auto/2"])
def test_a_malformed_part_is_one_line(build_manifest, tmp_path, flag):
    r = run(*command(build_manifest, tmp_path / "out", "jpeg", "--part", flag))
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1 and "I/N" in r.stderr
    assert not os.path.exists(str(tmp_path / "out") + ".mmpack-partial")


def test_more_parts_than_samples_is_refused_before_anything_is_written(build_manifest,
                                                                        tmp_path):
    """A slip such as --part 0/1000000000 would otherwise scan a billion part files."""
    out = tmp_path / "out"
    r = run(*command(build_manifest, out, "jpeg", "--part", "0/1000000000"))
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "1000000000 parts" in lines[0] and "samples" in lines[0]
    assert not os.path.exists(str(out) + ".mmpack-partial")


def test_part_refuses_append(build_manifest, tmp_path):
    r = run(*command(build_manifest, tmp_path / "out", "jpeg", "--part", "0/2", "--append"))
    assert r.returncode != 0 and "--append" in r.stderr
