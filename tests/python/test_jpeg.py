"""Format v2: `mmpack build --codec jpeg`, images at their own aspect ratio, and the
reader decoding and cropping them while loading. Real coco-cc photos and openclipart clip art
(thin and wide images), the real ALBERT tokenizer; Pillow (Debian's, libjpeg-turbo like mmpack)
and h5py are the independent references.

Tolerances, and why:
- a stored JPEG decoded by the reader against Pillow's decode of the same bytes that h5py reads:
  at most 1 (both use libjpeg-turbo's ISLOW IDCT and fancy upsampling; measured 0);
- the jpeg set's pixels against the raw set's (same build options): JPEG at quality 90, 4:2:0
  loses detail, so PSNR floors rather than a bound: every image above 25 dB and the median
  above 32 dB (measured on these 51 photos at 224 px: 27.4 dB for the most textured, median
  34.0, best 40.9);
- a loader crop of a keep-ratio image against Pillow (full decode, LANCZOS resize with the crop
  window as `box`): decoded at full scale, PSNR above 45 dB and mean difference below 0.5
  (measured: at least 52 dB, mean at most 0.31; a few pixels at saturated edges differ by up to
  19, because the two passes run in the other order and round and clamp the filter's overshoot
  at different points, as tests/reader/transforms_test.cc explains); the same with the bilinear
  (triangle) filter against Pillow's BILINEAR; decoded at a reduced DCT scale (the window spans at least 8/7
  of the output), PSNR above 30 dB (measured at least 33 dB): libjpeg's scaled IDCT is another
  downscaling filter than Lanczos on the full image, which is the point of decoding less.
"""

import io
import json
import os

import h5py
import numpy as np
import pytest
from PIL import Image

import mmpack
from conftest import ALBERT, BIN_DIR, DATA_DIR, run
from h5ref import reseal

COCO = os.path.join(DATA_DIR, "coco-cc", "captions.jsonl")
CLIPART = os.path.join(DATA_DIR, "openclipart-pd", "captions.jsonl")
MMPACK = os.path.join(BIN_DIR, "mmpack")




@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """The same photos built raw, as fixed-size JPEGs and as keep-ratio JPEGs."""
    root = tmp_path_factory.mktemp("jpeg")
    out = {}
    common = dict(tokenizer=ALBERT, lowercase=True, threads=2)
    out["raw"] = str(root / "raw")
    mmpack.build(COCO, out["raw"], image_size=224, compression="none", **common)
    out["jpeg"] = str(root / "jpeg")
    mmpack.build(COCO, out["jpeg"], image_size=224, codec="jpeg", samples_per_shard=20, **common)
    out["largest"] = str(root / "largest")
    mmpack.build(COCO, out["largest"], codec="jpeg", resize_mode="keep-ratio-largest",
                 max_size=256, samples_per_shard=20, **common)
    out["shorter"] = str(root / "shorter")
    mmpack.build(COCO, out["shorter"], codec="jpeg", resize_mode="keep-ratio", max_size=160,
                 quality=80, **common)
    out["clipart"] = str(root / "clipart")
    mmpack.build(CLIPART, out["clipart"], codec="jpeg", resize_mode="keep-ratio-largest",
                 max_size=128, **common)
    return out


def index_of(path):
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)


def h5_jpegs(path):
    """Every sample's (JPEG bytes, [width, height], original_size) in set order, via h5py."""
    out = []
    for s in index_of(path)["shards"]:
        with h5py.File(os.path.join(path, s["file"]), "r") as f:
            offsets = f["image_offsets"][()]
            sizes = f["image_size"][()]
            original = f["original_size"][()]
            data = f["image_bytes"]
            for i in range(len(sizes)):
                out.append((bytes(data[offsets[i]:offsets[i + 1]]), tuple(sizes[i]),
                            tuple(original[i])))
    return out


def pillow_rgb(jpeg):
    return np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))


