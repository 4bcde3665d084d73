"""The package itself: links the reader only (never sentencepiece), lives beside torch, its type
stubs match the extension, its public API is documented, `cmake --install` gives a working
package that finds its mmpack binary."""

import ast
import inspect
import os
import subprocess
import sys

import pytest

import mmpack
from mmpack import _mmpack
from conftest import ALBERT, DATA_DIR, PYTHON_DIR


def test_extension_links_neither_sentencepiece_nor_torch():
    ldd = subprocess.run(["ldd", _mmpack.__file__], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    assert "libhdf5" in ldd  # the filter registration needs the process's libhdf5
    for forbidden in ("sentencepiece", "protobuf", "torch", "libc10"):
        assert forbidden not in ldd, ldd


@pytest.mark.parametrize("first", ["torch", "mmpack"])
def test_lives_beside_torch_in_one_process(coco, first):
    second = "mmpack" if first == "torch" else "torch"
    code = ("import sys; sys.path.insert(0, %r)\nimport %s, %s\n"
            "loader = mmpack.Loader(%r, 8, as_torch=True)\n"
            "b = next(iter(loader))\n"
            "print(type(b['images']).__name__, tuple(b['images'].shape))\n"
            % (PYTHON_DIR, first, second, coco))
    r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Tensor (8, 224, 224, 3)"


def stub_names():
    """{class name: its member names} and the top-level names of _mmpack.pyi."""
    path = os.path.join(os.path.dirname(_mmpack.__file__), "_mmpack.pyi")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    classes, top = {}, set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for n in node.body:
                if isinstance(n, ast.FunctionDef):
                    members.add(n.name)
                elif isinstance(n, ast.AnnAssign):
                    members.add(n.target.id)
                elif isinstance(n, ast.Assign):
                    members.update(t.id for t in n.targets)
            classes[node.name] = members
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
    return classes, top


def test_stubs_match_the_extension():
    classes, top = stub_names()
    public = {n for n in dir(_mmpack) if not n.startswith("_")}
    assert top == public
    for name, members in classes.items():
        cls = getattr(_mmpack, name)
        if issubclass(cls, BaseException):
            continue
        real = {n for n in vars(cls) if not n.startswith("_")} | (
            {n for n in ("__init__", "__len__", "__getitem__") if n in vars(cls)})
        if name in ("CaptionMode", "ShuffleMode", "ImageCrop", "Interpolation"):  # pybind11 enums
            real &= {"RANDOM", "ALL", "AUTO", "GLOBAL", "BLOCK", "NONE", "CENTER",
                     "RANDOM_RESIZED", "LANCZOS", "BILINEAR"}
        assert members == real, name


def test_public_api_is_documented():
    for name in mmpack.__all__:
        obj = getattr(mmpack, name)
        if callable(obj):
            assert inspect.getdoc(obj), name
    for cls in (mmpack.ShardSet, mmpack.Loader, mmpack.Writer):
        for name, member in vars(cls).items():
            if not name.startswith("_") and callable(member) or isinstance(member, property):
                assert inspect.getdoc(member), "%s.%s" % (cls.__name__, name)
    doc = inspect.getdoc(mmpack.Loader)
    for text in ("[B, H, W, 3] uint8", "[B, L] int32", "Buffer lifetime", "set_epoch"):
        assert text in doc


def test_cmake_install_gives_a_working_package(tmp_path, coco):
    build_dir = os.path.dirname(PYTHON_DIR)
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", build_dir, "--prefix", str(prefix)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    site = prefix / "lib" / ("python%d.%d" % sys.version_info[:2]) / "dist-packages"
    assert (site / "mmpack" / "__init__.py").exists()
    # install_manifest.txt lists every installed file of the package (_config.py, written by
    # install(CODE), included), so that removing the listed files uninstalls it.
    with open(os.path.join(build_dir, "install_manifest.txt"), encoding="utf-8") as f:
        listed = {line.strip() for line in f if line.strip()}
    installed = {str(site / "mmpack" / n) for n in os.listdir(site / "mmpack")}
    assert installed and installed <= listed, sorted(installed - listed)
    code = ("import mmpack, os\n"
            "print(mmpack.find_mmpack())\n"
            "index = mmpack.build(%r, %r, tokenizer=%r, image_size=16)\n"
            "print(len(mmpack.ShardSet(%r)), mmpack.__file__)\n"
            % (os.path.join(DATA_DIR, "skimage-micro", "captions.jsonl"), str(tmp_path / "s"),
               ALBERT, str(tmp_path / "s")))
    env = {k: v for k, v in os.environ.items() if k not in ("MMPACK_BIN", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == str(prefix / "bin" / "mmpack")
    assert lines[1] == "6 %s" % (site / "mmpack" / "__init__.py")


def cache_value(build_dir, name):
    """A variable of BUILD/CMakeCache.txt (NAME:TYPE=value)."""
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.split(":", 1)[0] == name and "=" in line:
                return line.rstrip("\n").split("=", 1)[1]
    raise KeyError(name)


@pytest.mark.parametrize("prefix", ["default", "/usr"])
def test_default_install_lands_on_the_system_pythons_path(tmp_path, prefix):
    # `cmake --install BUILD` without --prefix (CMAKE_INSTALL_PREFIX, /usr/local), and with the
    # prefix /usr (cpack's .deb), writes the package where the Python the module was built for
    # finds it with no PYTHONPATH (on Debian: /usr/local/lib/python3.11/dist-packages and
    # /usr/lib/python3/dist-packages, from site.py). Installed under DESTDIR: the machine's
    # /usr/local is shared.
    build_dir = os.path.dirname(PYTHON_DIR)
    if prefix == "default":
        prefix = cache_value(build_dir, "CMAKE_INSTALL_PREFIX")
        args = []
    else:
        args = ["--prefix", prefix]
    root = tmp_path / "root"
    r = subprocess.run(["cmake", "--install", build_dir] + args,
                       env=dict(os.environ, DESTDIR=str(root)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    found = [d for d, _, names in os.walk(root)
             if "__init__.py" in names and os.path.basename(d) == "mmpack"]
    assert len(found) == 1, found
    target = os.path.dirname(found[0])[len(str(root)):]
    assert target.startswith(prefix + "/"), (target, prefix)
    python = cache_value(build_dir, "MM_PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    r = subprocess.run([python, "-c", "import sys; print('\\n'.join(sys.path))"], env=env,
                       stdout=subprocess.PIPE, text=True, check=True, cwd="/")
    assert os.path.normpath(target) in [os.path.normpath(p) for p in r.stdout.splitlines()], (
        target, r.stdout)
