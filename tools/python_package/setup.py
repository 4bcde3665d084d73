"""The setup script of the Python package mmpack, built by CMake for the running interpreter.
`pip install --no-build-isolation .` and `pip wheel --no-build-isolation --no-deps .` reach it
through the in-tree build backend beside it (mmpack_build_backend.py, named by the root's
pyproject.toml), which calls setup_mmpack(); no download is needed: --no-build-isolation uses the
interpreter's setuptools and wheel, Debian's python3-setuptools and python3-wheel for
/usr/bin/python3 and --system-site-packages venvs. It lives here, not at the checkout's root,
whose top level is fixed (CMakeLists.txt, tools/, reader/, trainer/, schemas/, tests/,
examples/, README.md, and pyproject.toml, which pip needs there).

What the package holds (all of it found relative to the package, mmpack/_resources.py):
    mmpack/*.py, _mmpack.pyi, py.typed       the Python layer (reader/python/mmpack)
    mmpack/_mmpack.cpython-*.so               the extension (reader/python)
    mmpack/bin/mmpack, mmpack/bin/mmtrain     the programs; console commands `mmpack`, `mmtrain`
                                              (mmtrain only where LibTorch is found)
    mmpack/hdf5-plugins/libh5z_zstd.so        the zstd HDF5 filter plugin (`mmpack env`)
    mmpack/_libs/*.so*                        the shared libraries those link, beyond glibc and
                                              libstdc++ (tools/bundle_libs.py; not LibTorch)

Environment (all optional):
    MMPACK_BUILD_DIR   the CMake build folder, relative to the checkout's root (default:
                       build-pip-<tag> there). If it holds a configured build already
                       (tools/build.sh's build/), that build is used as it is configured
                       (cmake --build --target mm_runtime, no configure): for the same Python it
                       adds nothing to compile.
    MMPACK_TRAINER     ON | OFF | AUTO (default: ON where LibTorch's CMake files are found:
                       the environment's torch, Torch_DIR, CMAKE_PREFIX_PATH, the system's).
    MMPACK_BUNDLE_LIBS 1 (default) | 0: 0 links the system's libraries instead of carrying them.
    MMPACK_CMAKE_ARGS  more configure arguments, e.g. "-DMM_WERROR=ON".
    MMPACK_JOBS        parallel compile jobs (default: the CPU count).
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The checkout's root (this file is ROOT/tools/python_package/setup.py): CMake's source folder and
# the folder setuptools runs in (setup_mmpack), so that the package's paths below are relative
# to it.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_SRC = os.path.join("reader", "python")


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(mmpack\s+VERSION\s+([0-9.]+)", f.read())
    if not match:
        raise RuntimeError("setup.py: no `project(mmpack VERSION x.y.z)` in CMakeLists.txt")
    return match.group(1)


def python_tag():
    return "cp%d%d" % sys.version_info[:2]


def build_dir():
    path = os.environ.get("MMPACK_BUILD_DIR") or "build-pip-" + python_tag()
    return os.path.abspath(os.path.join(ROOT, path))


def torch_cmake_dir():
    """The CMake folder of the environment's torch (pip's torch ships share/cmake/Torch), found
    without importing torch; None if there is none."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "share", "cmake")
    return path if os.path.isfile(os.path.join(path, "Torch", "TorchConfig.cmake")) else None


def system_torch():
    """True when LibTorch's CMake files are where find_package(Torch) looks by itself."""
    roots = [os.environ.get("Torch_DIR", "")]
    roots += os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep)
    roots += ["/usr", "/usr/local"]
    for root in filter(None, roots):
        patterns = [os.path.join(root, "TorchConfig.cmake"),
                    os.path.join(root, "lib", "*", "cmake", "Torch", "TorchConfig.cmake"),
                    os.path.join(root, "lib", "cmake", "Torch", "TorchConfig.cmake"),
                    os.path.join(root, "share", "cmake", "Torch", "TorchConfig.cmake")]
        if any(glob.glob(p) for p in patterns):
            return True
    return False


def trainer_args():
    """(-D arguments, whether mmtrain is built) for MMPACK_TRAINER."""
    choice = os.environ.get("MMPACK_TRAINER", "AUTO").upper()
    if choice not in ("ON", "OFF", "AUTO"):
        raise RuntimeError("setup.py: MMPACK_TRAINER=%s: expected ON, OFF or AUTO" % choice)
    if choice == "OFF":
        return ["-DMM_BUILD_TRAINER=OFF"], False
    torch_dir = torch_cmake_dir()
    if torch_dir:
        return ["-DMM_BUILD_TRAINER=ON", "-DCMAKE_PREFIX_PATH=" + torch_dir], True
    if choice == "ON" or system_torch():
        return ["-DMM_BUILD_TRAINER=ON"], True
    print("setup.py: LibTorch not found: mmtrain is not built (MMPACK_TRAINER=ON to insist)")
    return ["-DMM_BUILD_TRAINER=OFF"], False


def configured(folder):
    return os.path.isfile(os.path.join(folder, "CMakeCache.txt"))


def reusing():
    """True when MMPACK_BUILD_DIR names a build that is configured already: used as it is."""
    return bool(os.environ.get("MMPACK_BUILD_DIR")) and configured(build_dir())


