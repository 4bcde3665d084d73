#!/usr/bin/python3
"""End-to-end: `mmpack info|verify|show|bench|upload`, `mmpack build` of a tar and a manifest in a
bucket, and `mmtrain --shards` on remote sets, served by
real servers on 127.0.0.1 only: s3rver (S3; installed into the build tree by the ctest fixture
remote_servers_setup) and tests/remote/http_server.py (plain HTTP).

s3rver checks the access key id and wants x-amz-content-sha256, but does NOT verify Signature
V4 signatures (any secret is accepted): signing is checked by mm_reader_test
(RemoteSet.SignatureV4IsVerifiedByASigningServer and the AWS test vector). Uploads here go
through curl's own SigV4 signer (`curl --aws-sigv4`).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

SOURCE_DIR = os.environ.get("MM_SOURCE_DIR", "")
NODE_DIR = os.environ.get("MM_NODE_DIR", "")
MMTRAIN = os.path.join(u.BIN_DIR, "mmtrain")
S3RVER = os.path.join(NODE_DIR, "node_modules", "s3rver", "bin", "s3rver.js")
NODE = next((p for p in ("/usr/bin/node", "/usr/local/bin/node") if os.access(p, os.X_OK)), "")


class Server:
    """A server process started by the test, its port read from its log (bounded wait)."""

    def __init__(self, argv, log, pattern):
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(log, "r", errors="replace") as f:
                m = re.search(pattern, f.read(), re.M)
            if m:
                self.port = int(m.group(1))
                self.url = "http://127.0.0.1:%d" % self.port
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError("%s did not start; log:\n%s" % (argv[1], open(log).read()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def s3_env(endpoint, key="S3RVER", secret="S3RVER"):
    env = dict(os.environ)
    env.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"})
    env.pop("AWS_SESSION_TOKEN", None)
    return env


def run(argv, env=None, timeout=u.TIMEOUT_S):
    proc = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=timeout)
    return u.Run([str(a) for a in argv[1:]], proc)


def s3_put(endpoint, bucket, key, path):
    """PUTs a file with curl's SigV4 signer (path style), as any S3 client would."""
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    r = run(["curl", "-sS", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
             "-H", "x-amz-content-sha256: " + sha, "-T", path,
             "%s/%s/%s" % (endpoint, bucket, key)])
    if r.rc != 0:
        raise AssertionError("upload of %s failed: %s" % (key, r))


def upload_set(endpoint, bucket, prefix, local):
    """Shards and the tokenizer first, index.json last (a reader never sees half a set)."""
    names = sorted(n for n in os.listdir(local) if n != "index.json")
    for name in names + ["index.json"]:
        s3_put(endpoint, bucket, prefix + "/" + name, os.path.join(local, name))


@unittest.skipIf(not NODE, "node is not installed: the S3 tests need it to run s3rver "
                 "(tools/install-deps.sh installs nodejs)")
