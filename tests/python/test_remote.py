"""mmpack.ShardSet and mmpack.Loader on remote sets: a real s3rver on 127.0.0.1 (installed into
the build tree by ctest's fixture remote_servers; MM_NODE_DIR), the set published there by the
real `mmpack upload`, every sample compared with the same set read locally."""
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import mmpack

NODE_DIR = os.environ.get("MM_NODE_DIR", "")
S3RVER = os.path.join(NODE_DIR, "node_modules", "s3rver", "bin", "s3rver.js")
NODE = shutil.which("node") or ""
URL = "s3://bkt/sets/coco"

pytestmark = pytest.mark.skipif(not NODE, reason="node is not installed: s3rver needs it "
                                "(tools/install-deps.sh installs nodejs)")


@pytest.fixture(scope="module")
def s3(tmp_path_factory, coco_multi):
    """s3rver on a kernel-chosen port of 127.0.0.1, holding coco_multi at URL; AWS_* set."""
    if not os.path.exists(S3RVER):
        pytest.fail(S3RVER + " is missing: ctest's fixture remote_servers_setup installs it")
    tmp = tmp_path_factory.mktemp("s3")
    log = tmp / "s3rver.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([NODE, S3RVER, "-d", str(tmp / "data"), "-a", "127.0.0.1",
                                 "-p", "0", "--silent", "--configure-bucket", "bkt"],
                                stdout=out, stderr=subprocess.STDOUT)
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
                                            "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    try:
        deadline, port = time.time() + 30, None
        while port is None and time.time() < deadline and proc.poll() is None:
            m = re.search(r"listening on 127\.0\.0\.1:([0-9]+)", log.read_text(errors="replace"))
            port = int(m.group(1)) if m else time.sleep(0.05)
        assert port, "s3rver did not start: " + log.read_text(errors="replace")
        os.environ.update({"AWS_ENDPOINT_URL": "http://127.0.0.1:%d" % port,
                           "AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                           "AWS_REGION": "us-east-1"})
        up = subprocess.run([os.environ["MMPACK_BIN"], "upload", "-q", coco_multi, URL],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        assert up.returncode == 0, up.stderr.decode()
        yield coco_multi
    finally:
        proc.terminate()
        proc.wait(10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def shard_bytes(local):
    return max(s["bytes"] for s in mmpack.ShardSet(local).info["shards"])


def test_shard_set_reads_every_sample_of_s3_as_local(s3, tmp_path):
    local = mmpack.ShardSet(s3)
    remote = mmpack.ShardSet(URL, cache_dir=tmp_path / "cache")
    assert remote.remote and not local.remote
    assert remote.root == URL
    assert len(remote) == len(local) and remote.image_shape == local.image_shape
    assert remote.info["shards"] == local.info["shards"]
    for i in range(len(local)):
        a, b = remote[i], local[i]
        assert a["key"] == b["key"] and a["captions"] == b["captions"]
        assert a["source"] == b["source"]
        np.testing.assert_array_equal(a["image"], b["image"])
        assert [t.tolist() for t in a["tokens"]] == [t.tolist() for t in b["tokens"]]
    assert remote.key(-1) == local.key(-1)
    again = pickle.loads(pickle.dumps(remote))
    assert again.root == URL and again.key(5) == local.key(5)


def test_a_cache_of_one_shard_still_reads_every_sample(s3, tmp_path):
    # The kept pin is let go before the next shard is pinned: one shard's room is enough.
    limit = shard_bytes(s3) + shard_bytes(s3) // 4
    remote = mmpack.ShardSet(URL, cache_dir=tmp_path / "cache", cache_limit=limit)
    local = mmpack.ShardSet(s3)
    order = list(range(len(local)))[::-1]  # backwards: every shard is evicted and fetched
    for i in order:
        np.testing.assert_array_equal(remote.image(i), local.image(i))
        assert remote.captions(i) == local.captions(i)
    cached = sum(f.stat().st_size for f in (tmp_path / "cache").rglob("*.h5"))
    assert cached <= limit


def test_loader_on_a_url_gives_the_local_batches(s3, tmp_path):
    opts = dict(batch_size=8, seed=3, shuffle_mode="global", rank=0, world_size=1)
    remote = mmpack.Loader(URL, cache_dir=tmp_path / "cache", **opts)
    local = mmpack.Loader(s3, **opts)
    assert remote.notice == ""
    pairs = list(zip(remote, local))
    assert len(pairs) == len(local) > 0
    for a, b in pairs:
        np.testing.assert_array_equal(a["indices"], b["indices"])
        np.testing.assert_array_equal(a["images"], b["images"])


def test_small_cache_limit_makes_auto_the_block_shuffle_and_says_so(s3, tmp_path, capfd):
    limit = 2 * shard_bytes(s3) + shard_bytes(s3) // 2  # two shards, not the set
    loader = mmpack.Loader(URL, batch_size=4, seed=1, rank=0, world_size=1, drop_last=False,
                           cache_dir=tmp_path / "cache", cache_limit=limit)
    # Besides the once-per-process line naming the S3 credentials' source.
    err = [l for l in capfd.readouterr().err.strip().splitlines()
           if not l.startswith("mmpack: S3 credentials: ")]
    assert len(err) == 1 and "block shuffle" in err[0], err
    assert "block shuffle" in loader.notice
    seen = np.concatenate([b["indices"] for b in loader])
    assert sorted(set(seen.tolist())) == list(range(len(mmpack.ShardSet(s3))))
    with pytest.raises((ValueError, OSError), match="cache limit"):
        mmpack.Loader(URL, batch_size=4, shuffle_mode="global", rank=0, world_size=1,
                      cache_dir=tmp_path / "cache", cache_limit=limit)
    block = mmpack.Loader(URL, batch_size=4, shuffle_mode="block", shuffle_window=1, rank=0,
                          world_size=1, cache_dir=tmp_path / "cache", cache_limit=limit)
    assert block.notice == "" and len(block) > 0


def test_cache_limit_takes_a_size_with_a_unit(s3, tmp_path, capfd):
    small = "%dkB" % ((2 * shard_bytes(s3) + shard_bytes(s3) // 2) // 1000)  # 2.5 shards
    loader = mmpack.Loader(URL, batch_size=4, rank=0, world_size=1,
                           cache_dir=tmp_path / "cache", cache_limit=small)
    assert "block shuffle" in loader.notice
    large = mmpack.Loader(URL, batch_size=4, rank=0, world_size=1,
                          cache_dir=tmp_path / "cache", cache_limit="1TiB")
    assert large.notice == ""
    with pytest.raises(ValueError, match="'20XB' is not a byte size"):
        mmpack.ShardSet(URL, cache_dir=tmp_path / "cache", cache_limit="20XB")
    capfd.readouterr()


def test_a_missing_remote_set_is_file_not_found_naming_the_url(s3, tmp_path):
    with pytest.raises(FileNotFoundError, match="/bkt/nothing/index.json"):
        mmpack.ShardSet("s3://bkt/nothing", cache_dir=tmp_path / "cache")


def test_forked_children_read_a_remote_set_on_connections_of_their_own(s3, tmp_path):
    # As DataLoader workers (fork) do with a remote ShardSet of the parent: each child used the
    # parent's libcurl connection, and both read each other's responses ("Received HTTP/0.9",
    # XXH3-64 mismatches, the parent's next request failing too).
    remote = mmpack.ShardSet(URL, cache_dir=tmp_path / "cache")
    local = mmpack.ShardSet(s3)
    text = remote._set.index_text()
    remote.image(0)  # shard 0 downloaded: the parent's connection is open (keep-alive)
    firsts = [i for i in range(len(local)) if local.locate(i).endswith(" sample 0")][1:]
    assert firsts, "the set needs several shards"
    pids = []
    for first in firsts:  # one child per other shard, each downloading it
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                signal.alarm(120)
                code = 0 if np.array_equal(remote.image(first), local.image(first)) else 2
            finally:
                os._exit(code)
        pids.append(pid)
    parent = [remote._set.index_text() == text for _ in range(60)]  # meanwhile, in the parent
    codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
    assert all(parent) and codes == [0] * len(firsts)
    for i in range(0, len(local), 7):
        np.testing.assert_array_equal(remote.image(i), local.image(i))


_SHARER = """
import sys
sys.path.insert(0, sys.argv[1])
import mmpack
url, cache, limit, seed = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
loader = mmpack.Loader(url, batch_size=4, seed=seed, shuffle_mode="block", rank=0, world_size=1,
                       drop_last=False, cache_dir=cache, cache_limit=limit, num_threads=1)
items = 0
for epoch in range(3):
    loader.set_epoch(epoch)
    items += sum(len(b["indices"]) for b in loader)
print(items)
"""


def test_two_loaders_sharing_a_limited_cache_both_finish(s3, tmp_path):
    # The ranks of a node: one cache, one limit, each loader's windows sized for the whole
    # limit. Each pinned part of what it needed and waited 600 s for the rest (then one failed
    # and the other crawled); now the younger waiter's process gives its idle pins back.
    from conftest import ALBERT, DATA_DIR, PYTHON_DIR
    local, url = str(tmp_path / "small"), "s3://bkt/sets/small"  # 13 shards of 4 samples
    mmpack.build(os.path.join(DATA_DIR, "coco-cc", "captions.jsonl"), local, tokenizer=ALBERT,
                 lowercase=True, threads=2, samples_per_shard=4, image_size=64)
    up = subprocess.run([os.environ["MMPACK_BIN"], "upload", "-q", local, url],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert up.returncode == 0, up.stderr.decode()
    limit = 3 * shard_bytes(local) + shard_bytes(local) // 2  # the set holds 13
    cache = str(tmp_path / "cache")
    procs = [subprocess.Popen([sys.executable, "-c", _SHARER, PYTHON_DIR, url, cache, str(limit),
                               str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for seed in (1, 2)]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    n = len(mmpack.ShardSet(local))
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
        assert int(out) == 3 * (-(-n // 4) * 4)  # three epochs, the last batch padded
    cached = sum(f.stat().st_size for f in (tmp_path / "cache").rglob("*.h5"))
    assert cached <= limit
