"""`mmpack build` in parts (issue 13 item 3): `--part I/N` processes (a Slurm job array),
`mpirun -n N` (Open MPI) and srun's environment each build a share of the input into OUT's
shared staging folder, and the last part to finish writes the set, which must be byte for byte
the set one process builds with the same options, whatever N. The input (build_inputs.py) has
duplicates (--dedup exact drops them across part boundaries) and bad samples in every part, and a
trained tokenizer, which only part 0 trains."""

import os
import shutil
import signal
import subprocess
import time

import pytest

from build_inputs import VARIANTS, command, digest, make_manifest, reference_build, run

MPIRUN = shutil.which("mpirun")


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    return make_manifest(tmp_path_factory.mktemp("parts_input"))


@pytest.fixture(scope="module")
def reference(manifest, tmp_path_factory):
    return {v: reference_build(manifest, tmp_path_factory.mktemp("reference") / v, v)
            for v in VARIANTS}


def part_args(manifest, out, variant, index, count, *extra):
    return command(manifest, out, variant, "--part", "%d/%d" % (index, count), *extra)


def assert_finished(out):
    assert os.path.isfile(os.path.join(str(out), "index.json"))
    assert not os.path.exists(str(out) + ".mmpack-partial")
    assert not any(n in (".parts", ".resume") for n in os.listdir(str(out)))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("count", [1, 2, 3])
def test_parts_one_after_another_give_the_one_process_bytes(manifest, reference, tmp_path,
                                                            variant, count):
    out = tmp_path / "out"
    for index in range(count):
        r = run(part_args(manifest, out, variant, index, count))
        assert r.returncode == 0, r.stderr
        if index + 1 < count:
            assert not os.path.exists(out)
            assert "still to finish" in r.stderr
    assert "the last part to finish" in r.stderr
    assert_finished(out)
    assert digest(out) == reference[variant]


