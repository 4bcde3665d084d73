"""mmpack.build: runs the `mmpack build` command (the shard compiler) as a subprocess.

The compiler stays a separate process: it links sentencepiece, whose bundled protobuf crashes
in a process that also loads torch, so the Python module never links it.
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import warnings
from typing import Any, Dict, List, Optional, Union

from mmpack import _mmpack, _resources
from mmpack._shard_set import PathLike


class BuildError(_mmpack.Error):
    """`mmpack build` failed. str(e) is the tool's error line (for example "mmpack build:
    NotFound: input 'raw/' does not exist"); e.returncode and e.output (its last lines of
    stderr) say more."""

    def __init__(self, message: str, returncode: int, output: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.output = output


class BuildWarning(UserWarning):
    """What `mmpack build` warned of on stderr ("mmpack build: warning: TEXT"; for example 12.3%
    of the token ids are <unk>, try --lowercase): build() issues warnings.warn(TEXT,
    BuildWarning) for each such line once the tool has finished, verbose or not."""


_WARNING_PREFIX = "mmpack build: warning: "


def find_mmpack() -> str:
    """The `mmpack` binary build() runs: $MMPACK_BIN if set; else the one that came with this
    package (found relative to it: mmpack/bin/mmpack once pip-installed, BUILD/bin/mmpack in a
    build tree, PREFIX/bin/mmpack after `cmake --install`); else the first `mmpack` on PATH.
    Errors: FileNotFoundError naming where it looked."""
    env = os.environ.get("MMPACK_BIN")
    if env:
        if os.access(env, os.X_OK):
            return env
        raise FileNotFoundError("MMPACK_BIN=%s is not an executable file" % env)
    mine = _resources.program("mmpack")
    if mine:
        return mine
    on_path = shutil.which("mmpack")
    if on_path:
        return on_path
    raise FileNotFoundError("no mmpack binary: set MMPACK_BIN, or put mmpack on PATH (looked "
                            "in %s and on PATH)" % _resources.program_folder())


def _flag_args(options: Dict[str, Any]) -> List[str]:
    """Keyword options as command-line flags: image_size=224 -> --image-size 224; a (W, H) pair
    -> WxH; a list of str -> a,b,c (keep_fields=["url", "similarity"]); True -> the bare flag;
    False or None -> left out."""
    args = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
            args += [flag, ",".join(value)]
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            args += [flag, "%dx%d" % (int(value[0]), int(value[1]))]
        else:
            args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def build(raw: PathLike, out: PathLike, *, verbose: bool = False,
          mmpack: Optional[str] = None,
          **options: Union[str, int, bool, None]) -> Optional[Dict[str, Any]]:
    """Compiles raw image-text pairs into a shard set: runs `mmpack build RAW -o OUT [flags]`.

    Keyword options are `mmpack build --help`'s flags with _ for -: tokenizer="spm.model",
    image_size=224 (or (W, H)), resize_mode="pad", samples_per_shard=1000, compression="none",
    compression_level=3, threads=8, overwrite=True, ... True gives a bare flag, False/None
    leaves it out. An unknown option fails like a bad flag (BuildError naming it).

    Args:
        raw: a folder of pairs, a manifest (.jsonl/.csv/.tsv/COCO .json) or a .tar.
        out: the output directory (must not exist unless overwrite=True).
        verbose: pass the tool's progress and summary (stderr) through to sys.stderr.
        mmpack: the binary to run (default: find_mmpack()).

    A build in parts (part="I/N", or part="auto" under mpirun/srun: `mmpack build --part`)
    builds this process's share; the last part to finish publishes OUT. Without `part` the
    whole input is built here, even in a process that mpirun or srun started.

    Returns the new set's index.json as a dict (mmpack.ShardSet(out) opens it); None for a part
    that another part is to publish (OUT does not exist yet: wait for the other parts).
    Warnings: each "mmpack build: warning: ..." line of the tool (a high <unk> rate, an old set
    that could not be removed) as warnings.warn(..., mmpack.BuildWarning), also on failure.
    Errors: BuildError with the tool's error line (bad input path, bad flag, existing output,
    ...); FileNotFoundError when no mmpack binary is found. Samples that cannot be read are
    not errors: they are skipped and listed in OUT/report.json.
    """
    cmd = [mmpack or find_mmpack(), "build", os.fspath(raw), "-o", os.fspath(out)]
    cmd += _flag_args(options)
    tail: "collections.deque[str]" = collections.deque(maxlen=50)
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace",
                          env=_resources.program_env()) as proc:
        assert proc.stderr is not None
        found = []
        for line in proc.stderr:
            tail.append(line.rstrip("\n"))
            if line.startswith(_WARNING_PREFIX):
                found.append(line[len(_WARNING_PREFIX):].rstrip("\n"))
            if verbose:
                sys.stderr.write(line)
    for text in found:
        warnings.warn(text, BuildWarning, stacklevel=2)
    if proc.returncode != 0:
        # The error line is the last one; CLI11 (a bad flag) adds a "Run with --help" hint.
        lines = [line for line in tail if line.strip() and not line.startswith("Run with --help")]
        message = lines[-1] if lines else "mmpack build exited with status %d" % proc.returncode
        raise BuildError(message, proc.returncode, "\n".join(tail))
    index = os.path.join(os.fspath(out), "index.json")
    if not os.path.isfile(index):
        lines = [line for line in tail if line.strip()]
        said = lines[-1] if lines else "no output"
        if options.get("part"):  # one part built; the last part to finish publishes OUT
            return None
        raise BuildError("mmpack build exited 0 without writing %s (it said: %s)" % (index, said),
                         0, "\n".join(tail))
    with open(index, encoding="utf-8") as f:
        return json.load(f)
