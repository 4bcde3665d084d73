#!/usr/bin/python3
"""End-to-end: `mmpack upload` as a sync, progress lines in a pipe, `--json` outputs, gs:// sets
through the S3 XML API with HMAC keys, and hf:// datasets with HF_TOKEN, against
tests/remote/http_server.py on 127.0.0.1 only:

- as S3 (s3://, gs://): --sigv4 verifies every request's Signature V4 with the test's keys, the
  server keeps x-amz-meta-* with each object and serves S3's multipart upload;
- as the Hugging Face Hub (hf://): --hf serves /datasets/ORG/NAME/resolve/REV/PATH and redirects
  shards to a "CDN" host, --bearer checks the token (and that it never reaches the CDN).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

SOURCE_DIR = os.environ.get("MM_SOURCE_DIR", "")
SERVER = os.path.join(SOURCE_DIR, "tests", "remote", "http_server.py")
MMTRAIN = os.path.join(u.BIN_DIR, "mmtrain")

AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "GCS_ACCESS_KEY_ID",
                 "GCS_SECRET_ACCESS_KEY", "GCS_ENDPOINT_URL", "HF_TOKEN",
                 "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "HF_ENDPOINT",
                 "MMPACK_HTTP_TOKEN")


class Server:
    """http_server.py on 127.0.0.1, its port read from its first line (bounded wait)."""

    def __init__(self, root, log, *args):
        self.requests = log + ".requests"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(["/usr/bin/python3", SERVER, "--root", root, "--log",
                                          self.requests] + list(args),
                                         stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            first = open(log).readline().strip()
            if first.isdigit():
                self.url = "http://127.0.0.1:" + first
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError("http_server.py did not start: " + open(log).read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def lines(self):
        """The requests so far: [METHOD, PATH, STATUS, ...] each."""
        if not os.path.exists(self.requests):
            return []
        return [l.split() for l in open(self.requests)]

    def clear(self):
        if os.path.exists(self.requests):
            os.unlink(self.requests)


def run(argv, env, timeout=u.TIMEOUT_S):
    proc = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=timeout)
    return u.Run([str(a) for a in argv[1:]], proc)


class RemoteSyncTest(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.local = os.path.join(cls.tmp, "coco")
        u.build(os.path.join(u.DATA_DIR, "coco-cc", "captions.jsonl"), cls.local,
                "--samples-per-shard", "12", "--image-size", "64")
        cls.index = json.load(open(os.path.join(cls.local, "index.json")))
        cls.names = sorted(os.listdir(cls.local))

    def setUp(self):
        self.n = getattr(self, "n", 0)
        self.env = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES}
        self.env["HOME"] = os.path.join(self.tmp, "home")  # no ~/.aws, no HF token file
        self.env["AWS_EC2_METADATA_DISABLED"] = "true"

    def server(self, *args):
        root = os.path.join(self.tmp, "www-" + self.id().split(".")[-1])
        os.makedirs(root, exist_ok=True)
        log = root + "-%d.log" % len(os.listdir(self.tmp))
        s = Server(root, log, *args)
        self.addCleanup(s.stop)
        s.root = root
        return s

    def s3(self, *args):
        s = self.server("--sigv4", "AKIDTEST:test-secret", *args)
        self.env.update({"AWS_ENDPOINT_URL": s.url, "AWS_ACCESS_KEY_ID": "AKIDTEST",
                         "AWS_SECRET_ACCESS_KEY": "test-secret"})
        return s

    def cache(self, name):
        return ["--cache-dir", os.path.join(self.tmp, "cache-" + name)]

    def puts(self, server):
        """Paths of the stored objects' PUTs and POSTs that completed a multipart upload."""
        out = []
        for l in server.lines():
            path = l[1].split("?")[0]
            if l[0] == "PUT" and "?" not in l[1] and l[2] == "200":
                out.append(path)
            elif l[0] == "POST" and "uploadId=" in l[1] and l[2] == "200":
                out.append(path)
        return out

    def test_a_second_upload_sends_nothing_and_keeps_index_json(self):
        s3 = self.s3()
        first = run([u.MMPACK, "upload", "--json", self.local, "s3://bkt/sync"], self.env)
        self.assertEqual(first.rc, 0, str(first))
        j = json.loads(first.stdout)
        self.assertEqual(j["files"], len(self.names))
        self.assertEqual(j["sent"], len(self.names))
        self.assertEqual(j["unchanged"], 0)
        self.assertTrue(j["index_replaced"])
        self.assertEqual(j["bytes_sent"], sum(os.path.getsize(os.path.join(self.local, n))
                                              for n in self.names))
        self.assertEqual(j["url"], "s3://bkt/sync")
        self.assertEqual(sorted(self.puts(s3)), sorted("/bkt/sync/" + n for n in self.names))
        self.assertEqual(self.puts(s3)[-1], "/bkt/sync/index.json")
        s3.clear()
        second = run([u.MMPACK, "upload", self.local, "s3://bkt/sync"], self.env)
        self.assertEqual(second.rc, 0, str(second))
        self.assertIn("upload: OK: %d files to s3://bkt/sync: 0 sent" % len(self.names),
                      second.stdout)
        self.assertIn("%d unchanged" % len(self.names), second.stdout)
        methods = sorted(set(l[0] for l in s3.lines()))
        self.assertEqual(methods, ["HEAD"], s3.lines())  # asked, nothing sent, nothing deleted
        again = json.loads(run([u.MMPACK, "upload", "--json", self.local, "s3://bkt/sync"],
                               self.env).stdout)
        self.assertEqual((again["sent"], again["bytes_sent"], again["index_replaced"]),
                         (0, 0, False))
        v = run([u.MMPACK, "verify", "s3://bkt/sync"] + self.cache("sync"), self.env)
        self.assertEqual(v.rc, 0, str(v))

    def test_a_changed_file_alone_is_sent_again_with_index_json_last(self):
        s3 = self.s3()
        self.assertEqual(run([u.MMPACK, "upload", "-q", self.local, "s3://bkt/c"], self.env).rc, 0)
        # Another tool replaced one object (no mmpack metadata, other bytes): only it is sent.
        shard = self.index["shards"][1]["file"]
        with open(os.path.join(s3.root, "bkt", "c", shard), "wb") as f:
            f.write(b"not a shard")
        s3.clear()
        up = run([u.MMPACK, "upload", "-q", self.local, "s3://bkt/c"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        self.assertEqual(self.puts(s3), ["/bkt/c/" + shard])  # index.json unchanged: not sent
        self.assertIn("1 sent", up.stdout)

    def test_an_interrupted_upload_run_again_sends_only_what_is_missing(self):
        # The third shard's PUT fails as many times as a request is tried (5): the first run
        # fails there; the server still holds what it stored, and the second run completes it.
        third = self.index["shards"][2]["file"]
        s3 = self.s3("--fail", "PUT */" + third + ":503:5")
        first = run([u.MMPACK, "upload", "--transfers", "1", self.local, "s3://bkt/i"], self.env)
        self.assertNotEqual(first.rc, 0, str(first))
        self.assertIn("PUT %s/bkt/i/%s" % (s3.url, third), first.stderr)
        stored = set(self.puts(s3))
        self.assertNotIn("/bkt/i/index.json", stored)
        self.assertFalse(os.path.exists(os.path.join(s3.root, "bkt", "i", "index.json")))
        self.assertGreater(len(stored), 0)
        s3.clear()
        second = run([u.MMPACK, "upload", "--json", self.local, "s3://bkt/i"], self.env)
        self.assertEqual(second.rc, 0, str(second))
        resent = self.puts(s3)
        self.assertEqual(sorted(resent),
                         sorted(set("/bkt/i/" + n for n in self.names) - stored))
        self.assertEqual(resent[-1], "/bkt/i/index.json")
        self.assertEqual(json.loads(second.stdout)["unchanged"], len(stored))
        for name in self.names:
            self.assertEqual(open(os.path.join(s3.root, "bkt", "i", name), "rb").read(),
                             open(os.path.join(self.local, name), "rb").read(), name)

    def test_large_files_go_up_in_parts_and_are_recognised_after(self):
        s3 = self.s3()
        up = run([u.MMPACK, "upload", "-q", "--multipart-threshold", "1", self.local,
                  "s3://bkt/mp"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        shard = "/bkt/mp/" + self.index["shards"][0]["file"]
        lines = [(l[0], l[1], l[2]) for l in s3.lines()]
        self.assertIn(("POST", shard + "?uploads=", "200"), lines)
        self.assertTrue(any(m == "PUT" and p.startswith(shard + "?partNumber=1&uploadId=")
                            for m, p, _ in lines), lines)
        self.assertFalse(any(m == "PUT" and p == shard for m, p, _ in lines), lines)
        s3.clear()
        again = run([u.MMPACK, "upload", "-q", "--multipart-threshold", "1", self.local,
                     "s3://bkt/mp"], self.env)
        self.assertEqual(again.rc, 0, str(again))
        self.assertEqual(self.puts(s3), [])
        v = run([u.MMPACK, "verify", "s3://bkt/mp"] + self.cache("mp"), self.env)
        self.assertEqual(v.rc, 0, str(v))
        bad = run([u.MMPACK, "upload", "--part-size", "1MiB", self.local, "s3://bkt/mp"], self.env)
        self.assertNotEqual(bad.rc, 0, str(bad))
        self.assertIn("--part-size", bad.stderr)

    def test_a_failing_part_is_retried_alone(self):
        # The first shard's first two part PUTs answer 503: that part is sent again (three
        # times in all), the upload is not restarted (one POST ?uploads per object).
        shard = self.index["shards"][0]["file"]
        s3 = self.s3("--fail", "PUT */" + shard + ":503:2")
        up = run([u.MMPACK, "upload", "-q", "--transfers", "1", "--multipart-threshold", "1",
                  self.local, "s3://bkt/retry"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        path = "/bkt/retry/" + shard
        lines = [(l[0], l[1].split("&")[0], l[2]) for l in s3.lines() if l[1].startswith(path)]
        self.assertEqual(lines.count(("POST", path + "?uploads=", "200")), 1, lines)
        parts = [status for m, p, status in lines if m == "PUT" and p == path + "?partNumber=1"]
        self.assertEqual(parts, ["503", "503", "200"], lines)
        self.assertEqual(open(os.path.join(s3.root, "bkt", "retry", shard), "rb").read(),
                         open(os.path.join(self.local, shard), "rb").read())

    def test_http_sets_send_mmpack_http_token_as_a_bearer_token(self):
        www = self.server("--bearer", "s3cr3t-token")
        shutil.copytree(self.local, os.path.join(www.root, "sets", "coco"))
        no_token = run([u.MMPACK, "info", www.url + "/sets/coco"], self.env)
        self.assertNotEqual(no_token.rc, 0)
        self.assertIn("HTTP 401", no_token.stderr)
        self.env["MMPACK_HTTP_TOKEN"] = "s3cr3t-token"
        v = run([u.MMPACK, "verify", www.url + "/sets/coco"] + self.cache("bearer"), self.env)
        self.assertEqual(v.rc, 0, str(v))
        off_host = run([u.MMPACK, "info", "http://example.com/sets/coco"], self.env)
        self.assertNotEqual(off_host.rc, 0)
        self.assertIn("MMPACK_HTTP_TOKEN", off_host.stderr)

    def test_progress_lines_go_to_a_pipe_every_few_seconds(self):
        self.s3("--delay", "*.h5:0.4")
        up = run([u.MMPACK, "upload", "--transfers", "1", "--progress-every", "0.5", self.local,
                  "s3://bkt/p"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        lines = [l for l in up.stderr.splitlines() if l.startswith("upload: ")]
        self.assertGreaterEqual(len(lines), 2, up.stderr)
        for line in lines:
            self.assertRegex(line, r"^upload: [0-9.]+ [kKMG]?B of [0-9.]+ [kKMG]?B \([0-9.]+%\), "
                             r"[0-9.]+ [kKMG]?B/s, ETA ([0-9]+:[0-9]{2}|\?)$")
        self.assertNotIn("\r", up.stderr)
        v = run([u.MMPACK, "verify", "--progress-every", "0.5", "s3://bkt/p"] + self.cache("p"),
                self.env)
        self.assertEqual(v.rc, 0, str(v))
        self.assertTrue(any(l.startswith("verify: ") and " of " in l
                            for l in v.stderr.splitlines()), v.stderr)
        # bench on a remote set: what the cache downloads, the ETA the end of --seconds.
        b = run([u.MMPACK, "bench", "s3://bkt/p", "--seconds", "3", "--threads", "1",
                 "--progress-every", "0.5"] + self.cache("pbench"), self.env)
        self.assertEqual(b.rc, 0, str(b))
        self.assertTrue(any(re.match(r"^bench: downloaded: [0-9.]+ [kKMG]?B, [0-9.]+ [kKMG]?B/s, "
                                     r"ETA [0-9]+:[0-9]{2}$", l)
                            for l in b.stderr.splitlines()), b.stderr)
        quiet = run([u.MMPACK, "upload", "--progress-every", "0", self.local, "s3://bkt/p"],
                    self.env)
        self.assertEqual(quiet.rc, 0, str(quiet))
        self.assertNotIn(" of ", quiet.stderr)

    @unittest.skipIf(not shutil.which("script"), "no script(1) to give mmpack a terminal")
    def test_a_terminal_gets_one_line_redrawn_then_erased(self):
        self.s3("--delay", "*.h5:0.3")
        cmd = " ".join(shlex.quote(str(a)) for a in
                       [u.MMPACK, "upload", "--transfers", "1", self.local, "s3://bkt/tty"])
        r = subprocess.run(["script", "-qec", cmd, "/dev/null"], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=u.TIMEOUT_S)
        out = r.stdout.decode(errors="replace")
        self.assertEqual(r.returncode, 0, out)
        self.assertGreaterEqual(out.count("\rupload: "), 2, repr(out))  # redrawn in place
        self.assertIn("/s, ETA ", out)
        self.assertIn("\r\x1b[K", out)  # erased before the summary
        self.assertIn("upload: OK: %d files" % len(self.names), out)
        self.assertNotRegex(out, r"upload: [0-9.]+ [kKMG]?B of [^\r]*\n")  # no ended lines
        # Each file's own line starts a line: the progress line is erased before it.
        sent = [i for i in range(len(out)) if out.startswith("upload: sent ", i)]
        self.assertEqual(len(sent), len(self.names), repr(out))
        for i in sent:
            self.assertTrue(out[:i].endswith(("\n", "\r\x1b[K")),
                            repr(out[max(0, i - 80):i + 20]))

    def test_json_outputs_parse_with_the_documented_keys(self):
        self.s3()
        info = run([u.MMPACK, "info", "--json", self.local], self.env)
        self.assertEqual(info.rc, 0, str(info))
        j = json.loads(info.stdout)
        self.assertEqual(j["samples"], self.index["totals"]["samples"])
        self.assertEqual(j["shards"], len(self.index["shards"]))
        self.assertEqual(j["image"]["width"], 64)
        self.assertFalse(j["remote"])
        v = json.loads(run([u.MMPACK, "verify", "--json", self.local], self.env).stdout)
        self.assertEqual((v["ok"], v["samples"], v["shards"]),
                         (True, self.index["totals"]["samples"], len(self.index["shards"])))
        st = run([u.MMPACK, "stats", "--json", self.local], self.env)
        self.assertEqual(st.rc, 0, str(st))
        self.assertIsInstance(json.loads(st.stdout), dict)
        self.assertEqual(run([u.MMPACK, "upload", "-q", self.local, "s3://bkt/j"], self.env).rc, 0)
        remote = json.loads(run([u.MMPACK, "info", "--json", "s3://bkt/j"] + self.cache("j"),
                                self.env).stdout)
        self.assertTrue(remote["remote"])
        self.assertEqual(remote["samples"], j["samples"])
        # A set that does not verify: exit 1 and an object that says why.
        broken = os.path.join(self.tmp, "broken-json")
        shutil.copytree(self.local, broken)
        path = os.path.join(broken, self.index["shards"][0]["file"])
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(path, "wb").write(bytes(data))
        bad = run([u.MMPACK, "verify", "--json", broken], self.env)
        self.assertNotEqual(bad.rc, 0)
        b = json.loads(bad.stdout)
        self.assertFalse(b["ok"])
        self.assertIn(self.index["shards"][0]["file"], b["error"])

    def test_gs_sets_use_the_hmac_keys_never_the_aws_ones(self):
        gcs = self.server("--sigv4", "GOOG1EHMACKEY:hmac-secret", "--gcs")
        self.env.update({"GCS_ENDPOINT_URL": gcs.url, "GCS_ACCESS_KEY_ID": "GOOG1EHMACKEY",
                         "GCS_SECRET_ACCESS_KEY": "hmac-secret",
                         # AWS keys the server does not know: used, they would be refused
                         "AWS_ACCESS_KEY_ID": "AKIDAWS", "AWS_SECRET_ACCESS_KEY": "aws-secret",
                         "AWS_ENDPOINT_URL": gcs.url})
        up = run([u.MMPACK, "upload", "-q", self.local, "gs://bkt/sets/coco"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        self.assertIn("GCS credentials: HMAC key (GCS_ACCESS_KEY_ID)", up.stderr)
        # GCS answers the checksum metadata as x-goog-meta-*: recognised, nothing sent again.
        gcs.clear()
        again = run([u.MMPACK, "upload", "--json", self.local, "gs://bkt/sets/coco"], self.env)
        self.assertEqual(again.rc, 0, str(again))
        self.assertEqual(json.loads(again.stdout)["sent"], 0)
        self.assertEqual(set(l[0] for l in gcs.lines()), {"HEAD"})
        v = run([u.MMPACK, "verify", "gs://bkt/sets/coco"] + self.cache("gs"), self.env)
        self.assertEqual(v.rc, 0, str(v))
        self.assertIn("verify: OK: %d shards" % len(self.index["shards"]), v.stdout)
        keys = set(l[-1] for l in gcs.lines() if l[-1].startswith("key="))
        self.assertEqual(keys, {"key=GOOG1EHMACKEY"})
        want = u.mmpack("show", self.local, 5, "-o", os.path.join(self.tmp, "gl.png"))
        self.assertEqual(want.rc, 0, str(want))
        got = run([u.MMPACK, "show", "gs://bkt/sets/coco", 5, "-o", os.path.join(self.tmp, "gr.png")]
                  + self.cache("gs"), self.env)
        self.assertEqual(got.rc, 0, str(got))
        self.assertEqual(open(os.path.join(self.tmp, "gr.png"), "rb").read(),
                         open(os.path.join(self.tmp, "gl.png"), "rb").read())
        # Without the HMAC key: unsigned, said once, and the server refuses.
        del self.env["GCS_ACCESS_KEY_ID"]
        unsigned = run([u.MMPACK, "info", "gs://bkt/sets/coco"] + self.cache("gs2"), self.env)
        self.assertNotEqual(unsigned.rc, 0)
        self.assertEqual(unsigned.stderr.count("no credentials found: unsigned requests"), 1,
                         unsigned.stderr)

    def hub(self, token="hf_testtoken"):
        hub = self.server("--hf", "--bearer", token)
        for rev in ("main", "v1.0"):
            shutil.copytree(self.local, os.path.join(hub.root, "datasets", "org", "cc", rev,
                                                     "sets", "coco"))
        self.env.update({"HF_ENDPOINT": hub.url, "HF_TOKEN": token})
        return hub

    def test_hf_datasets_are_read_with_the_token_which_never_reaches_the_cdn(self):
        hub = self.hub()
        for url in ("hf://datasets/org/cc/sets/coco", "hf://datasets/org/cc@v1.0/sets/coco"):
            v = run([u.MMPACK, "verify", url] + self.cache("hf"), self.env)
            self.assertEqual(v.rc, 0, str(v))
            self.assertIn("verify: OK: %d shards" % len(self.index["shards"]), v.stdout)
        lines = hub.lines()
        self.assertTrue(any(l[1].startswith("/datasets/org/cc/resolve/v1.0/sets/coco/") and
                            l[2] == "302" for l in lines), lines)
        self.assertTrue(any(l[1].startswith("/cdn/") and l[2] == "200" for l in lines), lines)
        self.assertFalse(any(l[2] in ("400", "401") for l in lines), lines)  # no token leaked
        info = json.loads(run([u.MMPACK, "info", "--json", "hf://datasets/org/cc/sets/coco"]
                              + self.cache("hf"), self.env).stdout)
        self.assertEqual(info["samples"], self.index["totals"]["samples"])
        # The token from HF_HOME/token when HF_TOKEN is unset; a wrong one is refused (401).
        del self.env["HF_TOKEN"]
        os.makedirs(os.path.join(self.tmp, "hfhome"), exist_ok=True)
        open(os.path.join(self.tmp, "hfhome", "token"), "w").write("hf_testtoken\n")
        self.env["HF_HOME"] = os.path.join(self.tmp, "hfhome")
        ok = run([u.MMPACK, "info", "hf://datasets/org/cc/sets/coco"] + self.cache("hf3"),
                 self.env)
        self.assertEqual(ok.rc, 0, str(ok))
        self.env["HF_TOKEN"] = "hf_wrong"
        bad = run([u.MMPACK, "info", "hf://datasets/org/cc/sets/coco"] + self.cache("hf4"),
                  self.env)
        self.assertNotEqual(bad.rc, 0)
        self.assertIn("401", bad.stderr)
        self.assertIn("/datasets/org/cc/resolve/main/sets/coco/index.json", bad.stderr)

    @unittest.skipIf(not os.access(MMTRAIN, os.X_OK), "mmtrain is not built (MM_BUILD_TRAINER)")
    def test_mmtrain_trains_from_gs_and_hf_sets(self):
        gcs = self.server("--sigv4", "GOOG1EHMACKEY:hmac-secret")
        self.env.update({"GCS_ENDPOINT_URL": gcs.url, "GCS_ACCESS_KEY_ID": "GOOG1EHMACKEY",
                         "GCS_SECRET_ACCESS_KEY": "hmac-secret"})
        up = run([u.MMPACK, "upload", "-q", self.local, "gs://bkt/train"], self.env)
        self.assertEqual(up.rc, 0, str(up))
        self.hub()
        for name, url in (("gs", "gs://bkt/train"), ("hf", "hf://datasets/org/cc/sets/coco")):
            out = os.path.join(self.tmp, "run-" + name)
            t = run([MMTRAIN, "--shards", url, "--out", out, "--steps", 2, "--batch-size", 8,
                     "--dim", 64, "--layers", 1, "--heads", 4, "--patch", 16, "--threads", 1,
                     "--loader-threads", 1, "--seed", 7, "--quiet"] + self.cache("train-" + name),
                    self.env, timeout=600)
            self.assertEqual(t.rc, 0, str(t))
            self.assertTrue(os.path.exists(os.path.join(out, "summary.json")), name)

    def test_hf_urls_that_cannot_work_are_refused_in_one_line(self):
        self.env["HF_TOKEN"] = "hf_x"
        self.env["HF_ENDPOINT"] = "http://hub.example.com"  # a token over plain http off-host
        r = run([u.MMPACK, "info", "hf://datasets/org/cc"], self.env)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("bearer token is sent only over https", r.stderr)
        self.env["HF_ENDPOINT"] = "http://127.0.0.1:9"
        for url, words in (("hf://models/org/m", "only dataset repositories"),
                           ("hf://datasets/org", "no NAME"),
                           ("hf://datasets/org/cc/../x", "'..'")):
            r = run([u.MMPACK, "info", url], self.env)
            self.assertNotEqual(r.rc, 0, url)
            self.assertIn(words, r.stderr, url)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        up = run([u.MMPACK, "upload", self.local, "hf://datasets/org/cc"], self.env)
        self.assertNotEqual(up.rc, 0)
        self.assertIn("huggingface-cli upload", up.stderr)


if __name__ == "__main__":
    unittest.main()
