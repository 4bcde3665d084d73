#!/usr/bin/python3
"""h5py round trip of an mmpack shard set: what h5py reads is what mmpack wrote.

Usage:
  /usr/bin/python3 h5py_roundtrip.py OUT [--expected EXPECTED.json] [--manifest captions.jsonl]
  /usr/bin/python3 h5py_roundtrip.py          (ctest: builds the real sets with MM_BIN_DIR/mmpack)

Needs HDF5_PLUGIN_PATH pointing at the zstd filter plugin (`eval "$(mmpack env)"`).

Always checked, for every shard listed in OUT/index.json:
  - h5py opens it; root attributes and dataset shapes agree with the index;
  - every image read by h5py through the filter plugin equals the raw chunk
    (Dataset.id.read_direct_chunk) decoded by the `zstd` command, an independent decoder;
  - caption/token offsets are consistent; keys are unique UTF-8 strings; captions decode as UTF-8.
With --expected (JSON written by the C++ writer test: per sample key, source, captions, token rows,
sizes, and a "pixels_file" of every sample's [H, W, 3] pixels in order): every value equals, bit
for bit.
With --manifest (the JSONL the set was built from: "image"/"text" lines): every sample's captions
are exactly the manifest's captions of its image, byte for byte, and its token ids are what the
set's tokenizer.model (sentencepiece) gives for them.
Exit status 0 when all holds; otherwise an AssertionError names the shard and sample.

Without OUT (as ctest runs it, env MM_BIN_DIR, MM_SHARED_DIR, HDF5_PLUGIN_PATH): builds
MM_SHARED_DIR/data/{coco-cc (zstd, 3 shards), skimage-micro (pad, none), openclipart-pd (pad,
none)} with the real `mmpack build`, checks each with `mmpack verify` and the round trip above
against its captions.jsonl, and checks that coco-cc built with --threads 1 and --threads 2 gives
byte-identical shards.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np


def zstd_decode(frame: bytes) -> bytes:
    """Decodes one zstd frame with the `zstd` command (not through HDF5)."""
    with tempfile.NamedTemporaryFile(suffix=".zst") as f:
        f.write(frame)
        f.flush()
        return subprocess.run(["zstd", "-d", "-c", "-q", f.name], check=True,
                              stdout=subprocess.PIPE).stdout


def as_str(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def read_set(out_dir):
    """Yields (shard name, samples) with each sample a dict of what h5py reads."""
    index = json.load(open(os.path.join(out_dir, "index.json"), encoding="utf-8"))
    assert index["format"] == "mmpack-shard", index["format"]
    assert index["format_version"] == 1, index["format_version"]
    height, width = index["image"]["height"], index["image"]["width"]
    codec = index["compression"]["codec"]
    total = 0
    for i, entry in enumerate(index["shards"]):
        name = entry["file"]
        assert name == "shard-%06d.h5" % i, name
        with h5py.File(os.path.join(out_dir, name), "r") as f:
            where = name
            attrs = f.attrs
            assert as_str(attrs["format"]) == "mmpack-shard", where
            assert int(attrs["format_version"]) == 1, where
            assert int(attrs["shard_index"]) == i, where
            n, c, t = entry["samples"], entry["captions"], entry["tokens"]
            assert int(attrs["num_samples"]) == n, where
            assert int(attrs["num_captions"]) == c, where
            assert (int(attrs["image_height"]), int(attrs["image_width"])) == (height, width)
            assert as_str(attrs["compression"]) == codec, where
            images = f["images"]
            assert images.dtype == np.uint8 and images.shape == (n, height, width, 3), where
            assert images.chunks == (1, height, width, 3), where
            if codec == "zstd":
                assert "32015" in images._filters, (where, images._filters)
            pixels = images[...]  # through HDF5 and the plugin
            for s in range(n):
                mask, raw = images.id.read_direct_chunk((s, 0, 0, 0))
                direct = zstd_decode(raw) if codec == "zstd" else raw
                assert mask == 0, (where, s)
                assert direct == pixels[s].tobytes(), "%s sample %d: h5py and zstd disagree" % (
                    where, s)
            keys = [k.decode("utf-8") for k in f["keys"][...]]
            sources = [as_str(x) for x in f["sources"][...]]
            captions = [as_str(x) for x in f["captions"].asstr()[...]] if c else []
            cap_off = f["caption_offsets"][...]
            tok_off = f["token_offsets"][...]
            tokens = f["tokens"][...]
            assert f["caption_offsets"].dtype == np.int64 and f["tokens"].dtype == np.int32
            assert cap_off.shape == (n + 1,) and cap_off[0] == 0 and cap_off[-1] == c, where
            assert np.all(np.diff(cap_off) > 0), where + ": a sample without captions"
            assert tok_off.shape == (c + 1,) and tok_off[0] == 0 and tok_off[-1] == t, where
            assert np.all(np.diff(tok_off) >= 0), where
            assert tokens.shape == (t,), where
            original = f["original_size"][...]
            boxes = f["valid_box"][...]
            assert original.shape == (n, 2) and boxes.shape == (n, 4), where
            samples = []
            for s in range(n):
                caps = captions[cap_off[s]:cap_off[s + 1]]
                rows = [tokens[tok_off[k]:tok_off[k + 1]].tolist()
                        for k in range(cap_off[s], cap_off[s + 1])]
                samples.append({"key": keys[s], "source": sources[s], "captions": caps,
                                "tokens": rows, "pixels": pixels[s],
                                "original_size": original[s].tolist(),
                                "valid_box": boxes[s].tolist()})
            total += n
            yield name, samples
    assert total == index["totals"]["samples"], "totals.samples"


def build_and_check_real_sets():
    """ctest mode: build the real sets with mmpack and check each one."""
    mmpack = os.path.join(os.environ["MM_BIN_DIR"], "mmpack")
    shared = os.environ["MM_SHARED_DIR"]
    tokenizer = os.path.join(shared, "tokenizers", "albert-30k-clean.model")
    assert os.environ.get("HDF5_PLUGIN_PATH"), "HDF5_PLUGIN_PATH must name the zstd plugin folder"
    runs = [("coco-cc", ["--samples-per-shard", "20", "--threads", "2", "--compression", "zstd"]),
            ("skimage-micro", ["--resize-mode", "pad", "--compression", "none"]),
            ("openclipart-pd", ["--resize-mode", "pad", "--compression", "none",
                                "--image-size", "96"])]
    with tempfile.TemporaryDirectory(prefix="mm_h5py_") as tmp:
        for name, options in runs:
            manifest = os.path.join(shared, "data", name, "captions.jsonl")
            out = os.path.join(tmp, name)
            subprocess.run([mmpack, "build", manifest, "-o", out, "--tokenizer", tokenizer,
                            "--lowercase", "--quiet"] + options, check=True)
            subprocess.run([mmpack, "verify", out], check=True)
            subprocess.run([sys.executable, os.path.abspath(__file__), out, "--manifest",
                            manifest], check=True)
        # The same input and options give byte-identical shards whatever --threads is.
        manifest = os.path.join(shared, "data", "coco-cc", "captions.jsonl")
        other = os.path.join(tmp, "coco-cc-1-thread")
        subprocess.run([mmpack, "build", manifest, "-o", other, "--tokenizer", tokenizer,
                        "--lowercase", "--quiet", "--samples-per-shard", "20", "--threads", "1",
                        "--compression", "zstd"], check=True)
        a = json.load(open(os.path.join(tmp, "coco-cc", "index.json")))
        b = json.load(open(os.path.join(other, "index.json")))
        assert a["shards"] == b["shards"], "index shards differ between --threads 2 and 1"
        for entry in a["shards"]:
            with open(os.path.join(tmp, "coco-cc", entry["file"]), "rb") as fa, \
                    open(os.path.join(other, entry["file"]), "rb") as fb:
                assert fa.read() == fb.read(), entry["file"] + " differs between thread counts"
    print("h5py round trip of the real sets: OK")
    return 0


def main():
    if len(sys.argv) == 1:
        return build_and_check_real_sets()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--expected")
    parser.add_argument("--manifest")
    args = parser.parse_args()

    expected = None
    expected_pixels = None
    if args.expected:
        doc = json.load(open(args.expected, encoding="utf-8"))
        expected = doc["samples"]
        with open(os.path.join(os.path.dirname(args.expected), doc["pixels_file"]), "rb") as f:
            expected_pixels = f.read()
    by_image = None
    sp = None
    index = json.load(open(os.path.join(args.out, "index.json"), encoding="utf-8"))
    if args.manifest:
        by_image = collections.defaultdict(list)
        with open(args.manifest, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    image = row.get("image") or row.get("image_path") or row.get("file_name")
                    text = row.get("text") if "text" in row else row.get("caption")
                    by_image[os.path.normpath(image)].append(text)
        import sentencepiece  # only needed for --manifest
        sp = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(args.out, index["tokenizer"]["file"]))
    tok = index["tokenizer"]
    max_tokens = tok.get("max_tokens", 0)

    seen_keys = set()
    position = 0
    checked = 0
    for shard, samples in read_set(args.out):
        for s, sample in enumerate(samples):
            where = "%s sample %d (key %r)" % (shard, s, sample["key"])
            assert sample["key"] and sample["key"] not in seen_keys, where + ": key not unique"
            seen_keys.add(sample["key"])
            if expected is not None:
                want = expected[position]
                assert sample["key"] == want["key"], where
                assert sample["source"] == want["source"], where
                assert sample["captions"] == want["captions"], where
                assert sample["tokens"] == want["tokens"], where
                size = sample["pixels"].nbytes
                want_pixels = expected_pixels[position * size:(position + 1) * size]
                assert sample["pixels"].tobytes() == want_pixels, where + ": pixels differ"
                assert sample["original_size"] == want["original_size"], where
                assert sample["valid_box"] == want["valid_box"], where
            if by_image is not None:
                source = os.path.normpath(sample["source"])
                want_caps = by_image.get(source)
                assert want_caps is not None, where + ": source %r not in the manifest" % source
                assert sample["captions"] == want_caps, where + ": captions differ"
                for caption, row in zip(sample["captions"], sample["tokens"]):
                    lower = index.get("text", {}).get("lowercase", False)
                    ids = sp.encode(caption.lower() if lower else caption)
                    if tok.get("bos_id", -1) >= 0:
                        ids = [tok["bos_id"]] + ids
                    if tok.get("eos_id", -1) >= 0:
                        ids = ids + [tok["eos_id"]]
                    if not max_tokens or len(ids) <= max_tokens:
                        assert row == ids, where + ": tokens of %r differ" % caption
                    else:  # truncated: the right length and the same beginning
                        assert len(row) == max_tokens, where
                        assert row[:max_tokens // 2] == ids[:max_tokens // 2], where
            position += 1
            checked += 1
    if expected is not None:
        assert position == len(expected), "set has %d samples, expected %d" % (
            position, len(expected))
    print("h5py round trip: OK: %d samples" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
