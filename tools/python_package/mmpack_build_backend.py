"""mmpack's PEP 517 build backend, in the tree: the root's pyproject.toml names it
(build-backend = "mmpack_build_backend", backend-path = ["tools/python_package"]), so that
`pip install --no-build-isolation .` and `pip wheel --no-build-isolation --no-deps .` build with
the setup script beside it (setup.py) while the checkout's top level holds no setup.py.

It delegates to setuptools through its public entry point only: setup.setup_mmpack() calls
setuptools.setup() with script_args (the distutils keyword that stands for a setup script's
command line), as `python setup.py bdist_wheel --dist-dir DIR` would; setuptools.build_meta is
not used, since it can only run a setup.py in the current folder (its run_setup script path is
private). The same code runs with every setuptools from 45 (pyproject.toml) on: Debian 12's
(66.1 for Python 3.11) and CPython 3.9's (58.1, with wheel).

Hooks (PEP 517):
    build_wheel                   bdist_wheel into a temporary folder in wheel_directory, then
                                  moved there; returns the wheel's file name.
    get_requires_for_build_wheel  [] (pyproject.toml's requires, setuptools and wheel, are all).
    build_sdist                   refused with a clear error: the package is compiled from the
                                  whole C++ tree, which setuptools' sdist would not carry.
    get_requires_for_build_sdist  [].
Not defined: prepare_metadata_for_build_wheel (a frontend then builds the wheel and reads its
metadata, PEP 517; pip reuses that wheel, so CMake runs once) and build_editable (no editable
installs: the extension and programs are compiled). config_settings are ignored: the MMPACK_*
environment variables (setup.py's docstring) are the options.
"""

import importlib.util
import os
import tempfile
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))


def _setup_module():
    """tools/python_package/setup.py as a module (loaded from its path: the name `setup` is
    not imported, so nothing else on sys.path can stand in for it)."""
    spec = importlib.util.spec_from_file_location("mmpack_setup", os.path.join(_HERE, "setup.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory = os.path.abspath(wheel_directory)
    os.makedirs(wheel_directory, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tmp-", dir=wheel_directory) as dist_dir:
        with warnings.catch_warnings():
            # bdist_wheel runs setuptools' install command, which warns that `setup.py install`
            # is deprecated: we do not run it (setuptools.build_meta hides it too).
            warnings.filterwarnings("ignore", "setup.py install is deprecated")
            _setup_module().setup_mmpack(["bdist_wheel", "--dist-dir", dist_dir])
        built = [name for name in os.listdir(dist_dir) if name.endswith(".whl")]
        if len(built) != 1:
            raise RuntimeError("mmpack_build_backend: bdist_wheel left %r in %s, expected one "
                               "wheel" % (sorted(os.listdir(dist_dir)), dist_dir))
        os.replace(os.path.join(dist_dir, built[0]), os.path.join(wheel_directory, built[0]))
    return built[0]


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("mmpack_build_backend: mmpack has no source distribution (the package is "
                       "compiled from the whole C++ tree); build a wheel from the checkout "
                       "instead: pip wheel --no-build-isolation --no-deps .")
