#!/usr/bin/python3
"""End-to-end: `mmpack build` of a JSONL or CSV manifest at a URL (issue 28 item 3), against
tests/remote/http_server.py on 127.0.0.1 only: the manifest fetched through the remote layer,
its relative image paths resolved against its URL and each image fetched (http:// and s3:// with
Signature V4 checked by the server), absolute image URLs of the same store, a Hugging Face
imagefolder's metadata.jsonl found in a remote folder, a missing image (404) dropped and
reported, a dead server refused with nothing published. Each build of a served copy of
../shared/data/coco-cc is compared with the build of the same files from local disk: shards and
index.json byte for byte the same.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402
from build_remote_test import ServedBuild  # noqa: E402
from remote_sync_test import Server, run  # noqa: E402

BUILD_ARGS = ("--image-size", "64", "--samples-per-shard", "20", "--keep-fields", "license")


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def set_files(out):
    """{file: sha256} of the set's shards and index.json."""
    index = load_json(os.path.join(out, "index.json"))
    names = [s["file"] for s in index["shards"]] + ["index.json"]
    return {n: u.sha256_file(os.path.join(out, n)) for n in names}


def samples(out):
    return load_json(os.path.join(out, "index.json"))["totals"]["samples"]


def dropped(out):
    return load_json(os.path.join(out, "report.json"))["dropped"]


