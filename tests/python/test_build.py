"""mmpack.build: keyword options become `mmpack build` flags; failures raise BuildError with the
tool's error line."""

import os
import stat
import warnings

import pytest

import mmpack
from conftest import ALBERT, BIN_DIR, DATA_DIR

SKIMAGE = os.path.join(DATA_DIR, "skimage-micro", "captions.jsonl")


def test_options_become_flags(tmp_path):
    out = tmp_path / "s"
    index = mmpack.build(SKIMAGE, out, tokenizer=ALBERT, image_size=(40, 32), resize_mode="pad",
                         samples_per_shard=4, compression="none", threads=2)
    assert index["image"] == {"height": 32, "width": 40, "channels": 3, "resize_mode": "pad",
                              "background": "#ffffff"}
    assert index["compression"]["codec"] == "none"
    assert [s["samples"] for s in index["shards"]] == [4, 2]
    s = mmpack.ShardSet(out)
    assert len(s) == 6 and s.image_shape == (32, 40, 3)
    # True is a bare flag (overwrite), False and None are left out.
    index = mmpack.build(SKIMAGE, out, tokenizer=ALBERT, image_size=24, overwrite=True,
                         quiet=False, vocab_size=None)
    assert index["image"]["height"] == 24 and len(index["shards"]) == 1


def test_failures_raise_with_the_tools_error_line(tmp_path):
    out = tmp_path / "s"
    mmpack.build(SKIMAGE, out, tokenizer=ALBERT, image_size=16)
    with pytest.raises(mmpack.BuildError, match="already exists; pass --overwrite") as e:
        mmpack.build(SKIMAGE, out, tokenizer=ALBERT)
    assert str(e.value).startswith("mmpack build: AlreadyExists: output")
    assert e.value.returncode != 0
    with pytest.raises(mmpack.BuildError, match="input '.*nothing.jsonl' does not exist"):
        mmpack.build(tmp_path / "nothing.jsonl", tmp_path / "t")
    with pytest.raises(mmpack.BuildError, match="--no-such-option"):
        mmpack.build(SKIMAGE, tmp_path / "u", no_such_option=3)
    with pytest.raises(mmpack.BuildError, match="resize-mode"):
        mmpack.build(SKIMAGE, tmp_path / "v", resize_mode="squash")


def test_verbose_passes_the_summary_through(tmp_path, capfd):
    mmpack.build(SKIMAGE, tmp_path / "s", tokenizer=ALBERT, image_size=16, verbose=True)
    assert "mmpack build: wrote 6 samples" in capfd.readouterr().err
    mmpack.build(SKIMAGE, tmp_path / "t", tokenizer=ALBERT, image_size=16)
    assert capfd.readouterr().err == ""


def test_the_tools_warnings_become_python_warnings(tmp_path):
    # ALBERT's pieces are lowercase: COCO's cased captions give over 1% <unk>, which the tool
    # warns of on stderr (issue 29: the warning was lost to Python callers).
    coco = os.path.join(DATA_DIR, "coco-cc", "captions.jsonl")
    with pytest.warns(mmpack.BuildWarning, match=r"of the token ids are <unk>.*--lowercase"):
        mmpack.build(coco, tmp_path / "cased", tokenizer=ALBERT, image_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mmpack.build(coco, tmp_path / "lower", tokenizer=ALBERT, image_size=16, lowercase=True)


def test_find_mmpack(monkeypatch, tmp_path):
    assert mmpack.find_mmpack() == os.environ["MMPACK_BIN"]
    monkeypatch.delenv("MMPACK_BIN")
    # Without the variable: the build tree's bin/ recorded at build time.
    assert mmpack.find_mmpack() == os.path.join(BIN_DIR, "mmpack")
    not_executable = tmp_path / "mmpack"
    not_executable.write_text("")
    not_executable.chmod(stat.S_IRUSR)
    monkeypatch.setenv("MMPACK_BIN", str(not_executable))
    with pytest.raises(FileNotFoundError, match="MMPACK_BIN=.* is not an executable"):
        mmpack.find_mmpack()