def read_runtime_files(folder):
    """{name: file} of mm_runtime.txt (the top-level CMakeLists.txt): mmpack, plugin, module,
    and mmtrain where it is built."""
    path = os.path.join(folder, "mm_runtime.txt")
    if not os.path.isfile(path):
        raise RuntimeError("setup.py: %s is missing: %s is not a build of this mmpack" %
                           (path, folder))
    with open(path, encoding="utf-8") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def builds_trainer():
    if reusing():
        return "mmtrain" in read_runtime_files(build_dir())
    return trainer_args()[1]


def run(cmd, **kwargs):
    print("setup.py: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


class CMakeExtension(Extension):
    """The extension mmpack._mmpack, built by CMake with everything else of the package."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures (unless reusing a build) and builds the target mm_runtime, then lays the
    package's programs, plugin and extension out beside the Python files."""

    def build_extension(self, ext):
        folder = build_dir()
        if not reusing():
            self.configure(folder)
        jobs = os.environ.get("MMPACK_JOBS") or str(os.cpu_count() or 1)
        run(["cmake", "--build", folder, "--target", "mm_runtime", "-j", jobs])
        files = read_runtime_files(folder)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        if not files.get("module", "").endswith(suffix):
            raise RuntimeError("setup.py: the build in %s made %r, not a module for this Python "
                               "(%s); build with this interpreter (MM_PYTHON=%s) or use another "
                               "MMPACK_BUILD_DIR" % (folder, files.get("module"), suffix,
                                                     sys.executable))
        package = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        self.lay_out(files, package, ext)
        if os.environ.get("MMPACK_BUNDLE_LIBS", "1") != "0":
            run([sys.executable, os.path.join(ROOT, "tools", "bundle_libs.py"), package])

    def configure(self, folder):
        args = ["cmake", "-S", ROOT, "-B", folder,
                "-DCMAKE_BUILD_TYPE=RelWithDebInfo",  # as tools/build.sh: ccache shares objects
                "-DMM_PYTHON=" + sys.executable, "-DMM_BUILD_PYTHON=ON",
                "-DMM_BUILD_TESTS=OFF", "-DMM_BUILD_BENCH=OFF"]
        if shutil.which("ninja") and not configured(folder):
            args += ["-G", "Ninja"]
        args += trainer_args()[0]
        args += shlex.split(os.environ.get("MMPACK_CMAKE_ARGS", ""))
        run(args)

    def lay_out(self, files, package, ext):
        """Copies the built files into the package folder, without their debug information (it
        names the build machine's source folders)."""
        places = {"module": self.get_ext_filename(ext.name).split(os.sep)[-1],
                  "mmpack": os.path.join("bin", "mmpack"),
                  "mmtrain": os.path.join("bin", "mmtrain"),
                  "plugin": os.path.join("hdf5-plugins", "libh5z_zstd.so")}
        for stale in ("bin", "hdf5-plugins", "_libs"):  # of an earlier build into build_lib
            shutil.rmtree(os.path.join(package, stale), ignore_errors=True)
        for name, place in places.items():
            if name not in files:
                continue
            target = os.path.join(package, place)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(files[name], target)
            os.chmod(target, 0o755)
            run(["strip", "--strip-debug", target])
        config = os.path.join(ROOT, PACKAGE_SRC, "mmpack", "_config.py.in")
        with open(config, encoding="utf-8") as f:
            text = f.read()
        text = (text.replace("@PROJECT_VERSION@", project_version())
                .replace("@MM_CONFIG_BIN_DIR@", "bin")
                .replace("@MM_CONFIG_PLUGIN_DIR@", "hdf5-plugins"))
        with open(os.path.join(package, "_config.py"), "w", encoding="utf-8") as f:
            f.write(text)


def setup_mmpack(script_args):
    """Runs setuptools.setup() on the package mmpack with the command line `script_args` (e.g.
    ["bdist_wheel", "--dist-dir", DIR]), in the checkout's root (the current folder is restored
    after). Raises SystemExit on a setuptools error, CalledProcessError on a failed CMake step."""
    previous = os.getcwd()
    os.chdir(ROOT)
    try:
        # setuptools' own build folders beside CMake's (not in tools/build.sh's build/).
        stage = os.path.relpath(os.path.join(build_dir(), "setuptools"), ROOT)
        os.makedirs(stage, exist_ok=True)
        scripts = ["mmpack = mmpack._cli:mmpack"]
        if builds_trainer():
            scripts.append("mmtrain = mmpack._cli:mmtrain")
        # The metadata is here rather than in pyproject.toml's [project] so that setuptools
        # older than 61 (Python 3.9's) builds it too.
        setup(
            script_name=os.path.relpath(os.path.abspath(__file__), ROOT),
            script_args=list(script_args),
            name="mmpack",
            version=project_version(),
            description="Compile image-text pairs into HDF5 shards, read them fast, train on them",
            python_requires=">=3.9",
            install_requires=["numpy"],
            packages=["mmpack"],
            package_dir={"": PACKAGE_SRC},
            package_data={"mmpack": ["_mmpack.pyi", "py.typed"]},
            exclude_package_data={"mmpack": ["_config.py.in"]},
            ext_modules=[CMakeExtension("mmpack._mmpack")],
            cmdclass={"build_ext": CMakeBuild},
            entry_points={"console_scripts": scripts},
            zip_safe=False,
            options={"build": {"build_base": os.path.join(stage, "build")},
                     "egg_info": {"egg_base": stage},
                     "bdist_wheel": {"bdist_dir": os.path.join(stage, "bdist")}},
        )
    finally:
        os.chdir(previous)


if __name__ == "__main__":  # e.g. python3 tools/python_package/setup.py --version
    setup_mmpack(sys.argv[1:])
