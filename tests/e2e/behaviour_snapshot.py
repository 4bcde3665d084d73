#!/usr/bin/python3
"""A snapshot of what `mmpack build` does, to prove that a refactor changes nothing.

    behaviour_snapshot.py record --mmpack BIN --out SNAP [--only REGEX] [--work DIR]
    behaviour_snapshot.py compare SNAP_BEFORE SNAP_AFTER

`record` runs BIN (an `mmpack` binary) in every build mode (fresh with a trained, a given and no
tokenizer; --codec jpeg; --dedup; --keep-fields; filters; --part I/N run as N processes, one
after another and all at once; --resume after a SIGKILL and with nothing to resume; --append)
on every set of ../shared/data and of examples/data (plus a CSV and a WebDataset tar made from
them), and through a list of refusals (bad options, missing input, an OUT that exists...). For
each case it writes SNAP/CASE.json: the command, every process's exit code, stdout and stderr
(timings, rates, pids, hosts and dates masked; progress lines dropped), the SHA-256 of every file
the build left under the case's folder, and index.json and report.json as text. All paths live
under one fixed work folder (default /tmp/mmpack-snapshot-work), so two records of the same
behaviour are identical file for file. `compare` prints each case that differs and exits 1 when
one does.

Not a ctest: it takes about a quarter of an hour on two cores, and what it compares is two
builds of the code, not the code against a stored figure. Run it at the commit before a change
and after it (Debian's /usr/bin/python3; no third-party module).
"""

import argparse
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED_DIR = os.environ.get("MM_SHARED_DIR", os.path.join(SOURCE_DIR, "..", "shared"))
if not os.path.isdir(SHARED_DIR):
    SHARED_DIR = "/work/shared"
DATA = os.path.join(SHARED_DIR, "data")
ALBERT = os.path.join(SHARED_DIR, "tokenizers", "albert-30k-clean.model")
CLIP_BPE = os.path.join(SOURCE_DIR, "tests", "data", "tokenizers", "bpe_simple_vocab_16e6.txt.gz")
BERT_JSON = os.path.join(SOURCE_DIR, "tests", "data", "tokenizers", "bert-wiki.json")
EXAMPLES = os.path.join(SOURCE_DIR, "examples", "data", "coco-cc")

TIMEOUT_S = 600


# --- inputs -------------------------------------------------------------------------------------