def test_index_and_shards_say_format_2_jpeg(sets):
    idx = index_of(sets["jpeg"])
    assert idx["format_version"] == 2
    assert idx["image"]["codec"] == "jpeg" and idx["image"]["quality"] == 90
    assert idx["image"]["chroma_subsampling"] == "4:2:0"
    assert idx["compression"]["codec"] == "none"
    assert "max_size" not in idx["image"]
    with h5py.File(os.path.join(sets["jpeg"], idx["shards"][0]["file"]), "r") as f:
        assert "images" not in f
        assert int(f.attrs["format_version"]) == 2
        assert f.attrs["image_codec"] == "jpeg"
        assert int(f.attrs["jpeg_quality"]) == 90 and int(f.attrs["max_size"]) == 0
        assert f["image_bytes"].dtype == np.uint8 and f["image_bytes"].chunks is None
        assert f["image_offsets"].dtype == np.int64 and f["image_size"].dtype == np.int32
    largest = index_of(sets["largest"])
    assert largest["image"]["max_size"] == 256
    assert largest["image"]["height"] == largest["image"]["width"] == 256
    # A raw set is still format 1, and its index has no codec key (older readers read it).
    raw = index_of(sets["raw"])
    assert raw["format_version"] == 1 and "codec" not in raw["image"]


def test_h5py_jpegs_decode_with_pillow_to_what_the_reader_reads(sets):
    s = mmpack.ShardSet(sets["jpeg"])
    jpegs = h5_jpegs(sets["jpeg"])
    assert len(jpegs) == len(s)
    for i, (jpeg, size, _) in enumerate(jpegs):
        assert jpeg[:2] == b"\xff\xd8"
        img = Image.open(io.BytesIO(jpeg))
        assert img.format == "JPEG" and img.mode == "RGB" and img.size == size == (224, 224)
        ours = s.image(i)
        assert ours.shape == (224, 224, 3)
        assert np.abs(ours.astype(int) - pillow_rgb(jpeg).astype(int)).max() <= 1, i


def test_loader_full_size_center_crop_is_the_stored_jpeg(sets):
    """Crop none at the stored size (the whole image: a centre crop at full size) hands out the
    decoded JPEG, in any order."""
    jpegs = h5_jpegs(sets["jpeg"])
    s = mmpack.ShardSet(sets["jpeg"])
    loader = mmpack.Loader(s, batch_size=17, shuffle=True, seed=3, drop_last=False, crop="none",
                           num_threads=2)
    seen = 0
    for batch in loader:
        for row, i in enumerate(batch["indices"]):
            ref = pillow_rgb(jpegs[int(i)][0])
            assert np.abs(batch["images"][row].astype(int) - ref.astype(int)).max() <= 1
            seen += 1
    assert seen >= len(s)