class RemoteCliTest(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.path.exists(S3RVER):
            raise AssertionError(S3RVER + " is missing: ctest's fixture remote_servers_setup "
                                 "installs it (see its output)")
        cls.local = os.path.join(cls.tmp, "coco")
        u.build(os.path.join(u.DATA_DIR, "coco-cc", "captions.jsonl"), cls.local,
                "--samples-per-shard", "12", "--image-size", "64")
        cls.s3 = Server([NODE, S3RVER, "-d", os.path.join(cls.tmp, "s3"), "-a", "127.0.0.1",
                         "-p", "0", "--silent", "--configure-bucket", "bkt",
                         "--configure-bucket", "other"],
                        os.path.join(cls.tmp, "s3.log"), r"listening on 127\.0\.0\.1:([0-9]+)")
        cls.addClassCleanup(cls.s3.stop)
        upload_set(cls.s3.url, "bkt", "sets/coco", cls.local)
        cls.env = s3_env(cls.s3.url)
        cls.index = json.load(open(os.path.join(cls.local, "index.json")))

    def cache(self, name):
        return ["--cache-dir", os.path.join(self.tmp, "cache-" + name)]

    def test_info_and_verify_read_s3_as_local(self):
        local = u.mmpack("info", self.local)
        remote = run([u.MMPACK, "info", "s3://bkt/sets/coco"] + self.cache("info"), self.env)
        self.assertEqual(remote.rc, 0, str(remote))
        strip = lambda text: text.split("\n", 1)[1]  # the first line names the set
        self.assertEqual(strip(remote.stdout), strip(local.stdout))
        self.assertIn("s3://bkt/sets/coco", remote.stdout.split("\n", 1)[0])
        v = run([u.MMPACK, "verify", "s3://bkt/sets/coco"] + self.cache("verify"), self.env)
        self.assertEqual(v.rc, 0, str(v))
        self.assertIn("verify: OK: %d shards" % len(self.index["shards"]), v.stdout)

    def test_dot_segments_never_reach_another_bucket(self):
        # Bucket "other" holds a set; "bkt/x/../../other/victim" must not name it (libcurl
        # resolved the dots away: upload deleted and replaced it, info read it).
        victim = "s3://other/victim"
        put = run([u.MMPACK, "upload", "-q", self.local, victim], self.env)
        self.assertEqual(put.rc, 0, str(put))
        before = run([u.MMPACK, "info", victim] + self.cache("dots"), self.env)
        self.assertEqual(before.rc, 0, str(before))
        small = os.path.join(self.tmp, "small-for-dots")
        u.build(os.path.join(u.DATA_DIR, "coco-cc", "captions.jsonl"), small,
                "--samples-per-shard", "12", "--image-size", "32")
        for url in ("s3://bkt/x/../../other/victim", "s3://bkt/../other/victim",
                    "s3://bkt/./../other/victim"):
            up = run([u.MMPACK, "upload", "-q", small, url], self.env)
            self.assertNotEqual(up.rc, 0, str(up))
            self.assertEqual(len(up.stderr.strip().splitlines()), 1, up.stderr)
            self.assertIn("path segment", up.stderr)
            for command in ("info", "verify"):
                r = run([u.MMPACK, command, url] + self.cache("dots"), self.env)
                self.assertNotEqual(r.rc, 0, str(r))
                self.assertIn("path segment", r.stderr)
        after = run([u.MMPACK, "info", victim] + self.cache("dots2"), self.env)
        self.assertEqual(after.rc, 0, str(after))
        self.assertEqual(after.stdout, before.stdout)

    def test_show_reads_one_sample_from_s3_like_local(self):
        want = u.mmpack("show", self.local, 30, "-o", os.path.join(self.tmp, "l.png"))
        got = run([u.MMPACK, "show", "s3://bkt/sets/coco", 30, "-o",
                   os.path.join(self.tmp, "r.png")] + self.cache("show"), self.env)
        self.assertEqual(got.rc, 0, str(got))
        lines = lambda r: [l for l in r.stdout.splitlines() if not l.startswith(("sample", "image"))]
        self.assertEqual(lines(got), lines(want))
        self.assertEqual(open(os.path.join(self.tmp, "r.png"), "rb").read(),
                         open(os.path.join(self.tmp, "l.png"), "rb").read())
        # Only the sample's shard came down.
        cached = [f for _, _, fs in os.walk(os.path.join(self.tmp, "cache-show"))
                  for f in fs if f.endswith(".h5")]
        self.assertEqual(len(cached), 1, cached)

    def test_bench_with_a_small_cache_switches_to_block_shuffle(self):
        shard = max(s["bytes"] for s in self.index["shards"])
        limit = 2 * shard + shard // 2  # two shards, never the whole set
        b = run([u.MMPACK, "bench", "s3://bkt/sets/coco", "--seconds", "1", "--json", "--batch-size", 4,
                 "--cache-limit", limit] + self.cache("bench"), self.env)
        self.assertEqual(b.rc, 0, str(b))
        self.assertIn("block shuffle", b.stderr)
        figures = json.loads(b.stdout)
        self.assertGreater(figures["samples"], 0)
        self.assertLessEqual(figures["cache_peak_bytes"], limit)
        g = run([u.MMPACK, "bench", "s3://bkt/sets/coco", "--seconds", "1", "--shuffle", "global",
                 "--cache-limit", limit] + self.cache("bench"), self.env)
        self.assertNotEqual(g.rc, 0, str(g))
        self.assertIn("cache limit", g.stderr)

    def test_wrong_key_and_missing_set_fail_in_one_line_naming_the_url(self):
        bad = run([u.MMPACK, "info", "s3://bkt/sets/coco"] + self.cache("bad"),
                  s3_env(self.s3.url, key="NOBODY"))
        self.assertNotEqual(bad.rc, 0)
        # One error line, after the one line that says where the keys came from.
        lines = bad.stderr.strip().splitlines()
        self.assertEqual(lines[0], "mmpack: S3 credentials: environment (AWS_ACCESS_KEY_ID)")
        self.assertEqual(len(lines), 2, bad.stderr)
        self.assertIn("/bkt/sets/coco/index.json", bad.stderr)
        self.assertIn("InvalidAccessKeyId", bad.stderr)
        missing = run([u.MMPACK, "verify", "s3://bkt/nothing"] + self.cache("bad"), self.env)
        self.assertNotEqual(missing.rc, 0)
        self.assertIn("NotFound", missing.stderr)
        self.assertIn("/bkt/nothing/index.json", missing.stderr)

    def test_verify_names_a_corrupted_remote_shard(self):
        # A copy of the set whose second shard differs in one byte from what index.json says.
        bad = os.path.join(self.tmp, "bad")
        u.subprocess.run(["cp", "-r", self.local, bad], check=True)
        path = os.path.join(bad, self.index["shards"][1]["file"])
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(path, "wb").write(bytes(data))
        upload_set(self.s3.url, "bkt", "sets/bad", bad)
        v = run([u.MMPACK, "verify", "s3://bkt/sets/bad"] + self.cache("corrupt"), self.env)
        self.assertNotEqual(v.rc, 0, str(v))
        self.assertIn("Corruption", v.stderr)
        self.assertIn("s3://bkt/sets/bad/" + self.index["shards"][1]["file"], v.stderr)

    def test_http_set_reads_and_verifies(self):
        www = os.path.join(self.tmp, "www")
        os.makedirs(www, exist_ok=True)
        u.subprocess.run(["cp", "-r", self.local, os.path.join(www, "coco")], check=True)
        http = Server(["/usr/bin/python3", os.path.join(SOURCE_DIR, "tests/remote/http_server.py"),
                       "--root", www], os.path.join(self.tmp, "http.log"), r"^([0-9]+)$")
        self.addCleanup(http.stop)
        v = run([u.MMPACK, "verify", http.url + "/coco"] + self.cache("http"))
        self.assertEqual(v.rc, 0, str(v))
        s = run([u.MMPACK, "show", http.url + "/coco/", 3, "-o", os.path.join(self.tmp, "h.png")]
                + self.cache("http"))
        self.assertEqual(s.rc, 0, str(s))

    def http_server(self, root, *args):
        log = os.path.join(self.tmp, "http-%d.log" % len(os.listdir(self.tmp)))
        requests = log + ".requests"
        server = Server(["/usr/bin/python3", os.path.join(SOURCE_DIR, "tests/remote/http_server.py"),
                         "--root", root, "--log", requests] + list(args), log, r"^([0-9]+)$")
        self.addCleanup(server.stop)
        server.requests = requests
        return server

    def test_upload_publishes_to_s3_a_set_that_verifies_and_reads_as_local(self):
        up = run([u.MMPACK, "upload", self.local, "s3://bkt/up/coco"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        files = len(self.index["shards"]) + 3  # shards, tokenizer.model, report.json, index.json
        self.assertIn("upload: OK: %d files" % files, up.stdout)
        v = run([u.MMPACK, "verify", "s3://bkt/up/coco"] + self.cache("up"), self.env)
        self.assertEqual(v.rc, 0, str(v))
        self.assertIn("verify: OK: %d shards" % len(self.index["shards"]), v.stdout)
        want = u.mmpack("show", self.local, 17, "-o", os.path.join(self.tmp, "ul.png"))
        got = run([u.MMPACK, "show", "s3://bkt/up/coco", 17, "-o",
                   os.path.join(self.tmp, "ur.png")] + self.cache("up"), self.env)
        self.assertEqual(got.rc, 0, str(got))
        self.assertEqual(open(os.path.join(self.tmp, "ur.png"), "rb").read(),
                         open(os.path.join(self.tmp, "ul.png"), "rb").read())

    def test_upload_puts_index_json_last_and_retries_a_5xx(self):
        www = os.path.join(self.tmp, "www-order")
        second = self.index["shards"][1]["file"]
        http = self.http_server(www, "--fail", "PUT */" + second + ":503:2")
        up = run([u.MMPACK, "upload", "-q", self.local, http.url + "/b/set"])
        self.assertEqual(up.rc, 0, str(up))
        puts = [l.split()[1] for l in open(http.requests) if l.startswith("PUT ")]
        self.assertEqual(puts[-1], "/b/set/index.json", puts)
        self.assertEqual(puts.count("/b/set/" + second), 3, puts)  # two 503s, then stored
        for name in os.listdir(self.local):
            self.assertEqual(open(os.path.join(www, "b", "set", name), "rb").read(),
                             open(os.path.join(self.local, name), "rb").read(), name)

    def test_upload_puts_transfers_files_at_a_time_and_index_json_after_them(self):
        for transfers in (1, 4):
            www = os.path.join(self.tmp, "www-transfers-%d" % transfers)
            peak = os.path.join(self.tmp, "put-peak-%d" % transfers)
            http = self.http_server(www, "--put-delay", "0.5", "--put-peak", peak)
            up = run([u.MMPACK, "upload", "-q", "--transfers", str(transfers), self.local,
                      http.url + "/b/set"])
            self.assertEqual(up.rc, 0, str(up))
            # Each PUT is held 0.5 s by the server, so PUTs sent together are seen together
            # (at least two of four even when a thread starts late on a loaded machine).
            seen = int(open(peak).read())
            self.assertTrue(min(2, transfers) <= seen <= transfers, (transfers, seen))
            puts = [l.split()[1] for l in open(http.requests) if l.startswith("PUT ")]
            self.assertEqual(puts[-1], "/b/set/index.json", puts)
            self.assertEqual(sorted(puts), sorted("/b/set/" + n for n in os.listdir(self.local)))
        bad = run([u.MMPACK, "upload", "--transfers", "0", self.local, http.url + "/b/set"])
        self.assertNotEqual(bad.rc, 0, str(bad))  # CLI11's usage error
        self.assertIn("--transfers", bad.stderr)

    def test_upload_failing_midway_keeps_the_previous_index_json(self):
        www = os.path.join(self.tmp, "www-fail")
        dest = os.path.join(www, "b", "set")
        ok = self.http_server(www)
        first = run([u.MMPACK, "upload", "-q", self.local, ok.url + "/b/set"])
        self.assertEqual(first.rc, 0, str(first))
        before = open(os.path.join(dest, "index.json"), "rb").read()
        ok.stop()
        # The same destination from a server that lost the objects' metadata (so every file is
        # sent again); the third shard's PUT always fails: index.json is neither deleted nor
        # replaced (a reader finds the previous set), and the error names the PUT.
        third = self.index["shards"][2]["file"]
        bad = self.http_server(www, "--fail", "PUT */" + third + ":503:always")
        up = run([u.MMPACK, "upload", "--transfers", "1", self.local, bad.url + "/b/set"])
        self.assertNotEqual(up.rc, 0, str(up))
        self.assertEqual(len(up.stderr.strip().splitlines()), 1, up.stderr)
        self.assertIn("PUT %s/b/set/%s" % (bad.url, third), up.stderr)
        self.assertIn("503", up.stderr)
        self.assertEqual(open(os.path.join(dest, "index.json"), "rb").read(), before)
        requests = [l.split()[:2] for l in open(bad.requests)]
        self.assertNotIn(["PUT", "/b/set/index.json"], requests)
        self.assertNotIn("DELETE", [r[0] for r in requests])

    def test_upload_refuses_a_set_that_does_not_verify(self):
        broken = os.path.join(self.tmp, "broken")
        u.subprocess.run(["cp", "-r", self.local, broken], check=True)
        path = os.path.join(broken, self.index["shards"][0]["file"])
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(path, "wb").write(bytes(data))
        up = run([u.MMPACK, "upload", broken, "s3://bkt/up/broken"], self.env)
        self.assertNotEqual(up.rc, 0, str(up))
        self.assertIn("not uploaded", up.stderr)
        self.assertEqual(len(up.stderr.strip().splitlines()), 1, up.stderr)
        missing = run([u.MMPACK, "info", "s3://bkt/up/broken"] + self.cache("broken"), self.env)
        self.assertNotEqual(missing.rc, 0)
        self.assertIn("NotFound", missing.stderr)

    def test_build_reads_a_tar_and_a_manifest_from_s3rver_as_from_local_disk(self):
        # 17 of coco-cc's photos as a WebDataset tar (key.jpg, key.txt) and as a JSONL manifest
        # beside its images, put on s3rver; each remote build gives the local build's shards.
        src = os.path.join(u.DATA_DIR, "coco-cc")
        first = {}
        with open(os.path.join(src, "captions.jsonl"), encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                first.setdefault(row["image"], row["text"])
        images = sorted(first)[:17]
        local = os.path.join(self.tmp, "build-in")
        os.makedirs(os.path.join(local, "images"))
        tar_path = os.path.join(local, "00000.tar")
        with tarfile.open(tar_path, "w") as tar, \
                open(os.path.join(local, "captions.jsonl"), "w", encoding="utf-8") as manifest:
            for i, image in enumerate(images):
                key = "%09d" % i
                tar.add(os.path.join(src, image), arcname=key + ".jpg")
                text = os.path.join(local, key + ".txt")
                with open(text, "w", encoding="utf-8") as f:
                    f.write(first[image])
                tar.add(text, arcname=key + ".txt")
                name = "images/" + os.path.basename(image)
                shutil.copyfile(os.path.join(src, image), os.path.join(local, name))
                s3_put(self.s3.url, "bkt", "in/m/" + name, os.path.join(local, name))
                manifest.write(json.dumps({"image": name, "text": first[image]}) + "\n")
        s3_put(self.s3.url, "bkt", "in/00000.tar", tar_path)
        s3_put(self.s3.url, "bkt", "in/m/captions.jsonl", os.path.join(local, "captions.jsonl"))
        options = ["--image-size", "64", "--samples-per-shard", "8"]
        for name, local_input, url in (
                ("tar", tar_path, "s3://bkt/in/00000.tar"),
                ("jsonl", os.path.join(local, "captions.jsonl"), "s3://bkt/in/m/captions.jsonl")):
            want = os.path.join(self.tmp, "build-local-" + name)
            got = os.path.join(self.tmp, "build-s3-" + name)
            u.build(local_input, want, *options)  # ALBERT, --lowercase, 2 threads
            b = run([u.MMPACK, "build", url, "-o", got, "--tokenizer", u.ALBERT, "--lowercase",
                     "--threads", "2"] + options, self.env)
            self.assertEqual(b.rc, 0, "%s: %s" % (name, b))
            index = json.load(open(os.path.join(want, "index.json")))
            self.assertEqual(index["totals"]["samples"], 17, name)
            for shard in index["shards"]:
                self.assertEqual(u.sha256_file(os.path.join(got, shard["file"])),
                                 u.sha256_file(os.path.join(want, shard["file"])),
                                 "%s: %s" % (name, shard["file"]))

    @unittest.skipIf(not os.access(MMTRAIN, os.X_OK), "mmtrain is not built (MM_BUILD_TRAINER)")
    def test_mmtrain_trains_from_s3_within_a_small_cache(self):
        shard = max(s["bytes"] for s in self.index["shards"])
        # In kB with a unit, as users write it (ParseByteSize), rounded down: still 2.5 shards.
        limit = "%dkB" % ((2 * shard + shard // 2) // 1000)
        out = os.path.join(self.tmp, "run")
        t = run([MMTRAIN, "--shards", "s3://bkt/sets/coco", "--out", out, "--steps", 3,
                 "--batch-size", 8, "--dim", 64, "--layers", 1, "--heads", 4, "--patch", 16,
                 "--threads", 1, "--loader-threads", 1, "--seed", 7, "--quiet",
                 "--cache-limit", limit] + self.cache("train"), self.env, timeout=600)
        self.assertEqual(t.rc, 0, str(t))
        self.assertIn("block shuffle", t.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "summary.json")))
        bad = run([MMTRAIN, "--shards", "s3://bkt/sets/coco", "--out", out + "-bad", "--steps", 1,
                   "--cache-limit", "20XB"], self.env)
        self.assertNotEqual(bad.rc, 0, str(bad))  # CLI11's usage error
        self.assertIn("'20XB' is not a byte size", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