def make_inputs(work):
    """The sets, by name: input path and a vocabulary size that their captions can train. The
    derived inputs (halves for --append, a CSV, a tar) are written under `work`/inputs."""
    sets = {
        "coco": (os.path.join(DATA, "coco-cc", "captions.jsonl"), 300),
        "coco_json": (os.path.join(DATA, "coco-cc", "captions_coco.json"), 300),
        "clipart": (os.path.join(DATA, "openclipart-pd", "captions.jsonl"), 300),
        "skimage": (os.path.join(DATA, "skimage-micro", "captions.jsonl"), 40),
        "ex_train": (os.path.join(EXAMPLES, "train.jsonl"), 300),
        "ex_val": (os.path.join(EXAMPLES, "val.jsonl"), 100),
    }
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    # A CSV of skimage-micro, with a score column (for --min-score) and absolute image paths.
    sk = os.path.join(DATA, "skimage-micro")
    lines = [json.loads(l) for l in open(os.path.join(sk, "captions.jsonl"), encoding="utf-8")]
    with open(os.path.join(inputs, "skimage.csv"), "w", encoding="utf-8") as f:
        f.write("image,text,score\n")
        for k, l in enumerate(lines):
            text = l["text"].replace('"', '""')
            f.write('%s,"%s",%d\n' % (os.path.join(sk, l["image"]), text, k % 4))
    sets["skimage_csv"] = (os.path.join(inputs, "skimage.csv"), 40)
    # A WebDataset tar of the first 20 coco-cc images (key.jpg + key.txt), fixed mtimes.
    coco = os.path.join(DATA, "coco-cc")
    lines = [json.loads(l) for l in open(os.path.join(coco, "captions.jsonl"), encoding="utf-8")]
    by_image = {}
    for l in lines:
        by_image.setdefault(l["image"], []).append(l["text"])
    tar_path = os.path.join(inputs, "coco-00000.tar")
    with tarfile.open(tar_path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for k, image in enumerate(sorted(by_image)[:20]):
            for name, data in (("%06d.jpg" % k, open(os.path.join(coco, image), "rb").read()),
                               ("%06d.txt" % k, by_image[image][0].encode("utf-8"))):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 1700000000
                tar.addfile(info, io.BytesIO(data))
    sets["coco_tar"] = (tar_path, 100)
    # Halves of each JSONL set for --append (absolute image paths, so they may live here).
    for name in ("coco", "clipart", "skimage", "ex_train", "ex_val"):
        path = sets[name][0]
        base = os.path.dirname(path)
        rows = [json.loads(l) for l in open(path, encoding="utf-8")]
        for row in rows:
            row["image"] = os.path.join(base, row["image"])
        half = len(rows) // 2
        for part, chunk in (("a", rows[:half]), ("b", rows[half:])):
            with open(os.path.join(inputs, "%s_%s.jsonl" % (name, part)), "w",
                      encoding="utf-8") as f:
                for row in chunk:
                    f.write(json.dumps(row) + "\n")
    return sets


# --- running ------------------------------------------------------------------------------------

MASKS = [
    (re.compile(r"\d+\.\d s \(\d+\.\d samples/s\)"), "T s (R samples/s)"),
    (re.compile(r"pid \d+"), "pid P"),
    (re.compile(r"on host \S+"), "on host H"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"), "DATE"),
    (re.compile(r"not started again in \d+ s"), "not started again in N s"),
]
PROGRESS = re.compile(r"^mmpack build: (part \d+ of \d+: )?\d+/\d+ samples \(")


def normalise(text, masks=()):
    out = []
    for line in text.splitlines():
        if PROGRESS.match(line):
            continue
        for pattern, repl in list(MASKS) + list(masks):
            line = pattern.sub(repl, line)
        out.append(line)
    return out


# A build in parts' claim and failure files name a pid, a host and a time (build/part_claim.h):
# only their presence is compared.
VOLATILE = re.compile(r"(^|/)\.parts/part-\d+-of-\d+\.(lock|failed)$")


def tree(folder):
    """{relative path: sha256 (or 'dir', 'link', 'volatile')} of everything under `folder`."""
    out = {}
    if not os.path.exists(folder):
        return out
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder) + "/"] = "dir"
        for n in files:
            p = os.path.join(root, n)
            if os.path.islink(p):
                out[os.path.relpath(p, folder)] = "link"
                continue
            rel = os.path.relpath(p, folder)
            out[rel] = ("volatile" if VOLATILE.search(rel)
                        else hashlib.sha256(open(p, "rb").read()).hexdigest())
    return dict(sorted(out.items()))