def test_jpeg_pixels_are_close_to_the_raw_sets(sets):
    raw, jpeg = mmpack.ShardSet(sets["raw"]), mmpack.ShardSet(sets["jpeg"])
    assert len(raw) == len(jpeg)
    scores = sorted(psnr(raw.image(i), jpeg.image(i)) for i in range(len(raw)))
    assert scores[0] > 25, scores[:3]
    assert scores[len(scores) // 2] > 32, scores


def test_jpeg_set_is_smaller_and_within_30_kb_a_sample(sets):
    raw, jpeg = index_of(sets["raw"]), index_of(sets["jpeg"])
    n = jpeg["totals"]["samples"]
    per_jpeg = sum(len(j) for j, _, _ in h5_jpegs(sets["jpeg"])) / n
    assert per_jpeg <= 30000, per_jpeg
    assert raw["totals"]["bytes"] / jpeg["totals"]["bytes"] > 4


@pytest.mark.parametrize("name,mode,bound", [("largest", "keep-ratio-largest", 256),
                                             ("shorter", "keep-ratio", 160),
                                             ("clipart", "keep-ratio-largest", 128)])
def test_keep_ratio_sizes_keep_the_aspect_and_never_upscale(sets, name, mode, bound):
    s = mmpack.ShardSet(sets[name])
    assert s.info["image"]["resize_mode"] == mode
    jpegs = h5_jpegs(sets[name])
    assert len(jpegs) == len(s)
    for i, (jpeg, (w, h), (ow, oh)) in enumerate(jpegs):
        assert Image.open(io.BytesIO(jpeg)).size == (w, h)
        assert s.image_size(i) == (w, h)
        assert s.image(i).shape == (h, w, 3)
        bounded = min(ow, oh) if mode == "keep-ratio" else max(ow, oh)
        if bounded <= bound:
            assert (w, h) == (ow, oh), (i, w, h, ow, oh)  # never upscaled, never resampled
        else:
            scale = bound / bounded
            assert (min(w, h) if mode == "keep-ratio" else max(w, h)) == bound
            assert abs(w - round(ow * scale)) <= 1 and abs(h - round(oh * scale)) <= 1
    sizes = {size for _, size, _ in jpegs}
    assert len(sizes) > 1, "every image the same size: the aspect ratios were not kept"


@pytest.mark.parametrize("out,interpolation", [(160, "lanczos"), (96, "lanczos"),
                                               (160, "bilinear"), (96, "bilinear")])
def test_keep_ratio_center_crop_matches_pillow(sets, out, interpolation):
    """FFCV's centre crop (ratio 224/256 of the largest square) of each stored image, resized to
    out x out, against Pillow doing the same from the bytes h5py reads."""
    s = mmpack.ShardSet(sets["largest"])
    jpegs = h5_jpegs(sets["largest"])
    loader = mmpack.Loader(s, batch_size=8, shuffle=False, drop_last=False, crop="center",
                           output_size=(out, out), num_threads=2, interpolation=interpolation)
    pillow_filter = Image.LANCZOS if interpolation == "lanczos" else Image.BILINEAR
    ratio = 224 / 256
    scales = set()
    for batch in loader:
        assert batch["images"].shape[1:] == (out, out, 3)
        for row, i in enumerate(batch["indices"]):
            jpeg, (w, h), _ = jpegs[int(i)]
            side = int(min(w, h) * ratio)
            x, y = (w - side) // 2, (h - side) // 2
            ref = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB").resize(
                (out, out), pillow_filter, box=(x, y, x + side, y + side)))
            ours = batch["images"][row]
            # The reader's DCT scale: the smallest num/8 at which the window still spans the output.
            full = next((n for n in range(1, 8) if side * n >= 8 * out), 8) == 8
            scales.add(full)
            if full:
                diff = np.abs(ours.astype(int) - ref.astype(int))
                assert psnr(ours, ref) > 45 and diff.mean() < 0.5, (int(i), psnr(ours, ref))
            else:
                assert psnr(ours, ref) > 30, (int(i), psnr(ours, ref))
    assert scales == ({True, False} if out == 160 else {False})


def test_random_resized_crops_are_deterministic_and_resume_exactly(sets):
    s = mmpack.ShardSet(sets["largest"])
    opts = dict(batch_size=6, seed=7, crop="rrc", output_size=(96, 96), horizontal_flip=True)
    first = [b["images"].copy() for b in mmpack.Loader(s, num_threads=1, **opts)]
    again = [b["images"].copy() for b in mmpack.Loader(s, num_threads=2, **opts)]
    assert len(first) == len(again) > 3
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    # Another epoch draws other windows.
    other = mmpack.Loader(s, num_threads=2, **opts)
    other.set_epoch(1)
    assert not np.array_equal(next(iter(other))["images"], first[0])
    # Stop after two batches, restore from the state, and continue with the same pixels.
    loader = mmpack.Loader(s, num_threads=2, **opts)
    it = iter(loader)
    next(it)
    next(it)
    state = loader.state_dict()
    resumed = mmpack.Loader(s, num_threads=2, **opts)
    resumed.load_state_dict(state)
    rest = [b["images"].copy() for b in resumed]
    assert len(rest) == len(first) - 2
    assert all(np.array_equal(a, b) for a, b in zip(rest, first[2:]))


def test_verify_decodes_every_jpeg_and_info_describes_them(sets):
    for name in ("jpeg", "largest", "shorter", "clipart", "raw"):
        r = run(MMPACK, "verify", sets[name])
        assert r.returncode == 0, (name, r.stderr)
    r = run(MMPACK, "info", sets["largest"])
    assert r.returncode == 0, r.stderr
    assert "codec:        jpeg quality 90, 4:2:0" in r.stdout
    assert "longer side <= 256 px" in r.stdout
    assert "stored size:  width " in r.stdout and "stored bytes: " in r.stdout
    assert "format:       mmpack-shard v2" in r.stdout
    r = run(MMPACK, "info", sets["raw"])
    assert "codec:        raw pixels (format 1)" in r.stdout


