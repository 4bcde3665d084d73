#!/usr/bin/python3
"""End-to-end: `mmpack build` of WebDataset tars in an object store or on a web server (issue 28
item 3), against tests/remote/http_server.py on 127.0.0.1 only: tars streamed by range requests
(no copy on disk), s3:// with Signature V4 checked by the server, http(s):// brace lists, a
server that dies mid-tar (retried, then the tar reported), a server without range support, and
`-o s3://...` refused with the command that publishes a set. Each remote build is compared
with the build of the same tars from local disk: the shards are byte for byte the same.
"""
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from remote_sync_test import AWS_VARIABLES, Server, run  # noqa: E402

PER_TAR = 17


def shard_digests(out):
    """{file: sha256} of the set's shards and tokenizer, and its samples' count."""
    index = json.load(open(os.path.join(out, "index.json")))
    files = {s["file"]: u.sha256_file(os.path.join(out, s["file"])) for s in index["shards"]}
    return files, index["totals"]["samples"]


class ServedBuild:
    """For a TempDirTest whose class has `www` (the tree tests/remote/http_server.py serves): each
    test's environment without AWS variables or IMDS and with its own HOME, its own OUT, and
    `server(*args)`, a server of that tree stopped at the test's end."""

    def setUp(self):
        self.env = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES}
        self.env["HOME"] = os.path.join(self.tmp, "home")
        self.env["AWS_EC2_METADATA_DISABLED"] = "true"
        self.out = os.path.join(self.tmp, "out-" + self.id().split(".")[-1])

    def server(self, *args):
        log = os.path.join(self.tmp, "server-%s.log" % self.id().split(".")[-1])
        s = Server(self.www, log, *args)
        self.addCleanup(s.stop)
        return s


class BuildRemoteTest(ServedBuild, u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Three tars of coco-cc's photos as img2dataset writes them (key.jpg, key.txt,
        # key.json), in the served tree as bucket/laion/0000N.tar and in a local folder.
        src = os.path.join(u.DATA_DIR, "coco-cc")
        rows = [json.loads(l) for l in open(os.path.join(src, "captions.jsonl"), encoding="utf-8")]
        first = {}
        for r in rows:
            first.setdefault(r["image"], r["text"])
        images = sorted(first)
        cls.www = os.path.join(cls.tmp, "www")
        cls.tars = os.path.join(cls.www, "bucket", "laion")
        os.makedirs(cls.tars)
        for t in range(3):
            with tarfile.open(os.path.join(cls.tars, "%05d.tar" % t), "w") as tar:
                for i in range(t * PER_TAR, min((t + 1) * PER_TAR, len(images))):
                    key = "%09d" % i
                    tar.add(os.path.join(src, images[i]), arcname=key + ".jpg")
                    for ext, data in ((".txt", first[images[i]].encode()),
                                      (".json", json.dumps({"similarity": i / 51}).encode())):
                        info = tarfile.TarInfo(key + ext)
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
        cls.reference = os.path.join(cls.tmp, "reference")
        u.build(os.path.join(cls.tars, "{00000..00002}.tar"), cls.reference,
                "--image-size", "64", "--samples-per-shard", "20", "--keep-fields", "similarity")
        cls.want = shard_digests(cls.reference)

    def build(self, url, *extra):
        return run([u.MMPACK, "build", url, "-o", self.out, "--tokenizer", u.ALBERT,
                    "--lowercase", "--threads", "2", "--image-size", "64",
                    "--samples-per-shard", "20", "--keep-fields", "similarity", *extra],
                   self.env)

    def test_s3_brace_list_gives_the_local_builds_shards(self):
        s = self.server("--sigv4", "AKIDTEST:test-secret")
        self.env.update({"AWS_ENDPOINT_URL": s.url, "AWS_ACCESS_KEY_ID": "AKIDTEST",
                         "AWS_SECRET_ACCESS_KEY": "test-secret"})
        r = self.build("s3://bucket/laion/{00000..00002}.tar")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(shard_digests(self.out), self.want)
        gets = [l for l in s.lines() if l[0] == "GET"]
        self.assertTrue(gets and all(l[2] == "206" for l in gets), gets[:5])  # ranges only
        report = json.load(open(os.path.join(self.out, "report.json")))
        self.assertEqual(report["input"], "s3://bucket/laion/{00000..00002}.tar")
        # Streaming reads no shard through the reader's cache: no cache folder in HOME.
        self.assertFalse(os.path.exists(os.path.join(self.env["HOME"], ".cache")))

    def test_http_tar_and_a_missing_one_in_the_list(self):
        s = self.server()
        r = self.build(s.url + "/bucket/laion/{00001..00003}.tar")
        self.assertEqual(r.rc, 0, r.stderr)
        report = json.load(open(os.path.join(self.out, "report.json")))
        missing = [d for d in report["dropped"] if d["reason"] == "missing_file"]
        self.assertEqual([d["source"] for d in missing], [s.url + "/bucket/laion/00003.tar"])
        self.assertEqual(shard_digests(self.out)[1], 51 - PER_TAR)

    def test_a_server_that_dies_mid_tar_is_retried(self):
        s = self.server("--fail", "GET */00001.tar:die:2")
        r = self.build(s.url + "/bucket/laion/{00000..00002}.tar")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(shard_digests(self.out), self.want)
        died = [l for l in s.lines() if l[0] == "GET" and "die" in l]
        self.assertEqual(len(died), 2, s.lines())

    def test_a_tar_that_stays_unreadable_is_reported_and_the_others_kept(self):
        s = self.server("--fail", "GET */00001.tar:die:always")
        r = self.build(s.url + "/bucket/laion/{00000..00002}.tar")
        self.assertEqual(r.rc, 0, r.stderr)
        report = json.load(open(os.path.join(self.out, "report.json")))
        bad = [d for d in report["dropped"] if d["reason"] == "unreadable"]
        self.assertEqual([d["source"] for d in bad], ["00001.tar"], report["dropped"])
        self.assertIn("00001.tar", bad[0]["detail"])
        self.assertEqual(shard_digests(self.out)[1], 51 - PER_TAR)

    def test_a_server_without_ranges_is_named(self):
        # A tar over one range request (8 MiB): 9 MiB of padding, then a sample. The server
        # answers the second range with the whole object.
        big = os.path.join(self.www, "bucket", "big.tar")
        with tarfile.open(big, "w") as tar:
            info = tarfile.TarInfo("padding.bin")
            info.size = 9 << 20
            tar.addfile(info, io.BytesIO(bytes(info.size)))
            tar.add(os.path.join(self.tars, "..", "..", "..", "reference", "index.json"),
                    arcname="x.txt")
        s = self.server("--no-ranges")
        r = self.build(s.url + "/bucket/big.tar")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("does not serve range requests", r.stderr)

    def test_other_remote_inputs_and_outputs_are_refused_clearly(self):
        s = self.server()
        r = self.build(s.url + "/bucket/laion/captions.jsonl")  # manifests: build_remote_manifest
        self.assertNotEqual(r.rc, 0)
        self.assertIn("no such object: " + s.url + "/bucket/laion/captions.jsonl", r.stderr)
        r = self.build(s.url + "/bucket/laion/00000.tar", "--input-format", "coco")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("--input-format coco is not read from a URL", r.stderr)
        r = run([u.MMPACK, "build", os.path.join(self.tars, "00000.tar"), "-o",
                 "s3://bucket/set", "--tokenizer", "none"], self.env)
        self.assertNotEqual(r.rc, 0)
        self.assertIn("mmpack upload", r.stderr)


if __name__ == "__main__":
    u.require_environment()
    unittest.main()