def test_parts_at_once_in_reverse_order_give_the_one_process_bytes(manifest, reference,
                                                                   tmp_path):
    """Three parts started together, part 0 last: the others wait for the tokenizer it trains."""
    out = tmp_path / "out"
    procs = []
    for index in [2, 1, 0]:
        procs.append(subprocess.Popen([str(a) for a in part_args(manifest, out, "raw_dedup",
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
    assert digest(out) == reference["raw_dedup"]


@pytest.mark.skipif(MPIRUN is None, reason="mpirun (openmpi-bin) is not installed")
@pytest.mark.parametrize("count", [1, 2, 3])
def test_mpirun_gives_the_one_process_bytes(manifest, reference, tmp_path, count):
    out = tmp_path / "out"
    r = run([MPIRUN, "-n", count, "--allow-run-as-root", "--oversubscribe"] +
            command(manifest, out, "jpeg", threads=1))
    assert r.returncode == 0, r.stdout + r.stderr
    if count > 1:
        assert "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE" in r.stderr
    assert_finished(out)
    assert digest(out) == reference["jpeg"]


def test_srun_environment_gives_the_one_process_bytes(manifest, reference, tmp_path):
    """What srun sets in each task (SLURM_PROCID, SLURM_STEP_NUM_TASKS); no Slurm runs here."""
    out = tmp_path / "out"
    procs = []
    for rank in range(2):
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_STEP_NUM_TASKS="2")
        procs.append(subprocess.Popen([str(a) for a in command(manifest, out, "raw_dedup")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "SLURM_PROCID/SLURM_STEP_NUM_TASKS" in err
    assert digest(out) == reference["raw_dedup"]


def test_a_failed_part_fails_the_build_and_resume_redoes_only_it(manifest, reference, tmp_path):
    out = tmp_path / "out"
    parts = str(out) + ".mmpack-partial/.parts"
    r0 = run(part_args(manifest, out, "jpeg", 0, 2))
    assert r0.returncode == 0, r0.stderr
    os.makedirs(os.path.join(parts, "part-000001-of-000002.spool.tmp"))  # part 1 cannot write
    r1 = run(part_args(manifest, out, "jpeg", 1, 2))
    assert r1.returncode != 0
    assert "part 1 of 2" in r1.stderr and "spool.tmp" in r1.stderr
    assert not os.path.exists(out)
    spool0 = os.path.join(parts, "part-000000-of-000002.spool")
    before = os.stat(spool0).st_mtime_ns
    r0 = run(part_args(manifest, out, "jpeg", 0, 2, "--resume"))
    assert r0.returncode != 0 and "already done" in r0.stderr
    assert os.stat(spool0).st_mtime_ns == before  # not made again
    lines = r0.stderr.strip().splitlines()
    assert "the set is not finished: part 1 of 2 failed" in lines[-1]
    assert "--resume" in lines[-1]
    os.rmdir(os.path.join(parts, "part-000001-of-000002.spool.tmp"))
    r1 = run(part_args(manifest, out, "jpeg", 1, 2, "--resume"))
    assert r1.returncode == 0, r1.stderr
    assert_finished(out)
    assert digest(out) == reference["jpeg"]


def test_a_killed_part_is_redone_with_resume(manifest, reference, tmp_path):
    out = tmp_path / "out"
    r0 = run(part_args(manifest, out, "raw_dedup", 0, 2))
    assert r0.returncode == 0, r0.stderr
    tmp = str(out) + ".mmpack-partial/.parts/part-000001-of-000002.spool.tmp"
    p = subprocess.Popen([str(a) for a in part_args(manifest, out, "raw_dedup", 1, 2)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline and (
            not os.path.exists(tmp) or os.path.getsize(tmp) < 100000):
        time.sleep(0.001)
    assert p.poll() is None, "part 1 ended before the kill"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert not os.path.exists(out)
    r1 = run(part_args(manifest, out, "raw_dedup", 1, 2, "--resume"))
    assert r1.returncode == 0, r1.stderr
    assert digest(out) == reference["raw_dedup"]


def test_a_killed_merge_resumes_from_its_checkpoints(manifest, reference, tmp_path):
    out = tmp_path / "out"
    r0 = run(part_args(manifest, out, "jpeg", 0, 2))
    assert r0.returncode == 0, r0.stderr
    resume = str(out) + ".mmpack-partial/.resume"
    args = part_args(manifest, out, "jpeg", 1, 2)
    p = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline and not (
            os.path.isdir(resume) and
            sum(n.startswith("checkpoint-") for n in os.listdir(resume)) >= 10):
        time.sleep(0.001)
    assert p.poll() is None, "the merge ended before the kill"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    r = run(args + ["--resume"])
    assert r.returncode == 0, r.stderr
    assert "already done" in r.stderr and "the last part to finish" in r.stderr
    assert digest(out) == reference["jpeg"]


def test_a_damaged_spool_is_found_before_use_and_made_again(manifest, reference, tmp_path):
    """A byte of part 0's spool changed after it was finished (its .done still matches in
    size): the finisher stops at that record, before it reaches a shard, and --resume makes
    part 0 again."""
    out = tmp_path / "out"
    parts = str(out) + ".mmpack-partial/.parts"
    assert run(part_args(manifest, out, "raw_dedup", 0, 2)).returncode == 0
    spool = os.path.join(parts, "part-000000-of-000002.spool")
    data = bytearray(open(spool, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(spool, "wb").write(data)
    r = run(part_args(manifest, out, "raw_dedup", 1, 2))
    assert r.returncode != 0
    assert "part-000000-of-000002.spool" in r.stderr and "checksum" in r.stderr
    assert "run part 0 again with --resume" in r.stderr
    assert not os.path.exists(out)
    r = run(part_args(manifest, out, "raw_dedup", 0, 2, "--resume"))
    assert r.returncode == 0, r.stderr
    assert "already done" not in r.stderr
    assert digest(out) == reference["raw_dedup"]


def test_parts_refuse_the_staging_folder_of_another_build(manifest, tmp_path):
    out = tmp_path / "out"
    assert run(part_args(manifest, out, "jpeg", 0, 2)).returncode == 0
    r = run(part_args(manifest, out, "jpeg", 1, 2, "--quality", "80"))
    assert r.returncode != 0
    assert "other options or input" in r.stderr and "rm -r" in r.stderr


@pytest.mark.parametrize("flag", ["2/2", "1", "a/2", "-1/2", "0/0"])
def test_a_malformed_part_is_one_line(manifest, tmp_path, flag):
    r = run(command(manifest, tmp_path / "out", "jpeg", "--part", flag))
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1 and "I/N" in r.stderr
    assert not os.path.exists(str(tmp_path / "out") + ".mmpack-partial")


def test_part_refuses_append(manifest, tmp_path):
    r = run(command(manifest, tmp_path / "out", "jpeg", "--part", "0/2", "--append"))
    assert r.returncode != 0 and "--append" in r.stderr