def _copy(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return str(dst)


def test_a_damaged_jpeg_is_named_by_verify_and_the_loader(sets, tmp_path):
    out = _copy(sets["jpeg"], tmp_path / "damaged")
    shard = os.path.join(out, index_of(out)["shards"][1]["file"])
    with h5py.File(shard, "r") as f:
        start = int(f["image_offsets"][3])
        length = int(f["image_offsets"][4]) - start
        base = f["image_bytes"].id.get_offset()
    with open(shard, "r+b") as f:  # cut the entropy-coded data of sample 3 short with EOI
        f.seek(base + start + length // 2)
        f.write(b"\xff\xd9" + b"\x00" * 64)
    reseal(out)
    r = run(MMPACK, "verify", out)
    assert r.returncode == 1
    assert "shard-000001.h5" in r.stderr and "sample 3" in r.stderr, r.stderr
    s = mmpack.ShardSet(out)
    with pytest.raises(mmpack.CorruptionError, match="shard-000001.h5 sample 3"):
        s.image(23)
    assert s.image(22).shape == (224, 224, 3)  # its neighbours still read


def test_data_past_the_last_row_fails_a_whole_image_read(sets, tmp_path):
    """A JPEG whose header (and table) say half its height: decoding its rows succeeds, and
    entropy data is left before the end marker. The whole-image read decodes on to the end
    marker, so libjpeg's "extraneous bytes" warning is an error there too, not silently
    half an image (verify says the same)."""
    out = _copy(sets["largest"], tmp_path / "tail")
    shard = os.path.join(out, index_of(out)["shards"][0]["file"])
    with h5py.File(shard, "r+") as f:
        begin, end = (int(v) for v in f["image_offsets"][0:2])
        base = f["image_bytes"].id.get_offset()
        w, h = (int(v) for v in f["image_size"][0])
        f["image_size"][0] = [w, h // 2]
        f["valid_box"][0] = [0, 0, w, h // 2]
    with open(shard, "r+b") as f:
        f.seek(base + begin)
        jpeg = bytearray(f.read(end - begin))
        sof = jpeg.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
        assert int.from_bytes(jpeg[sof + 5:sof + 7], "big") == h
        jpeg[sof + 5:sof + 7] = (h // 2).to_bytes(2, "big")
        f.seek(base + begin)
        f.write(jpeg)
    reseal(out)
    r = run(MMPACK, "verify", out)
    assert r.returncode == 1 and "extraneous bytes" in r.stderr, r.stderr
    with pytest.raises(mmpack.CorruptionError, match="shard-000000.h5 sample 0.*extraneous"):
        mmpack.ShardSet(out).image(0)


def test_verify_compares_the_resize_mode_with_the_index(sets, tmp_path):
    out = _copy(sets["largest"], tmp_path / "mode")
    idx = index_of(out)
    idx["image"]["resize_mode"] = "keep-ratio"  # the shards say keep-ratio-largest
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(idx, f)
    r = run(MMPACK, "verify", out)
    assert r.returncode == 1 and "resize_mode" in r.stderr, r.stderr


def test_a_table_that_disagrees_with_the_jpeg_is_refused(sets, tmp_path):
    out = _copy(sets["jpeg"], tmp_path / "sizes")
    shard = os.path.join(out, index_of(out)["shards"][0]["file"])
    with h5py.File(shard, "r+") as f:
        f["image_size"][5] = [223, 224]
    reseal(out)
    r = run(MMPACK, "verify", out)
    assert r.returncode == 1 and "223x224" in r.stderr, r.stderr
    with pytest.raises(mmpack.CorruptionError, match="223x224"):
        mmpack.ShardSet(out)


@pytest.mark.parametrize("edit,message", [
    (lambda f: f["image_offsets"].__setitem__(4, f["image_offsets"][3]), "sample 3: image_offsets"),
    (lambda f: f["image_offsets"].__setitem__(20, 5), "image_offsets run from 0 to 5"),
])
def test_damaged_offsets_are_refused_at_open(sets, tmp_path, edit, message):
    out = _copy(sets["jpeg"], tmp_path / "offsets")
    shard = os.path.join(out, index_of(out)["shards"][0]["file"])
    with h5py.File(shard, "r+") as f:
        edit(f)
    reseal(out)
    with pytest.raises(mmpack.CorruptionError, match=message):
        mmpack.ShardSet(out)
    r = run(MMPACK, "verify", out)
    assert r.returncode == 1 and "shard-000000.h5" in r.stderr, r.stderr


@pytest.mark.parametrize("args,message", [
    (["--resize-mode", "keep-ratio", "--max-size", "128"], "needs --codec jpeg"),
    (["--codec", "jpeg", "--resize-mode", "keep-ratio-largest"], "needs --max-size"),
    (["--codec", "jpeg", "--compression", "zstd"], "--codec jpeg stores JPEG bytes"),
    (["--codec", "jpeg", "--resize-mode", "keep-ratio", "--max-size", "64", "--image-size", "64"],
     "not --image-size"),
    (["--codec", "jpeg", "--max-size", "64"], "--max-size bounds the keep-ratio modes"),
    (["--quality", "50"], "--quality is the JPEG quality of --codec jpeg"),
])
def test_wrong_option_combinations_are_refused_in_one_line(tmp_path, args, message):
    r = run(MMPACK, "build", COCO, "-o", tmp_path / "out", "--tokenizer", ALBERT, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "out").exists()


def test_mmtrain_trains_on_a_keep_ratio_jpeg_set_with_random_resized_crops(sets, tmp_path):
    """mmtrain --augment rrc on stored JPEGs at their own aspect ratio: the loader crops and
    decodes each step's images; the model trains at the set's nominal size (max_size)."""
    r = run(os.path.join(BIN_DIR, "mmtrain"), "--shards", sets["clipart"], "--val-shards",
            sets["clipart"], "--out", tmp_path / "run", "--steps", "4", "--batch-size", "8",
            "--augment", "rrc", "--eval-every", "4")
    assert r.returncode == 0, r.stderr
    assert '"image_size":128' in r.stdout, r.stdout
    assert "done: 4 steps" in r.stdout, r.stdout


@pytest.mark.parametrize("extra", [[], ["--trusted", "--interpolation", "bilinear"]])
def test_mmpack_bench_reads_a_jpeg_set_with_crops(sets, extra):
    """`mmpack bench` on stored JPEGs: random-resized crops through the real loader, shards opened
    in a forked child (default) or in process (--trusted, as mmtrain does)."""
    r = run(MMPACK, "bench", sets["largest"], "--seconds", "0.3", "--crop", "rrc", "--size", "96",
            "--json", *extra)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout.strip().splitlines()[-1])
    assert figures["samples"] > 0 and figures["samples_per_s"] > 0


def test_captions_sources_and_show_of_a_jpeg_set(sets, tmp_path):
    """Format 2 changes how images are stored only: captions, sources and keys read as in
    format 1 (ShardSet[i], mmpack show), checked against h5py."""
    s = mmpack.ShardSet(sets["largest"])
    first = index_of(sets["largest"])["shards"][1]["file"]
    with h5py.File(os.path.join(sets["largest"], first), "r") as f:
        offsets = f["caption_offsets"][()]
        want = [c.decode() for c in f["captions"][offsets[2]:offsets[3]]]
        source = f["sources"][2].decode()
    sample = s[22]  # shard 1 holds samples 20..39
    assert sample["captions"] == want and sample["source"] == source
    assert sample["image"].shape == (s.image_size(22)[1], s.image_size(22)[0], 3)
    r = run(MMPACK, "show", sets["largest"], "22", "-o", tmp_path / "s.png", "--crop", "rrc",
            "--size", "64")
    assert r.returncode == 0, r.stderr
    assert want[0] in r.stdout
    assert Image.open(tmp_path / "s.png").size == (64, 64)


def test_a_text_only_jpeg_set_hands_out_caption_text(tmp_path):
    out = str(tmp_path / "text_jpeg")
    mmpack.build(CLIPART, out, tokenizer="none", codec="jpeg", resize_mode="keep-ratio",
                 max_size=48, threads=2)
    s = mmpack.ShardSet(out)
    batch = next(iter(mmpack.Loader(s, batch_size=8, crop="rrc", output_size=(32, 32))))
    assert batch["images"].shape == (8, 32, 32, 3)
    assert batch["tokens"].shape == (8, 0)
    for row, i in enumerate(batch["indices"]):
        assert batch["texts"][row] in s.captions(int(i))
