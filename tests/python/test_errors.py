"""Clean Python exceptions: a missing set, a truncated shard, a damaged chunk, an unsupported
version, bad options; each names the file (and sample) and the reason."""

import json
import os
import shutil

import h5py
import pytest

import mmpack


@pytest.fixture
def copy_of(tmp_path):
    def copy(root):
        out = tmp_path / "set"
        shutil.copytree(root, out)
        return str(out)
    return copy


def test_exception_classes():
    assert issubclass(mmpack.CorruptionError, mmpack.Error)
    assert issubclass(mmpack.UnsupportedError, mmpack.Error)
    assert issubclass(mmpack.BuildError, mmpack.Error)
    assert issubclass(mmpack.Error, Exception)
    assert mmpack.CorruptionError.__module__ == "mmpack"
    assert mmpack.CorruptionError.__doc__


def test_missing_set_is_file_not_found(tmp_path):
    missing = str(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="nothing/index.json: cannot open"):
        mmpack.ShardSet(missing)
    with pytest.raises(FileNotFoundError):
        mmpack.Loader(missing, 4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a shard set"):
        mmpack.ShardSet(tmp_path / "empty")  # os.PathLike works too


def test_missing_shard_is_file_not_found(coco_multi, copy_of):
    root = copy_of(coco_multi)
    os.remove(os.path.join(root, "shard-000002.h5"))
    with pytest.raises(FileNotFoundError, match="shard-000002.h5"):
        mmpack.ShardSet(root)


def test_truncated_shard_is_corruption_naming_it(coco_multi, copy_of):
    root = copy_of(coco_multi)
    path = os.path.join(root, "shard-000001.h5")
    os.truncate(path, os.path.getsize(path) // 2)
    with pytest.raises(mmpack.CorruptionError, match="shard-000001.h5") as e:
        mmpack.ShardSet(root)
    assert not str(e.value).startswith("Corruption:")
    with pytest.raises(mmpack.Error):
        mmpack.Loader(root, 4)


def test_a_shard_truncated_under_a_loader_is_an_error_not_sigbus(coco_multi, copy_of):
    # While mapped: touching its lost pages raised SIGBUS and killed the interpreter.
    root = copy_of(coco_multi)
    loader = mmpack.Loader(root, 4, shuffle=False, prefetch=1)
    it = iter(loader)
    next(it)
    os.truncate(os.path.join(root, "shard-000001.h5"), 4096)  # as `cp` over it begins
    with pytest.raises(mmpack.CorruptionError,
                       match="shard-000001.h5: the file changed while it was read"):
        for _ in it:
            pass
    with pytest.raises(mmpack.CorruptionError, match="changed while it was read"):
        loader.dataset.tokens(20)


def flip_chunk_bytes(path, sample):
    """Overwrites 64 bytes in the middle of `sample`'s stored image chunk (same file size)."""
    with h5py.File(path, "r") as f:
        info = f["images"].id.get_chunk_info(sample)
    with open(path, "r+b") as f:
        f.seek(info.byte_offset + info.size // 2)
        f.write(b"\xa5" * 64)


def test_damaged_chunk_names_shard_and_sample(coco_multi, copy_of):
    root = copy_of(coco_multi)
    flip_chunk_bytes(os.path.join(root, "shard-000001.h5"), 5)  # global sample 21
    s = mmpack.ShardSet(root)  # sizes still agree: found when the chunk is read
    s.image(20)
    with pytest.raises(mmpack.CorruptionError, match=r"shard-000001\.h5 sample 5: zstd"):
        s.image(21)
    with pytest.raises(mmpack.CorruptionError, match=r"shard-000001\.h5 sample 5"):
        s[21]
    loader = mmpack.Loader(root, 51, shuffle=False, drop_last=False)
    with pytest.raises(mmpack.CorruptionError, match=r"shard-000001\.h5 sample 5"):
        list(loader)
    with pytest.raises(mmpack.CorruptionError, match="shard-000001.h5.*(checksum|xxh3|XXH3)"):
        mmpack.ShardSet(root, verify_checksums=True)


def test_unsupported_format_version_names_it(coco, copy_of):
    root = copy_of(coco)
    index_path = os.path.join(root, "index.json")
    with open(index_path, encoding="utf-8") as f:
        index = json.load(f)
    index["format_version"] = 99
    with open(index_path, "w", encoding="utf-8") as f:
        json.dump(index, f)
    with pytest.raises(mmpack.UnsupportedError, match="99"):
        mmpack.ShardSet(root)


@pytest.mark.parametrize("options,message", [
    ({"batch_size": 0}, "batch_size must be >= 1"),
    ({"batch_size": 4, "rank": 2, "world_size": 2}, r"rank 2 outside \[0, 2\)"),
    ({"batch_size": 4, "rank": -1, "world_size": 2}, "rank -1"),
    ({"batch_size": 4, "world_size": 0, "rank": 0}, "world_size must be >= 1"),
    ({"batch_size": 4, "num_threads": -1}, "num_threads"),  # 0 or None: one per CPU
    ({"batch_size": 4, "prefetch": 0}, r"prefetch must be an integer in \[1, "),
    ({"batch_size": 4, "caption_mode": "first"}, "caption_mode must be 'random' or 'all'"),
    ({"batch_size": 4, "crop": "random"}, "crop must be 'none', 'center' or 'rrc'"),
    ({"batch_size": 4, "output_size": (224, 0)}, "give both or neither"),
    ({"batch_size": 60}, "drop_last with 51 items"),
    ({"batch_size": 20, "world_size": 3, "rank": 0}, "drop_last with 51 items"),
])
def test_bad_options_are_value_errors(coco, options, message):
    with pytest.raises(ValueError, match=message):
        mmpack.Loader(coco, **options)


@pytest.mark.parametrize("options,name", [
    ({"batch_size": 2 ** 31}, "batch_size"),
    ({"batch_size": 4, "seed": -1}, "seed"),
    ({"batch_size": 4, "seed": 2 ** 64}, "seed"),
    ({"batch_size": 4, "rank": 2 ** 40, "world_size": 2}, "rank"),
    ({"batch_size": 4, "world_size": -2 ** 33}, "world_size"),
    ({"batch_size": 4, "num_threads": 2 ** 32}, "num_threads"),
    ({"batch_size": 4, "prefetch": 2 ** 31}, "prefetch"),
    ({"batch_size": 4, "shuffle_window": 2 ** 31}, "shuffle_window"),
    ({"batch_size": 4, "output_size": (2 ** 31, 2)}, "output_size"),
    ({"batch_size": 4, "cache_limit": 2 ** 63}, "byte size"),
    ({"batch_size": 4, "cache_limit": -1}, "byte size"),
])
def test_integers_out_of_the_c_range_are_value_errors_naming_the_option(coco, options, name):
    # Not pybind11's "incompatible function arguments ... Invoked with: <LoaderOptions ...>".
    with pytest.raises(ValueError, match=name) as raised:
        mmpack.Loader(coco, **options)
    assert "Invoked with" not in str(raised.value)


def test_an_epoch_out_of_range_is_a_value_error(coco):
    loader = mmpack.Loader(coco, batch_size=4)
    with pytest.raises(ValueError, match="epoch"):
        loader.set_epoch(2 ** 63)


def test_wrong_types_are_type_errors(coco):
    with pytest.raises(TypeError):
        mmpack.Loader(coco, "4")
    with pytest.raises(TypeError):
        mmpack.ShardSet(coco)[1.5]
