#!/usr/bin/python3
"""End-to-end: `mmpack build` on more hostile inputs, beyond build_hostile_test.py.

Each case is one that once hung, crashed, failed the whole build or wrote a set that
`mmpack verify` rejects: symlink loops in a folder of pairs, a FIFO or a device named in a
manifest, a 50 GB sparse image file, file and tar member names that are not UTF-8, invalid UTF-8 (raw bytes and lone
surrogate escapes) in COCO JSON and JSONL, a sparse tar member declaring a 60 GB hole, an
unterminated quote in a CSV, CSV headers in other case or padded, and a --vocab-size too
small for the captions' characters; and `mmpack verify` on a set whose index names a FIFO or
a device. The rule for each: the bad sample is skipped with its
reason in report.json, every good sample arrives intact (captions byte-for-byte), the set
verifies, and mmpack returns within seconds with bounded memory.
"""

import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

COCO = os.path.join(u.DATA_DIR, "coco-cc", "images")

# Seconds and bytes of address space one mmpack call here may use: a hang or an unbounded
# read fails the test quickly instead of stalling ctest or exhausting a shared machine.
QUICK_S = 60
ADDRESS_SPACE = 6 << 30


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def mmpack(*args):
    """`mmpack ARGS` under QUICK_S seconds and ADDRESS_SPACE bytes; returns a u.Run."""
    args = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args]
    try:
        proc = subprocess.run([u.MMPACK] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=QUICK_S, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        raise AssertionError("mmpack %s did not finish in %d s (hang)" % (" ".join(args), QUICK_S))
    return u.Run(args, proc)


def build(raw, out, *extra, tokenizer=u.ALBERT):
    """A build that must succeed and whose set `mmpack verify` must accept; returns ShardSet."""
    args = ["build", raw, "-o", out, "--threads", 2, "--compression-level", 1]
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    if tokenizer == u.ALBERT:
        args += ["--lowercase"]
    run = mmpack(*(args + list(extra)))
    if run.rc != 0:
        raise AssertionError("build failed: " + str(run))
    check = mmpack("verify", out)
    if check.rc != 0:
        raise AssertionError("verify rejects what build wrote: " + str(check))
    return u.ShardSet(out)


def photo(i):
    return os.path.join(COCO, sorted(os.listdir(COCO))[i])


def photo_bytes(i):
    with open(photo(i), "rb") as f:
        return f.read()


def add_member(tar, name, data, pax=None):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    if pax:
        info.pax_headers = pax
    tar.addfile(info, io.BytesIO(data))


def captions_by_source(shards):
    return {s["source"]: s["captions"] for s in shards.samples}


def dropped_by_source(shards):
    return {d["source"]: d for d in shards.report["dropped"]}


class SymlinkLoops(u.TempDirTest):
    """A folder of pairs holding a link to its parent, a link to its root and a link to
    itself: every pair is read once, the build ends (it recursed without end before)."""

    def test_each_pair_once_and_the_build_ends(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(os.path.join(raw, "a", "b"))
        for i, key in enumerate(("one", "a/two", "a/b/three")):
            shutil.copy(photo(i), os.path.join(raw, key + ".jpg"))
            with open(os.path.join(raw, key + ".txt"), "w") as f:
                f.write("caption of " + key)
        os.symlink("..", os.path.join(raw, "a", "b", "up"))
        os.symlink(raw, os.path.join(raw, "a", "root"))
        os.symlink("self.jpg", os.path.join(raw, "self.jpg"))  # ELOOP on every stat
        with open(os.path.join(raw, "self.txt"), "w") as f:
            f.write("the image is a link to itself")
        s = build(raw, os.path.join(self.tmp, "out"))
        self.assertEqual(captions_by_source(s), {
            b"one.jpg": [b"caption of one"], b"a/two.jpg": [b"caption of a/two"],
            b"a/b/three.jpg": [b"caption of a/b/three"]})
        self.assertIn("self.txt", dropped_by_source(s))


class SpecialFilesInManifest(u.TempDirTest):
    """A manifest naming a FIFO (open blocked for ever) and a character device (read without
    end): both skipped as unreadable, the good lines built."""

    def test_fifo_and_device_are_skipped(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        shutil.copy(photo(0), os.path.join(raw, "good.jpg"))
        shutil.copy(photo(1), os.path.join(raw, "last.jpg"))
        os.mkfifo(os.path.join(raw, "fifo.jpg"))
        rows = [("good.jpg", "good"), ("fifo.jpg", "a FIFO"), ("/dev/zero", "a device"),
                ("last.jpg", "last")]
        with open(os.path.join(raw, "m.jsonl"), "w") as f:
            for image, text in rows:
                f.write(json.dumps({"image": image, "text": text}) + "\n")
        s = build(os.path.join(raw, "m.jsonl"), os.path.join(self.tmp, "out"))
        self.assertEqual(captions_by_source(s), {b"good.jpg": [b"good"], b"last.jpg": [b"last"]})
        dropped = dropped_by_source(s)
        for source in ("fifo.jpg", "/dev/zero"):
            self.assertEqual(dropped[source]["reason"], "unreadable", dropped)
            self.assertIn("not a regular file", dropped[source]["detail"])


class HugeFiles(u.TempDirTest):
    """A 50 GB sparse file named .jpg (a real JPEG at its start, zeros after) and one of
    zeros named .png: read whole before, std::bad_alloc failed the build (or the machine ran
    out of memory). Now each is file_too_large from its size, before a byte is read."""

    def test_huge_files_dropped_from_their_size(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        shutil.copy(photo(0), os.path.join(raw, "good.jpg"))
        with open(os.path.join(raw, "huge_photo.jpg"), "wb") as f:
            f.write(photo_bytes(1))
            f.truncate(50 << 30)
        with open(os.path.join(raw, "zeros.png"), "wb") as f:
            f.truncate(50 << 30)
        with open(os.path.join(raw, "m.jsonl"), "w") as f:
            for image in ("good.jpg", "huge_photo.jpg", "zeros.png"):
                f.write(json.dumps({"image": image, "text": "caption of " + image}) + "\n")
        s = build(os.path.join(raw, "m.jsonl"), os.path.join(self.tmp, "out"))
        self.assertEqual(captions_by_source(s), {b"good.jpg": [b"caption of good.jpg"]})
        dropped = dropped_by_source(s)
        for source in ("huge_photo.jpg", "zeros.png"):
            self.assertEqual(dropped[source]["reason"], "file_too_large", dropped)


class HugeCaptionFile(u.TempDirTest):
    """A folder pair whose .txt is a 50 GB sparse file: read whole before (std::bad_alloc
    failed the build); now that pair is file_too_large from the file's size."""

    def test_huge_caption_file_dropped(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        for i, key in enumerate(("good", "huge")):
            shutil.copy(photo(i), os.path.join(raw, key + ".jpg"))
        with open(os.path.join(raw, "good.txt"), "w") as f:
            f.write("good")
        with open(os.path.join(raw, "huge.txt"), "wb") as f:
            f.write(b"a caption, then 50 GB of zeros")
            f.truncate(50 << 30)
        s = build(raw, os.path.join(self.tmp, "out"))
        self.assertEqual(captions_by_source(s), {b"good.jpg": [b"good"]})
        self.assertEqual(dropped_by_source(s)["huge.txt"]["reason"], "file_too_large", s.report)


class NonUtf8Names(u.TempDirTest):
    """File and tar member names in Latin-1 cannot be stored as UTF-8 sources and keys: the
    sample is skipped as invalid_utf8 (build wrote them and verify then rejected the set)."""

    def test_folder_of_pairs(self):
        raw = os.path.join(self.tmp, "files")
        os.makedirs(raw)
        shutil.copy(photo(0), os.path.join(raw, "good.jpg"))
        with open(os.path.join(raw, "good.txt"), "w") as f:
            f.write("good")
        shutil.copy(photo(1), os.fsencode(raw) + b"/caf\xe9.jpg")
        with open(os.fsencode(raw) + b"/caf\xe9.txt", "w") as f:
            f.write("a Latin-1 file name")
        s = build(raw, os.path.join(self.tmp, "out_files"))
        self.assertEqual(captions_by_source(s), {b"good.jpg": [b"good"]})
        self.assertEqual([d["reason"] for d in s.report["dropped"]], ["invalid_utf8"])
        self.assertIn("not valid UTF-8", s.report["dropped"][0]["detail"])

    def test_tar_members(self):
        tar_path = os.path.join(self.tmp, "latin1.tar")
        with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as tar:
            add_member(tar, "caf\u00e9.jpg", photo_bytes(0))
            add_member(tar, "caf\u00e9.txt", b"a Latin-1 member name")
            add_member(tar, "ok.jpg", photo_bytes(1))
            add_member(tar, "ok.txt", b"ok")
        s = build(tar_path, os.path.join(self.tmp, "out_tar"))
        self.assertEqual(captions_by_source(s), {b"latin1.tar:ok.jpg": [b"ok"]})
        self.assertEqual([d["reason"] for d in s.report["dropped"]], ["invalid_utf8"])


class FourPhotos(u.TempDirTest):
    """A temp dir with raw/p0.jpg .. p3.jpg, four real coco-cc photos, for manifests to name."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.raw = os.path.join(cls.tmp, "raw")
        os.makedirs(cls.raw)
        for i in range(4):
            shutil.copy(photo(i), os.path.join(cls.raw, "p%d.jpg" % i))


class InvalidTextInJson(FourPhotos):
    """One caption with a raw Latin-1 byte and one with a lone surrogate escape ("\\ud800",
    which no UTF-8 can hold): in COCO JSON they failed the whole build, in JSONL the escape
    dropped the line as 'not a JSON object'. Now each is that caption's invalid_utf8."""

    def check(self, s):
        self.assertEqual(captions_by_source(s), {
            b"p0.jpg": ["good zero".encode()], b"p1.jpg": ["kept: caf\u00e9".encode()],
            b"p3.jpg": ["good three \U0001F600".encode()]})
        self.assertEqual(s.report["dropped_by_reason"], {"invalid_utf8": 1}, s.report)
        self.assertEqual(dropped_by_source(s)["p2.jpg"]["reason"], "invalid_utf8")
        self.assertEqual(s.report["dropped_captions_by_reason"], {"invalid_utf8": 3}, s.report)

    def test_coco(self):
        images = [{"id": i, "file_name": "p%d.jpg" % i} for i in range(4)]
        anns = [(0, "good zero"), (1, "RAWBYTE"), (1, "kept: caf\u00e9"), (2, "ESCAPE"),
                (2, "LOWESCAPE"), (3, "good three \U0001F600")]
        doc = json.dumps({"images": images, "annotations": [
            {"id": k, "image_id": i, "caption": c} for k, (i, c) in enumerate(anns)]},
            ensure_ascii=False).encode("utf-8")
        doc = doc.replace(b"RAWBYTE", b"caf\xe9 latin-1").replace(b"LOWESCAPE", b"x \\udc00 y")
        doc = doc.replace(b"ESCAPE", b"lone \\ud800 high")
        self.check(build(self.write(doc), os.path.join(self.tmp, "out_coco")))

    def test_coco_file_names(self):
        """An invalid byte or a lone surrogate escape in file_name: that image is invalid_utf8
        (was missing_file, and its annotations 'unknown image_id')."""
        images = [{"id": 0, "file_name": "p0.jpg"}, {"id": 1, "file_name": "RAWNAME.jpg"},
                  {"id": 2, "file_name": "ESCNAME.jpg"}]
        anns = [{"image_id": i, "caption": "caption %d" % i} for i in (0, 1, 2, 1)]
        doc = json.dumps({"images": images, "annotations": anns}).encode()
        doc = doc.replace(b"RAWNAME", b"caf\xe9").replace(b"ESCNAME", b"x\\udc00")
        s = build(self.write(doc, "names.json"), os.path.join(self.tmp, "out_coco_names"))
        self.assertEqual(captions_by_source(s), {b"p0.jpg": [b"caption 0"]})
        self.assertEqual(s.report["dropped_by_reason"], {"invalid_utf8": 2}, s.report)

    def test_jsonl_image_paths(self):
        lines = [b'{"image": "p0.jpg", "text": "good"}', b'{"image": "caf\xe9.jpg", "text": "x"}',
                 b'{"image": "x\\ud800.jpg", "text": "y"}']
        s = build(self.write(b"\n".join(lines) + b"\n", "paths.jsonl"),
                  os.path.join(self.tmp, "out_jsonl_paths"))
        self.assertEqual(captions_by_source(s), {b"p0.jpg": [b"good"]})
        self.assertEqual(s.report["dropped_by_reason"], {"invalid_utf8": 2}, s.report)

    def write(self, doc, name="captions.json"):
        path = os.path.join(self.raw, name)
        with open(path, "wb") as f:
            f.write(doc)
        return path

    def test_jsonl(self):
        lines = [b'{"image": "p0.jpg", "text": "good zero"}',
                 b'{"image": "p1.jpg", "text": "caf\xe9 latin-1"}',
                 '{"image": "p1.jpg", "text": "kept: caf\u00e9"}'.encode(),
                 b'{"image": "p2.jpg", "text": "lone \\ud800 high"}',
                 b'{"image": "p2.jpg", "text": "x \\udc00 y"}',
                 b'{"image": "p3.jpg", "text": "good three \\ud83d\\ude00"}']
        path = os.path.join(self.raw, "m.jsonl")
        with open(path, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        self.check(build(path, os.path.join(self.tmp, "out_jsonl")))


class SparseTarMember(u.TempDirTest):
    """PAX sparse members (GNU.sparse 0.1) declaring a 60 GB file with 10 bytes of data, as
    a caption and as an image: mmpack allocated the hole (std::bad_alloc, build failed)."""

    def test_sparse_members_skipped(self):
        sparse = {"GNU.sparse.major": "0", "GNU.sparse.minor": "1",
                  "GNU.sparse.realsize": "60000000000", "GNU.sparse.map": "59999999990,10"}
        path = os.path.join(self.tmp, "sparse.tar")
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
            add_member(tar, "a.jpg", photo_bytes(0))
            add_member(tar, "a.txt", b"good first")
            add_member(tar, "b.txt", b"0123456789", dict(sparse, **{"GNU.sparse.name": "b.txt"}))
            add_member(tar, "b.jpg", photo_bytes(1))
            add_member(tar, "c.jpg", b"0123456789", dict(sparse, **{"GNU.sparse.name": "c.jpg"}))
            add_member(tar, "c.txt", b"the image is sparse")
            add_member(tar, "d.jpg", photo_bytes(2))
            add_member(tar, "d.txt", b"good last")
        s = build(path, os.path.join(self.tmp, "out"))
        self.assertEqual(captions_by_source(s), {b"sparse.tar:a.jpg": [b"good first"],
                                                 b"sparse.tar:d.jpg": [b"good last"]})
        dropped = dropped_by_source(s)
        self.assertIn(dropped["sparse.tar:c.jpg"]["reason"], {"unreadable", "file_too_large"},
                      dropped)
        self.assertTrue(any(src.startswith("sparse.tar:b") for src in dropped), dropped)


class CsvDetails(FourPhotos):
    """An unterminated quote loses only its own row (the whole build failed, or a stray quote
    swallowed the rows up to the next quote into one caption); header names are matched
    without regard to case and surrounding spaces; a header with ';' and no ',' is read as
    ';'-separated (the build failed: no image column)."""

    def write(self, name, text):
        path = os.path.join(self.raw, name)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return path

    def test_unterminated_quote_loses_only_its_row(self):
        path = self.write("unterminated.csv", 'image,text\r\np0.jpg,"two\r\nlines"\r\n'
                          'p1.jpg,"never closed\r\np2.jpg,after the bad row\r\n'
                          'p3.jpg,"last, quoted"\r\n')
        s = build(path, os.path.join(self.tmp, "out_unterminated"))
        self.assertEqual(captions_by_source(s), {
            b"p0.jpg": [b"two\r\nlines"], b"p2.jpg": [b"after the bad row"],
            b"p3.jpg": [b"last, quoted"]})
        dropped = dropped_by_source(s)
        self.assertEqual(dropped["unterminated.csv:4"]["reason"], "invalid_manifest_line", dropped)
        self.assertIn("quote", dropped["unterminated.csv:4"]["detail"])
        # no quote after the stray one: the field ran to the end of the file
        path = self.write("open_to_the_end.csv", 'image,text\np0.jpg,fine\np1.jpg,"open\n'
                          'p2.jpg,after\np3.jpg,last\n')
        s = build(path, os.path.join(self.tmp, "out_open"))
        self.assertEqual(captions_by_source(s), {b"p0.jpg": [b"fine"], b"p2.jpg": [b"after"],
                                                 b"p3.jpg": [b"last"]})
        self.assertEqual(list(dropped_by_source(s)), ["open_to_the_end.csv:3"], s.report)

    def test_header_case_and_spaces(self):
        path = self.write("header.csv", " Image_Path , Caption \np0.jpg,upper case header\n")
        s = build(path, os.path.join(self.tmp, "out_header"))
        self.assertEqual(captions_by_source(s), {b"p0.jpg": [b"upper case header"]})

    def test_semicolon_separated(self):
        path = self.write("semicolon.csv", 'image;text\np0.jpg;"a caption, with a comma"\n'
                          'p1.jpg;plain; with a semicolon\n')
        s = build(path, os.path.join(self.tmp, "out_semicolon"))
        self.assertEqual(captions_by_source(s), {b"p0.jpg": [b"a caption, with a comma"],
                                                 b"p1.jpg": [b"plain"]})


class TrainOnLongCaptions(u.TempDirTest):
    """No --tokenizer and every caption longer than sentencepiece's 4192-byte sentence limit
    (dense captions): the trainer skipped them all and failed ("!sentences_.empty()"); now
    long captions are fed to it in pieces, and the captions are stored whole."""

    def test_trains_and_keeps_captions_whole(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        captions = [" ".join("word%d" % (k % 13) for k in range(900)),
                    "猫が窓辺に座っている。" * 200, "x" * 6000]
        with open(os.path.join(raw, "m.jsonl"), "w") as f:
            for i, c in enumerate(captions):
                shutil.copy(photo(i), os.path.join(raw, "p%d.jpg" % i))
                f.write(json.dumps({"image": "p%d.jpg" % i, "text": c}, ensure_ascii=False) + "\n")
        out = os.path.join(self.tmp, "out")
        s = build(os.path.join(raw, "m.jsonl"), out, "--vocab-size", 64, tokenizer=None)
        self.assertEqual([x["captions"] for x in s.samples], [[c.encode()] for c in captions])
        tok = u.Tokenizer(os.path.join(out, "tokenizer.model"))
        for x in s.samples:
            self.assertEqual(x["tokens"][0], tok.expected(x["captions"][0], 77)[0])
            self.assertNotIn(tok.sp.unk_id(), x["tokens"][0][1:-1])


class VerifyHostileSet(u.TempDirTest):
    """`mmpack verify` on a set whose index.json names a FIFO or /dev/zero as the tokenizer,
    or whose index.json is a FIFO: it hung (blocked open, endless read); now it fails at once
    naming the file. A FIFO shard was "missing"; it is "not a regular file" now."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        raw = os.path.join(cls.tmp, "raw")
        os.makedirs(raw)
        shutil.copy(photo(0), os.path.join(raw, "a.jpg"))
        with open(os.path.join(raw, "a.txt"), "w") as f:
            f.write("one sample")
        cls.good = os.path.join(cls.tmp, "good")
        build(raw, cls.good)

    def copy(self, name):
        out = os.path.join(self.tmp, name)
        shutil.copytree(self.good, out)
        with open(os.path.join(out, "index.json")) as f:
            return out, json.load(f)

    def check_fails_naming(self, out, name, why="not a regular file"):
        run = mmpack("verify", out)
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertIn(name, run.stderr + run.stdout)
        self.assertIn(why, run.stderr + run.stdout)

    def test_tokenizer_is_a_fifo_or_a_device(self):
        for name, target in (("fifo", "tokenizer.fifo"), ("device", "/dev/zero")):
            out, index = self.copy("tok_" + name)
            if name == "fifo":
                os.mkfifo(os.path.join(out, target))
            index["tokenizer"]["file"] = target
            with open(os.path.join(out, "index.json"), "w") as f:
                json.dump(index, f)
            # A path outside the set's folder is refused before it is opened.
            self.check_fails_naming(
                out, target, "not a regular file" if name == "fifo" else "outside the set's folder")

    def test_index_is_a_fifo(self):
        out, _ = self.copy("index_fifo")
        os.remove(os.path.join(out, "index.json"))
        os.mkfifo(os.path.join(out, "index.json"))
        for command in ("verify", "info"):
            run = mmpack(command, out)
            self.assertNotEqual(run.rc, 0, str(run))
            # the one message of mm/internal/file.h for what is not a regular file
            self.assertIn("index.json: not a regular file", run.stderr)

    def test_shard_is_a_fifo(self):
        out, index = self.copy("shard_fifo")
        shard = os.path.join(out, index["shards"][0]["file"])
        os.remove(shard)
        os.mkfifo(shard)
        self.check_fails_naming(out, index["shards"][0]["file"])


class Utf16Manifest(u.TempDirTest):
    """A JSONL or CSV manifest saved as UTF-16: one line saying so (was: every line an
    invalid_manifest_line, or a header "without an image column")."""

    def test_says_utf16(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        shutil.copy(photo(0), os.path.join(raw, "a.jpg"))
        for name, text in (("m.jsonl", '{"image": "a.jpg", "text": "utf-16"}\r\n'),
                           ("m.csv", "image,text\r\na.jpg,utf-16\r\n")):
            with open(os.path.join(raw, name), "wb") as f:
                f.write(text.encode("utf-16"))
            run = mmpack("build", os.path.join(raw, name), "-o", os.path.join(self.tmp, name),
                         "--tokenizer", u.ALBERT)
            self.assertNotEqual(run.rc, 0, str(run))
            self.assertIn("UTF-16", run.stderr)
            self.assertEqual(len(run.stderr.strip().splitlines()), 1, run.stderr)


class VocabTooSmall(u.TempDirTest):
    """--vocab-size below the number of characters the captions need: one clear line naming
    the size that works (was sentencepiece's internal check text), and that size builds."""

    def test_says_the_size_that_works(self):
        raw = os.path.join(self.tmp, "raw")
        os.makedirs(raw)
        captions = ["一只猫坐在窗台上，看着外面的雨。", "قطة تجلس على حافة النافذة",
                    "बिल्ली खिड़की पर बैठी है", "แมวนั่งอยู่บนขอบหน้าต่าง", "Кошка сидит на подоконнике"]
        with open(os.path.join(raw, "m.jsonl"), "w") as f:
            for i, c in enumerate(captions):
                shutil.copy(photo(i), os.path.join(raw, "p%d.jpg" % i))
                f.write(json.dumps({"image": "p%d.jpg" % i, "text": c}, ensure_ascii=False) + "\n")
        out = os.path.join(self.tmp, "out")
        run = mmpack("build", os.path.join(raw, "m.jsonl"), "-o", out, "--vocab-size", 20,
                     "--compression-level", 1)
        self.assertNotEqual(run.rc, 0, str(run))
        self.assertNotIn("trainer_interface", run.stderr)
        m = re.search(r"--vocab-size (\d+) or more", run.stderr)
        self.assertIsNotNone(m, str(run))
        self.assertFalse(os.path.exists(out))
        s = build(os.path.join(raw, "m.jsonl"), out, "--vocab-size", m.group(1), tokenizer=None)
        self.assertEqual([c for s_ in s.samples for c in s_["captions"]],
                         [c.encode() for c in captions])


if __name__ == "__main__":
    unittest.main(verbosity=2)