class BuildRemoteManifestTest(ServedBuild, u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # coco-cc as served (bucket/coco/: captions.jsonl, captions.csv, metadata.jsonl for the
        # imagefolder, images/), and built from that same folder on disk.
        cls.www = os.path.join(cls.tmp, "www")
        cls.coco = os.path.join(cls.www, "bucket", "coco")
        shutil.copytree(os.path.join(u.DATA_DIR, "coco-cc"), cls.coco)
        with open(os.path.join(cls.coco, "captions.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(l) for l in f]
        with open(os.path.join(cls.coco, "captions.csv"), "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["image", "text", "license"])
            for r in rows:
                w.writerow([r["image"], r["text"], r["license"]])
        with open(os.path.join(cls.coco, "metadata.jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({"file_name": r["image"], "text": r["text"],
                                    "license": r["license"]}) + "\n")
        cls.rows = rows
        cls.want = {}
        for name in ("captions.jsonl", "captions.csv", "metadata.jsonl"):
            out = os.path.join(cls.tmp, "local-" + name)
            u.build(os.path.join(cls.coco, name), out, *BUILD_ARGS)
            cls.want[name] = set_files(out)

    def s3_server(self):
        s = self.server("--sigv4", "AKIDTEST:test-secret")
        self.env.update({"AWS_ENDPOINT_URL": s.url, "AWS_ACCESS_KEY_ID": "AKIDTEST",
                         "AWS_SECRET_ACCESS_KEY": "test-secret"})
        return s

    def build(self, url, *extra):
        return run([u.MMPACK, "build", url, "-o", self.out, "--tokenizer", u.ALBERT,
                    "--lowercase", "--threads", "2", *BUILD_ARGS, *extra], self.env)

    def write_manifest(self, name, rows):
        with open(os.path.join(self.coco, name), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    def test_http_jsonl_gives_the_local_builds_set(self):
        s = self.server()
        r = self.build(s.url + "/bucket/coco/captions.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(set_files(self.out), self.want["captions.jsonl"])
        images = [l for l in s.lines() if l[0] == "GET" and "/images/" in l[1]]
        self.assertEqual(len(images), 51, s.lines()[:5])  # one GET per image
        # Streaming the manifest reads no shard through the reader's cache: no cache folder.
        self.assertFalse(os.path.exists(os.path.join(self.env["HOME"], ".cache")))

    def test_s3_csv_gives_the_local_builds_set(self):
        s = self.s3_server()
        r = self.build("s3://bucket/coco/captions.csv")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(set_files(self.out), self.want["captions.csv"])
        signed = [l for l in s.lines() if l[0] == "GET"]
        self.assertTrue(signed and all(l[2] in ("200", "206") for l in signed), signed[:5])

    def test_s3_jsonl_and_http_csv_give_the_local_builds_sets(self):
        s = self.s3_server()
        r = self.build("s3://bucket/coco/captions.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(set_files(self.out), self.want["captions.jsonl"])
        shutil.rmtree(self.out)
        r = self.build(self.server().url + "/bucket/coco/captions.csv")  # unsigned
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(set_files(self.out), self.want["captions.csv"])

    def test_a_remote_imagefolder_is_read_by_its_metadata(self):
        s = self.s3_server()
        r = self.build("s3://bucket/coco/")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(set_files(self.out), self.want["metadata.jsonl"])
        # A folder without metadata: named, and listing is not pretended.
        shutil.rmtree(self.out)
        r = self.build("s3://bucket/coco/images/")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("no metadata.jsonl or metadata.csv at s3://bucket/coco/images/", r.stderr)
        self.assertIn("does not list remote folders", r.stderr)
        self.assertFalse(os.path.exists(self.out))
        self.assertTrue(s.lines())

    def test_an_hf_dataset_folder_is_read_by_its_metadata(self):
        # The Hub's layout (http_server.py --hf): images resolved below the folder of
        # hf://datasets/org/cc@v1.0/coco/metadata.jsonl, with the token.
        shutil.copytree(self.coco, os.path.join(self.www, "datasets", "org", "cc", "v1.0", "coco"))
        s = self.server("--hf", "--bearer", "hf_testtoken")
        self.env.update({"HF_ENDPOINT": s.url, "HF_TOKEN": "hf_testtoken"})
        r = self.build("hf://datasets/org/cc@v1.0/coco")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(set_files(self.out), self.want["metadata.jsonl"])
        images = [l for l in s.lines() if l[0] == "GET" and "/images/" in l[1]]
        self.assertEqual(len(images), 51)
        self.assertTrue(all("/resolve/v1.0/coco/images/" in l[1] for l in images), images[:3])

    def test_absolute_image_urls_of_the_same_store(self):
        s = self.server()
        # As on the web: percent-encoded ("_" as %5F), decoded before the remote layer encodes.
        http = [dict(r, image=s.url + "/bucket/coco/" + r["image"].replace("_", "%5F"))
                for r in self.rows]
        self.write_manifest("abs-http.jsonl", http)
        r = self.build(s.url + "/bucket/coco/abs-http.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(dropped(self.out)), 0, dropped(self.out))
        self.assertEqual(samples(self.out), 51)
        # s3:// images in an s3:// manifest, elsewhere in the bucket ("../coco/images/...").
        self.s3_server()
        self.write_manifest("abs-s3.jsonl",
                            [dict(r, image="s3://bucket/coco/" + r["image"]) for r in self.rows[:10]]
                            + [dict(r, image="../coco/" + r["image"]) for r in self.rows[10:]])
        shutil.rmtree(self.out)
        r = self.build("s3://bucket/coco/abs-s3.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(len(dropped(self.out)), 0, dropped(self.out))
        self.assertEqual(samples(self.out), 51)
        # An http:// image in an s3:// manifest is another store: refused, naming line and URL.
        self.write_manifest("mixed.jsonl", self.rows + [http[0]])
        shutil.rmtree(self.out)
        r = self.build("s3://bucket/coco/mixed.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        bad = dropped(self.out)
        self.assertEqual([(d["source"], d["reason"]) for d in bad],
                         [("mixed.jsonl:%d" % (len(self.rows) + 1), "remote_image_not_supported")])
        self.assertIn(http[0]["image"], bad[0]["detail"])

    def test_a_missing_image_is_dropped_and_reported(self):
        s = self.server("--fail", "GET */images/train2017_000000000790.jpg:503:always")
        rows = self.rows + [dict(self.rows[0], image="images/no-such.jpg")]
        self.write_manifest("missing.jsonl", rows)
        r = self.build(s.url + "/bucket/coco/missing.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        by_source = {d["source"]: d for d in dropped(self.out)}
        self.assertEqual(sorted(by_source), ["images/no-such.jpg",
                                             "images/train2017_000000000790.jpg"])
        miss = by_source["images/no-such.jpg"]
        self.assertEqual(miss["reason"], "missing_file")
        self.assertEqual(miss["key"], "images/no-such")
        self.assertIn(s.url + "/bucket/coco/images/no-such.jpg", miss["detail"])
        failing = by_source["images/train2017_000000000790.jpg"]
        self.assertEqual(failing["reason"], "unreadable")
        self.assertIn("503", failing["detail"])
        self.assertIn("5 tries", failing["detail"])  # retried, then dropped
        self.assertEqual(samples(self.out), 50)

    def test_an_image_on_another_host_is_refused_and_never_requested(self):
        # The manifest's server wants a bearer token (MMPACK_HTTP_TOKEN), which goes with every
        # GET: an image URL on another server (here another port) must not receive it.
        s = self.server("--bearer", "SECRET-TOKEN")
        other = Server(self.www, os.path.join(self.tmp, "other-host.log"))
        self.addCleanup(other.stop)
        first = self.rows[0]["image"]
        rows = [dict(r, image=other.url + "/bucket/coco/" + first) if r["image"] == first else r
                for r in self.rows]  # every caption line of the first image
        self.write_manifest("other-host.jsonl", rows)
        self.env["MMPACK_HTTP_TOKEN"] = "SECRET-TOKEN"
        r = self.build(s.url + "/bucket/coco/other-host.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        bad = dropped(self.out)
        lines = [i + 1 for i, r in enumerate(rows) if r["image"] != self.rows[i]["image"]]
        self.assertEqual([(d["source"], d["reason"]) for d in bad],
                         [("other-host.jsonl:%d" % i, "remote_image_not_supported") for i in lines])
        self.assertEqual(other.lines(), [])
        self.assertEqual(samples(self.out), 50)

    def test_a_store_whose_every_image_fails_stops_the_build_and_publishes_nothing(self):
        # Expired credentials or a store gone down: every GET of an image fails after its retries.
        # Dropping them all would publish what came before after hours of retries; the build
        # stops once 64 in a row have failed and none answered for 30 s, naming the cause. 1,200
        # images take longer than that (at least 1.5 s of retries each, 32 at once).
        s = self.server("--fail", "GET */images/*:503:always")
        self.write_manifest("down.jsonl", [{"image": "images/x%05d.jpg" % i, "text": "a photo"}
                                           for i in range(1200)])
        r = self.build(s.url + "/bucket/coco/down.jsonl")
        self.assertNotEqual(r.rc, 0, r.stderr)
        self.assertRegex(r.stderr, "the store stopped answering: [0-9]+ images at URLs in a row "
                         "failed after their retries, none answered for 3[0-9] s")
        self.assertIn("503", r.stderr)
        self.assertFalse(os.path.exists(self.out))
        parent = os.path.dirname(self.out)
        name = os.path.basename(self.out)
        self.assertEqual([n for n in os.listdir(parent) if n.startswith(name)], [])
        gets = [l for l in s.lines() if l[0] == "GET" and "/images/" in l[1]]
        self.assertLess(len(gets), 5 * 1200, "it stopped before trying every image")

    def test_a_blip_drops_its_images_and_the_build_goes_on(self):
        # 40 images failing (after their retries) on a store that answers before and after:
        # dropped and reported, the others built.
        s = self.server("--fail", "GET */images/x*:503:always")
        rows = [{"image": "images/x%05d.jpg" % i, "text": "a photo"} for i in range(40)]
        self.write_manifest("blip.jsonl", self.rows[:5] + rows + self.rows[5:])
        r = self.build(s.url + "/bucket/coco/blip.jsonl")
        self.assertEqual(r.rc, 0, r.stderr)
        self.assertEqual(sorted({d["reason"] for d in dropped(self.out)}), ["unreadable"])
        self.assertEqual(len(dropped(self.out)), 40)
        self.assertEqual(samples(self.out), 51)

    def test_a_dead_manifest_server_fails_and_publishes_nothing(self):
        s = self.server()
        url = s.url + "/bucket/coco/captions.jsonl"
        s.stop()
        r = self.build(url)
        self.assertNotEqual(r.rc, 0)
        self.assertIn(url, r.stderr)
        self.assertIn("tries", r.stderr)
        self.assertFalse(os.path.exists(self.out))
        s = self.server()
        r = self.build(s.url + "/bucket/coco/none.jsonl")
        self.assertNotEqual(r.rc, 0)
        self.assertIn("no such object: " + s.url + "/bucket/coco/none.jsonl", r.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_a_manifest_replaced_while_it_is_read_fails_the_build(self):
        # Each request held 2 s; the manifest is rewritten once its first HEAD is answered, so
        # its GET and the HEAD after it see another object than that HEAD did.
        self.write_manifest("changing.jsonl", self.rows)
        s = self.server("--delay", "/bucket/coco/changing.jsonl:2")
        proc = subprocess.Popen(
            [u.MMPACK, "build", s.url + "/bucket/coco/changing.jsonl", "-o", self.out,
             "--tokenizer", "none", *BUILD_ARGS], env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not [l for l in s.lines() if l[0] == "HEAD"] and time.time() < deadline:
            time.sleep(0.05)
        self.write_manifest("changing.jsonl", self.rows[:10])
        _, err = proc.communicate(timeout=u.TIMEOUT_S)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("changing.jsonl changed while it was read", err.decode())
        self.assertFalse(os.path.exists(self.out))

    def test_a_url_in_a_local_manifest_is_refused_by_line(self):
        self.write_manifest("local-url.jsonl",
                            self.rows[:5] + [dict(self.rows[5], image="http://example.com/a.jpg")])
        u.build(os.path.join(self.coco, "local-url.jsonl"), self.out, *BUILD_ARGS)
        bad = dropped(self.out)
        self.assertEqual([(d["source"], d["reason"]) for d in bad],
                         [("local-url.jsonl:6", "remote_image_not_supported")])
        self.assertIn("'http://example.com/a.jpg' is a URL in a local manifest", bad[0]["detail"])


if __name__ == "__main__":
    u.require_environment()
    unittest.main()
