#!/usr/bin/python3
"""tokenizer_bench.sh's measurements (see there): CLIP BPE speed against the Python reference,
and the peak RSS of builds with a trained tokenizer at two sizes.

  tokenizer_measure.py BUILD WORK SHARED CAPTIONS SIZES
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import build_scale_measure as scale  # noqa: E402  (make_manifest, run_measured)

CLIP_GZ = os.path.join(ROOT, "tests", "data", "tokenizers", "bpe_simple_vocab_16e6.txt.gz")
REFERENCE = os.path.join(ROOT, "tests", "e2e", "tokenizers", "clip_reference.py")


def captions_of(shared, n):
    """n captions: the real sets' captions, each with its number (so that words vary)."""
    real = []
    for name in sorted(os.listdir(os.path.join(shared, "data"))):
        path = os.path.join(shared, "data", name, "captions.jsonl")
        if os.path.exists(path):
            real += [json.loads(l)["text"] for l in open(path, encoding="utf-8") if l.strip()]
    return ["%s (photo %d)" % (real[i % len(real)], i) for i in range(n)]


def speed(mmpack, shared, n, rounds=3):
    """Captions per CPU-second of encoding alone (both sides time their tokenizing threads'
    CPU, not wall time, which on a shared machine measures the neighbours), best of `rounds`
    alternating runs of each."""
    captions = captions_of(shared, n)
    data = "".join(json.dumps(c) + "\n" for c in captions).encode("utf-8")
    ref_rate = our_rate = 0.0
    same = True
    for _ in range(rounds):
        ref = subprocess.run(["/usr/bin/python3", REFERENCE, CLIP_GZ, "--time"], input=data,
                             capture_output=True, check=True)
        ours = subprocess.run([mmpack, "tokenize", "--tokenizer", CLIP_GZ, "--threads", "1"],
                              input=data, capture_output=True, check=True)
        same = same and ([json.loads(l) for l in ref.stdout.decode().splitlines()] ==
                         [json.loads(l) for l in ours.stdout.decode().splitlines()])
        ref_rate = max(ref_rate, float(ref.stderr.decode().split("(")[1].split()[0]))
        our_rate = max(our_rate, float(ours.stderr.decode().split("(")[1].split()[0]))
    ratio = our_rate / ref_rate
    print("speed: %d captions, best of %d: simple_tokenizer.py %.0f captions/CPU-s, mmpack "
          "tokenize (one thread) %.0f captions/CPU-s: %.1fx (target >= 20x): %s; ids %s" %
          (n, rounds, ref_rate, our_rate, ratio, "met" if ratio >= 20 else "MISSED",
           "equal" if same else "DIFFER"), flush=True)
    return ratio >= 20 and same


def memory(mmpack, work, shared, sizes):
    coco = os.path.join(shared, "data", "coco-cc")
    figures = []
    for lines in sizes:
        manifest = scale.make_manifest(work, coco, lines)
        out = os.path.join(work, "out_%d" % lines)
        subprocess.run(["rm", "-rf", out], check=True)
        wall, cpu, rss, text = scale.run_measured(
            [mmpack, "build", manifest, "-o", out, "--compression", "none", "--image-size", "32",
             "--samples-per-shard", "10000", "--threads", "2"])
        trained = [l for l in text.splitlines() if "training a SentencePiece" in l]
        figures.append(rss)
        print("memory: %7d captions, trained tokenizer: peak RSS %6.1f MB (%.2fx)  %.0f s  [%s]" %
              (lines, rss, rss / figures[0], wall, trained[0].split(": ", 1)[1] if trained else "?"),
              flush=True)
        subprocess.run(["rm", "-rf", out], check=True)
    ratio = figures[-1] / figures[0]
    print("memory: %d captions at %.2fx the peak RSS of %d (target <= 1.3x): %s" %
          (sizes[-1], ratio, sizes[0], "met" if ratio <= 1.3 else "MISSED"))
    return ratio <= 1.3


def main():
    build, work, shared, n, sizes = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    mmpack = os.path.join(build, "bin", "mmpack")
    ok = speed(mmpack, shared, int(n))
    ok = memory(mmpack, work, shared, [int(s) for s in sizes.split(",")]) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