class Case:
    def __init__(self, name, root, mmpack):
        self.name = name
        self.root = root  # this case's folder: OUT and its siblings live here
        self.mmpack = mmpack
        self.steps = []
        os.makedirs(root)

    def out(self, name="out"):
        return os.path.join(self.root, name)

    def argv(self, args):
        return [self.mmpack] + [str(a) for a in args]

    def record(self, args, proc_rc, stdout, stderr, masks=()):
        self.steps.append({"args": [str(a) for a in args], "rc": proc_rc,
                           "stdout": normalise(stdout, masks),
                           "stderr": normalise(stderr, masks)})

    def run(self, *args, masks=()):
        p = subprocess.run(self.argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT_S)
        self.record(args, p.returncode, p.stdout.decode("utf-8", "replace"),
                    p.stderr.decode("utf-8", "replace"), masks)
        return p.returncode

    def run_together(self, arg_lists, delay=0.3):
        """Starts every command, `delay` seconds apart; records them in start order with their
        stderr reduced to the lines every run has (the interleaving is not behaviour)."""
        procs = []
        for args in arg_lists:
            procs.append((args, subprocess.Popen(self.argv(args), stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE)))
            time.sleep(delay)
        results = []
        for args, p in procs:
            out, err = p.communicate(timeout=TIMEOUT_S)
            results.append((args, p.returncode, out.decode(), err.decode()))
        lasts = sum("the last part to finish" in r[3] for r in results)
        self.steps.append({"together": [[str(a) for a in r[0]] for r in results],
                           "rcs": [r[1] for r in results], "last_part_count": lasts})

    def kill_after_checkpoints(self, args, count, sig=signal.SIGKILL):
        """Starts `args` and sends `sig` once the staging folder holds `count` checkpoints."""
        folder = self.out() + ".mmpack-partial/.resume"
        p = subprocess.Popen(self.argv(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + TIMEOUT_S
        while p.poll() is None and time.monotonic() < deadline:
            try:
                n = sum(x.startswith("checkpoint-") for x in os.listdir(folder))
            except FileNotFoundError:
                n = 0
            if n >= count:
                break
            time.sleep(0.002)
        killed = p.poll() is None
        if killed:
            p.send_signal(sig)
        _, err = p.communicate(timeout=TIMEOUT_S)
        self.steps.append({"killed": [str(a) for a in args], "killed_in_time": killed,
                           "rc": p.returncode if killed else "ended before the kill"})
        return killed

    def snapshot(self):
        files = tree(self.root)
        texts = {}
        for rel in files:
            if os.path.basename(rel) in ("index.json", "report.json"):
                texts[rel] = open(os.path.join(self.root, rel), encoding="utf-8").read()
        return {"name": self.name, "steps": self.steps, "files": files, "texts": texts}


# --- the cases ----------------------------------------------------------------------------------

RESUME_MASKS = [(re.compile(r"--resume: \d+ finished shard\(s\) kept \(\d+ samples\); going on "
                            r"from sample \d+"), "--resume: N finished shard(s) kept (M samples); "
                            "going on from sample K"),
                (re.compile(r"checkpoint-\d+"), "checkpoint-N"),
                (re.compile(r"shard-\d+\.h5"), "shard-N.h5")]


def build_cases(sets):
    """(name, function(case)) for every case, in a fixed order."""
    cases = []

    def add(name, fn):
        cases.append((name, fn))

    for set_name, (path, vocab) in sets.items():
        base = ["build", path, "--threads", "2", "--vocab-size", str(vocab)]

        def fresh(extra, base=base):
            return lambda c: c.run(*base, "-o", c.out(), *extra)

        add(set_name + "/trained", fresh([]))
        add(set_name + "/given", fresh(["--tokenizer", ALBERT, "--lowercase"]))
        add(set_name + "/none", fresh(["--tokenizer", "none"]))
        add(set_name + "/jpeg", fresh(["--codec", "jpeg", "--quality", "80", "--tokenizer", ALBERT,
                                       "--lowercase"]))
        add(set_name + "/jpeg_keep_ratio", fresh(["--codec", "jpeg", "--resize-mode", "keep-ratio",
                                                  "--max-size", "96", "--tokenizer", "none"]))
        add(set_name + "/dedup_exact", fresh(["--dedup", "exact", "--image-size", "64"]))
        add(set_name + "/dedup_near", fresh(["--dedup", "near", "--image-size", "64",
                                             "--tokenizer", "none", "--samples-per-shard", "7"]))
        add(set_name + "/small_shards", fresh(["--image-size", "48x32", "--resize-mode", "pad",
                                               "--background", "#102030", "--shard-size",
                                               "100000", "--compression", "none",
                                               "--tokenizer", ALBERT, "--lowercase",
                                               "--max-tokens", "8"]))
        add(set_name + "/filters", fresh(["--image-size", "64", "--min-size", "300",
                                          "--max-aspect", "1.6", "--min-tokens", "6",
                                          "--drop-long-captions", "--max-tokens", "16",
                                          "--tokenizer", ALBERT, "--normalize", "nfkc",
                                          "--lowercase", "--compression-level", "5"]))
        if path.endswith(".jsonl"):
            add(set_name + "/keep_fields", fresh(["--image-size", "64", "--keep-fields",
                                                  "license,source", "--tokenizer", "none"]))
        if path.endswith(".csv"):
            add(set_name + "/min_score", fresh(["--image-size", "64", "--min-score", "score=2",
                                                "--keep-fields", "score"]))

        def parts_in_turn(c, base=base, n=3):
            for i in range(n):
                c.run(*base, "-o", c.out(), "--samples-per-shard", "5", "--image-size", "64",
                      "--dedup", "exact", "--part", "%d/%d" % (i, n))

        add(set_name + "/parts_3_in_turn", parts_in_turn)

        def parts_together(c, base=base):
            c.run_together([[*base, "-o", c.out(), "--samples-per-shard", "5", "--image-size",
                             "64", "--part", "%d/3" % i] for i in (2, 1, 0)])

        add(set_name + "/parts_3_together", parts_together)

        def resume_after_kill(c, base=base):
            args = [*base, "-o", c.out(), "--samples-per-shard", "2", "--image-size", "64",
                    "--dedup", "exact"]
            c.kill_after_checkpoints(args, 2)
            c.run(*args, "--resume", masks=RESUME_MASKS)

        add(set_name + "/resume_after_kill", resume_after_kill)

        def resume_nothing(c, base=base):
            c.run(*base, "-o", c.out(), "--image-size", "64", "--resume")

        add(set_name + "/resume_nothing", resume_nothing)

    # --append: the first half built, the second appended (and once more: all duplicate keys).
    for name in ("coco", "clipart", "skimage", "ex_train", "ex_val"):
        vocab = sets[name][1]
        inputs = os.path.dirname(sets["skimage_csv"][0])
        a = os.path.join(inputs, name + "_a.jsonl")
        b = os.path.join(inputs, name + "_b.jsonl")

        def append(c, a=a, b=b, vocab=vocab, extra=()):
            c.run("build", a, "-o", c.out(), "--threads", "2", "--vocab-size", vocab,
                  "--image-size", "64", "--samples-per-shard", "9", *extra)
            c.run("build", b, "-o", c.out(), "--threads", "2", "--append", *extra)
            c.run("build", b, "-o", c.out(), "--threads", "2", "--append", *extra)

        add(name + "/append", append)
        add(name + "/append_dedup_none", lambda c, append=append: append(
            c, extra=("--dedup", "exact", "--tokenizer", "none")))
        add(name + "/append_jpeg", lambda c, append=append: append(
            c, extra=("--codec", "jpeg", "--keep-fields", "license")))

    coco = sets["coco"][0]
    skim = sets["skimage"][0]
    # Other tokenizer kinds.
    add("coco/clip_bpe", lambda c: c.run("build", coco, "-o", c.out(), "--threads", "2",
                                         "--tokenizer", CLIP_BPE, "--image-size", "32"))
    add("coco/tokenizer_json", lambda c: c.run("build", coco, "-o", c.out(), "--threads", "2",
                                               "--tokenizer", BERT_JSON, "--image-size", "32"))
    add("coco/quiet", lambda c: c.run("build", coco, "-o", c.out(), "-q", "--image-size", "32",
                                      "--tokenizer", "none"))
    add("coco/tokenizer_sample", lambda c: c.run("build", coco, "-o", c.out(), "--image-size",
                                                 "32", "--vocab-size", "200",
                                                 "--tokenizer-sample", "50"))

    # Refusals and failures: each leaves what it leaves (recorded by the snapshot of the folder).
    def refuse(name, *args):
        add("refuse/" + name, lambda c: c.run("build", *[a(c) if callable(a) else a
                                                         for a in args]))

    out = lambda c: c.out()  # noqa: E731
    refuse("missing_input", "/nonexistent/input.jsonl", "-o", out)
    refuse("no_output", skim)
    refuse("bad_image_size", skim, "-o", out, "--image-size", "12y")
    refuse("zero_image_size", skim, "-o", out, "--image-size", "0")
    refuse("bad_shard_size", skim, "-o", out, "--shard-size", "big")
    refuse("quality_without_jpeg", skim, "-o", out, "--quality", "80")
    refuse("compression_with_jpeg", skim, "-o", out, "--codec", "jpeg", "--compression", "zstd")
    refuse("keep_ratio_with_image_size", skim, "-o", out, "--codec", "jpeg", "--resize-mode",
           "keep-ratio", "--image-size", "64", "--max-size", "64")
    refuse("keep_ratio_raw", skim, "-o", out, "--resize-mode", "keep-ratio", "--max-size", "64")
    refuse("keep_ratio_no_max_size", skim, "-o", out, "--codec", "jpeg", "--resize-mode",
           "keep-ratio")
    refuse("max_size_center_crop", skim, "-o", out, "--max-size", "64")
    refuse("append_and_resume", skim, "-o", out, "--append", "--resume")
    refuse("append_and_overwrite", skim, "-o", out, "--append", "--overwrite")
    refuse("append_and_part", skim, "-o", out, "--append", "--part", "0/2")
    refuse("append_to_nothing", skim, "-o", out, "--append")
    refuse("part_out_of_range", skim, "-o", out, "--part", "3/2")
    refuse("part_malformed", skim, "-o", out, "--part", "01/2")
    refuse("part_more_than_samples", skim, "-o", out, "--part", "0/40", "--tokenizer", "none")
    refuse("none_with_min_tokens", skim, "-o", out, "--tokenizer", "none", "--min-tokens", "3")
    refuse("tokenizer_missing", skim, "-o", out, "--tokenizer", "/nonexistent.model")
    refuse("tokenizer_not_a_model", skim, "-o", out, "--tokenizer", skim)
    refuse("max_aspect_below_one", skim, "-o", out, "--max-aspect", "0.5")
    refuse("keep_fields_bad_name", skim, "-o", out, "--keep-fields", "a/b")
    refuse("min_score_malformed", skim, "-o", out, "--min-score", "score")
    refuse("image_field_on_coco_json", sets["coco_json"][0], "-o", out, "--image-field", "x")
    refuse("url_output", skim, "-o", "s3://bucket/set")
    refuse("bad_background", skim, "-o", out, "--background", "purple-ish")
    refuse("vocab_too_large", skim, "-o", out, "--vocab-size", "5000")
    refuse("bad_codec", skim, "-o", out, "--codec", "png")
    refuse("no_usable_sample", os.path.join(DATA, "skimage-micro", "images"), "-o", out)

    def exists_without_overwrite(c):
        os.makedirs(c.out())
        open(os.path.join(c.out(), "notes.txt"), "w").write("mine\n")
        c.run("build", skim, "-o", c.out(), "--tokenizer", "none")
        c.run("build", skim, "-o", c.out(), "--tokenizer", "none", "--overwrite")

    add("refuse/output_exists", exists_without_overwrite)

    def overwrite_a_set(c):
        c.run("build", skim, "-o", c.out(), "--tokenizer", "none", "--image-size", "32")
        c.run("build", skim, "-o", c.out(), "--tokenizer", "none", "--image-size", "40",
              "--overwrite")

    add("overwrite_a_set", overwrite_a_set)

    def append_other_options(c):
        c.run("build", skim, "-o", c.out(), "--tokenizer", "none", "--image-size", "32")
        c.run("build", coco, "-o", c.out(), "--tokenizer", "none", "--image-size", "40",
              "--append")
        c.run("build", coco, "-o", c.out(), "--tokenizer", ALBERT, "--image-size", "32",
              "--append")
        c.run("build", coco, "-o", c.out(), "--tokenizer", "none", "--image-size", "32",
              "--codec", "jpeg", "--append")

    add("refuse/append_other_options", append_other_options)

    def resume_other_options(c):
        args = ["build", coco, "-o", c.out(), "--threads", "2", "--samples-per-shard", "2",
                "--image-size", "64", "--tokenizer", "none"]
        c.kill_after_checkpoints(args, 2)
        c.run(*args[:-1], ALBERT, "--resume")
        c.run(*args, "--resume", masks=RESUME_MASKS)

    add("refuse/resume_other_options", resume_other_options)

    def interrupt_note(c):
        args = ["build", coco, "-o", c.out(), "--threads", "2", "--samples-per-shard", "2",
                "--image-size", "64", "--tokenizer", "none"]
        c.kill_after_checkpoints(args, 2, sig=signal.SIGINT)
        c.run(*args, masks=RESUME_MASKS)

    add("interrupted_then_built_without_resume", interrupt_note)
    return cases


# --- commands -----------------------------------------------------------------------------------

def record(args):
    mmpack = os.path.abspath(args.mmpack)
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.makedirs(args.out, exist_ok=True)
    sets = make_inputs(work)
    only = re.compile(args.only) if args.only else None
    started = time.monotonic()
    for name, fn in build_cases(sets):
        if only and not only.search(name):
            continue
        t0 = time.monotonic()
        case = Case(name, os.path.join(work, "cases", name.replace("/", "__")), mmpack)
        fn(case)
        snap = case.snapshot()
        with open(os.path.join(args.out, name.replace("/", "__") + ".json"), "w") as f:
            json.dump(snap, f, indent=1, sort_keys=True)
        shutil.rmtree(case.root)
        rcs = [s.get("rc", s.get("rcs")) for s in snap["steps"]]
        print("%-40s %5.1f s  rc %s" % (name, time.monotonic() - t0, rcs), flush=True)
    print("recorded in %.0f s into %s" % (time.monotonic() - started, args.out))


def compare(args):
    a_names = {n for n in os.listdir(args.before) if n.endswith(".json")}
    b_names = {n for n in os.listdir(args.after) if n.endswith(".json")}
    differ = 0
    for n in sorted(a_names ^ b_names):
        print("only in %s: %s" % (args.before if n in a_names else args.after, n))
        differ += 1
    for n in sorted(a_names & b_names):
        a = open(os.path.join(args.before, n)).read().splitlines()
        b = open(os.path.join(args.after, n)).read().splitlines()
        if a != b:
            differ += 1
            print("DIFFERS: " + n)
            for line in list(difflib.unified_diff(a, b, "before", "after", n=2, lineterm=""))[:60]:
                print("  " + line)
    print("compared %d cases: %s" % (len(a_names & b_names),
                                     "all identical" if differ == 0 else "%d differ" % differ))
    return 1 if differ else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record")
    r.add_argument("--mmpack", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--only", help="regex of case names")
    r.add_argument("--work", default="/tmp/mmpack-snapshot-work")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args()
    if args.command == "record":
        record(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
