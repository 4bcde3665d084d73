"""The console commands `mmpack` and `mmtrain` of a pip-installed package (the entry_points
of tools/python_package/setup.py): each replaces the Python process with the program that came
with the package (_resources.program), passing its arguments, environment and exit status
through unchanged.

mmtrain links LibTorch: it is built only where LibTorch was found, and runs against the torch
of the environment it runs in (torch/lib of the first `torch` on sys.path, found without
importing torch) or the system's LibTorch it was built with.
"""

import importlib.util
import os
import sys
from typing import Dict, List, NoReturn, Optional

from mmpack import _resources


def _exec(name: str, argv: List[str], env: Dict[str, str]) -> NoReturn:
    path = _resources.program(name)
    if path is None:
        sys.stderr.write("%s: not part of this mmpack installation (no %s in %s)\n"
                         % (name, name, _resources.program_folder()))
        sys.exit(127)
    os.execve(path, [name] + argv, env)


def _torch_lib_dir() -> Optional[str]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    lib = os.path.join(os.path.dirname(spec.origin), "lib")
    return lib if os.path.isdir(lib) else None


def mmpack() -> NoReturn:
    """`mmpack ...`: the mmpack program of this package."""
    _exec("mmpack", sys.argv[1:], _resources.program_env())


def mmtrain() -> NoReturn:
    """`mmtrain ...`: the mmtrain program of this package, with the environment's torch/lib
    first on the library path (a pip-installed torch keeps its libraries there)."""
    env = _resources.program_env()
    lib = _torch_lib_dir()
    if lib:
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")
    _exec("mmtrain", sys.argv[1:], env)
