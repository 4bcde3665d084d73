"""The files the mmpack package runs: the `mmpack` and `mmtrain` programs and the zstd HDF5
filter plugin, found relative to the package itself (importlib.resources), never by a folder
of the machine that built it.

Where they lie relative to the package's folder is _config.BIN_DIR / _config.PLUGIN_DIR:
inside the package for `pip install .` (mmpack/bin, mmpack/hdf5-plugins), the build tree's
BUILD/bin and BUILD/hdf5-plugins for PYTHONPATH=BUILD/python, PREFIX/bin and the installed
plugin folder after `cmake --install` or the .deb.
"""

import glob
import importlib.resources
import os
import pathlib
from typing import Dict, Optional

from mmpack import _config

PLUGIN_FILE = "libh5z_zstd.so"


def package_dir() -> str:
    """The mmpack package's folder. Errors: RuntimeError when the package is not a folder of
    files (imported from a zip), where its programs cannot be run."""
    root = importlib.resources.files("mmpack")
    if not isinstance(root, pathlib.Path):
        raise RuntimeError("mmpack is not installed as files (imported from %r): its programs "
                           "cannot run from there" % (root,))
    return str(root)


def _beside_package(relative: str) -> str:
    return os.path.normpath(os.path.join(package_dir(), relative))


def program(name: str) -> Optional[str]:
    """The program `name` ("mmpack" or "mmtrain") that came with this package, or None when it
    is not there (mmtrain is built only where LibTorch was found)."""
    path = os.path.join(_beside_package(_config.BIN_DIR), name)
    return path if os.access(path, os.X_OK) and os.path.isfile(path) else None


def program_folder() -> str:
    """Where program() looks (for messages)."""
    return _beside_package(_config.BIN_DIR)


def plugin_dir() -> str:
    """The folder holding the zstd HDF5 filter plugin (libh5z_zstd.so) that came with this
    package: the value for HDF5_PLUGIN_PATH that lets h5dump and h5py read zstd shards
    (`mmpack env` prints the same). Errors: FileNotFoundError naming the folder when the plugin
    is not there."""
    folder = _beside_package(_config.PLUGIN_DIR)
    if not os.path.isfile(os.path.join(folder, PLUGIN_FILE)):
        raise FileNotFoundError("the zstd filter plugin %s is not in %s" % (PLUGIN_FILE, folder))
    return folder


def program_env() -> Dict[str, str]:
    """The environment to run the package's programs in: this process's, plus, where the
    package carries its own libvips (pip's wheel: mmpack/_libs), VIPSHOME set to the package's
    folder (unless set already), so that libvips does not load the system's loadable modules
    (vips-modules-8.x: HEIF, PDF, ...), which link the system's libvips and GLib, a second copy
    of each in the process."""
    env = dict(os.environ)
    if "VIPSHOME" not in env and glob.glob(os.path.join(package_dir(), "_libs", "libvips-*")):
        env["VIPSHOME"] = package_dir()
    return env
