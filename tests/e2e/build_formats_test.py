#!/usr/bin/python3
"""End-to-end: every input format `mmpack build` reads gives the same samples.

Eight real coco-cc photos with one or two captions each (commas, quotes, tabs-free text,
non-ASCII) laid out as: a folder of pairs (nested dirs), JSONL, CSV, TSV, COCO captions JSON
and a WebDataset .tar; detected automatically, and once forced with --input-format."""

import csv
import io
import json
import os
import shutil
import sys
import tarfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc", "images")
CAPTIONS = [
    ["a man riding a wave, on top of a surfboard"],
    ['a "quoted" word and a comma, here'],
    ["Ein Hund läuft über die Wiese"],
    ["一只狗在草地上跑"],
    ["plain caption number five"],
    ["emoji 🐶 caption"],
    ["apostrophe's and semicolon; fine"],
    ["last one"],
]


def stem_of(source):
    """'images/x.jpg', '/abs/x.jpg', 'shard.tar:dir/x.jpg' -> 'x'."""
    return os.path.splitext(os.path.basename(source.split(":")[-1]))[0]


class InputFormats(u.TempDirTest):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        photos = sorted(os.listdir(COCO))[:len(CAPTIONS)]
        cls.stems = [os.path.splitext(p)[0] for p in photos]
        cls.want = {stem: [c.encode("utf-8") for c in caps] for stem, caps in zip(cls.stems, CAPTIONS)}
        t = cls.tmp
        # manifests beside an images/ folder; paths relative to the manifest's folder
        man = os.path.join(t, "manifests")
        os.makedirs(os.path.join(man, "images"))
        for p in photos:
            shutil.copy(os.path.join(COCO, p), os.path.join(man, "images", p))
        rows = [("images/" + p, c) for p, caps in zip(photos, CAPTIONS) for c in caps]
        with open(os.path.join(man, "pairs.jsonl"), "w", encoding="utf-8") as f:
            for p, c in rows:
                f.write(json.dumps({"image_path": p, "caption": c, "extra": 1}, ensure_ascii=False) + "\n")
        with open(os.path.join(man, "pairs.csv"), "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["image", "text", "license"])
            for p, c in rows:
                w.writerow([p, c, "CC-BY"])
        with open(os.path.join(man, "pairs.tsv"), "w", encoding="utf-8", newline="") as f:
            f.write("file_name\tcaption\n")
            for p, c in rows:
                assert "\t" not in c and "\n" not in c
                f.write("%s\t%s\n" % (p, c))
        images = [{"id": 100 + i, "file_name": "images/" + p, "width": 0, "height": 0}
                  for i, p in enumerate(photos)]
        anns = [{"id": k, "image_id": 100 + i, "caption": c}
                for k, (i, c) in enumerate((i, c) for i, caps in enumerate(CAPTIONS) for c in caps)]
        with open(os.path.join(man, "captions.json"), "w", encoding="utf-8") as f:
            json.dump({"images": images, "annotations": anns}, f, ensure_ascii=False)
        # folder of pairs, nested
        files = os.path.join(t, "files")
        for i, (p, caps) in enumerate(zip(photos, CAPTIONS)):
            d = os.path.join(files, "part%d" % (i % 3), "x" if i % 2 else "")
            os.makedirs(d, exist_ok=True)
            stem = os.path.splitext(p)[0]
            shutil.copy(os.path.join(COCO, p), os.path.join(d, p))
            with open(os.path.join(d, stem + ".txt"), "wb") as f:
                f.write(caps[0].encode("utf-8"))
        # WebDataset tar: key.jpg + key.txt members
        cls.tar = os.path.join(t, "shard-0000.tar")
        with tarfile.open(cls.tar, "w") as tar:
            for p, caps in zip(photos, CAPTIONS):
                stem = os.path.splitext(p)[0]
                tar.add(os.path.join(COCO, p), arcname="wds/" + stem + ".jpg")
                data = caps[0].encode("utf-8")
                info = tarfile.TarInfo("wds/" + stem + ".txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        cls.inputs = {"jsonl": os.path.join(man, "pairs.jsonl"), "csv": os.path.join(man, "pairs.csv"),
                      "tsv": os.path.join(man, "pairs.tsv"), "coco": os.path.join(man, "captions.json"),
                      "files": files, "wds": cls.tar}
        cls.built = {}
        for name, raw in cls.inputs.items():
            out = os.path.join(t, "out_" + name)
            u.build(raw, out)
            cls.built[name] = u.ShardSet(out)

    def by_stem(self, shards):
        out = {}
        for s in shards.samples:
            out[stem_of(s["source"].decode("utf-8"))] = s
        return out

    def check_same_samples(self, name):
        shards = self.built[name]
        got = self.by_stem(shards)
        self.assertEqual(set(got), set(self.want), name)
        ref = self.by_stem(self.built["jsonl"])
        for stem, caps in self.want.items():
            self.assertEqual(got[stem]["captions"], caps, (name, stem))
            self.assertEqual(got[stem]["tokens"], ref[stem]["tokens"], (name, stem))
            self.assertTrue(np.array_equal(shards.image(got[stem]), self.built["jsonl"].image(ref[stem])),
                            (name, stem))
        self.assertEqual(shards.index["build_options"]["input_format"], name)
        self.assertEqual(u.mmpack("verify", shards.out).rc, 0)

    def test_jsonl(self):
        self.check_same_samples("jsonl")
        self.assertEqual([s["source"] for s in self.built["jsonl"].samples],
                         [("images/%s.jpg" % s).encode() for s in self.stems])

    def test_csv(self):
        self.check_same_samples("csv")

    def test_tsv(self):
        self.check_same_samples("tsv")

    def test_coco_json(self):
        self.check_same_samples("coco")

    def test_folder_of_pairs(self):
        self.check_same_samples("files")

    def test_webdataset_tar(self):
        self.check_same_samples("wds")

    def test_tar_input_same_files_at_any_thread_count(self):
        one = os.path.join(self.tmp, "wds_one_thread")
        u.build(self.tar, one, threads=1)
        two = self.built["wds"].out
        for name in sorted(os.listdir(two)):
            with open(os.path.join(two, name), "rb") as a, open(os.path.join(one, name), "rb") as b:
                self.assertTrue(a.read() == b.read(), name)

    def test_forced_input_format(self):
        out = os.path.join(self.tmp, "forced")
        # a .txt manifest name hides the format: only --input-format says it is JSONL
        raw = os.path.join(os.path.dirname(self.inputs["jsonl"]), "list.txt")
        shutil.copy(self.inputs["jsonl"], raw)
        u.build(raw, out, "--input-format", "jsonl")
        got = self.by_stem(u.ShardSet(out))
        self.assertEqual({k: v["captions"] for k, v in got.items()}, self.want)


class ManifestDetails(u.TempDirTest):
    """Details of real-world manifests: RFC 4180 quoting, a byte-order mark, captions of one
    image on lines far apart, a folder of several WebDataset tars."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.photos = sorted(os.listdir(COCO))[:4]
        cls.dir = os.path.join(cls.tmp, "m")
        os.makedirs(cls.dir)
        for p in cls.photos:
            shutil.copy(os.path.join(COCO, p), cls.dir)

    def captions_by_source(self, out):
        return [(s["source"].decode("utf-8"), s["captions"]) for s in u.ShardSet(out).samples]

    def test_csv_quoted_newlines_and_quotes(self):
        p = self.photos
        raw = os.path.join(self.dir, "quoted.csv")
        with open(raw, "w", encoding="utf-8", newline="") as f:
            f.write('image,text\r\n')
            f.write('%s,"two\r\nlines, and ""quotes"""\r\n' % p[0])
            f.write('%s,plain\r\n' % p[1])
        out = os.path.join(self.tmp, "quoted")
        u.build(raw, out)
        self.assertEqual(self.captions_by_source(out),
                         [(p[0], [b'two\r\nlines, and "quotes"']), (p[1], [b"plain"])])

    def test_csv_with_byte_order_mark(self):
        p = self.photos
        raw = os.path.join(self.dir, "bom.csv")
        with open(raw, "w", encoding="utf-8-sig", newline="") as f:  # as Excel writes "CSV UTF-8"
            f.write("image,caption\n%s,first\n%s,second\n" % (p[0], p[1]))
        out = os.path.join(self.tmp, "bom")
        u.build(raw, out)
        self.assertEqual(self.captions_by_source(out), [(p[0], [b"first"]), (p[1], [b"second"])])

    def test_jsonl_lines_of_one_image_far_apart(self):
        p = self.photos
        raw = os.path.join(self.dir, "apart.jsonl")
        rows = [(p[0], "a0"), (p[1], "b0"), (p[2], "c0"), (p[0], "a1"), (p[1], "b1"), (p[0], "a2")]
        with open(raw, "w") as f:
            for image, text in rows:
                f.write(json.dumps({"image": image, "text": text}) + "\n")
        out = os.path.join(self.tmp, "apart")
        u.build(raw, out)
        self.assertEqual(self.captions_by_source(out),
                         [(p[0], [b"a0", b"a1", b"a2"]), (p[1], [b"b0", b"b1"]), (p[2], [b"c0"])])

    def test_folder_of_webdataset_tars(self):
        tars = os.path.join(self.tmp, "tars")
        os.makedirs(tars)
        for t, chunk in enumerate((self.photos[:2], self.photos[2:])):
            with tarfile.open(os.path.join(tars, "part-%05d.tar" % t), "w") as tar:
                for p in chunk:
                    stem = os.path.splitext(p)[0]
                    tar.add(os.path.join(COCO, p), arcname=stem + ".jpg")
                    data = ("caption of " + stem).encode()
                    info = tarfile.TarInfo(stem + ".txt")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        out = os.path.join(self.tmp, "tars_out")
        u.build(tars, out)
        got = [(stem_of(s), c) for s, c in self.captions_by_source(out)]
        want = [(os.path.splitext(p)[0], [("caption of " + os.path.splitext(p)[0]).encode()])
                for p in self.photos]
        self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main(verbosity=2)
