#!/usr/bin/env python3
"""Copies the shared libraries a Python package's ELF files link into the package, as
`auditwheel repair` does for a manylinux wheel, so that the package runs where those libraries
are not installed.

Usage: tools/bundle_libs.py PACKAGE_DIR   (tools/python_package/setup.py runs it on the built
                                          mmpack/ folder)

For each ELF file of PACKAGE_DIR (the extension, bin/*, hdf5-plugins/*): every library it
needs, directly or through another, is copied into PACKAGE_DIR/_libs, except
  - glibc's (libc, libm, libpthread, libdl, librt, ld-linux, ...), libstdc++ and libgcc_s,
    which every Linux that can run the build has (manylinux's rule), and
  - LibTorch (libtorch*, libc10*) and every library reached through it: mmtrain runs against
    the torch of its environment (mmpack/_cli.py puts torch/lib on the library path) or the
    system's LibTorch it was built with.
Each copy is renamed with a hash of its content (libhdf5_serial.so.103 ->
libhdf5_serial-1a2b3c4d.so.103; its SONAME too) and the files that need it are patched to
need the new name, so that another copy of the same library in the process (h5py's libhdf5,
torch's libz) never stands in for it, nor it for them. RPATHs are set relative ($ORIGIN):
nothing names a folder of the build machine. Needs patchelf (Debian: patchelf) and ldd.

Prints one line per library copied and the total size. Errors: exits non-zero naming a
library that cannot be found.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys

LIBS = "_libs"
# glibc, the C++ runtime and the kernel's vDSO: never copied.
SYSTEM = re.compile(r"^(linux-vdso\.so|ld-linux[-\w]*\.so|libc\.so|libm\.so|libpthread\.so|"
                    r"libdl\.so|librt\.so|libutil\.so|libresolv\.so|libnsl\.so|libanl\.so|"
                    r"libmvec\.so|libstdc\+\+\.so|libgcc_s\.so)")
TORCH = re.compile(r"^lib(torch|c10)")


def patchelf(*args):
    return subprocess.run(["patchelf", *args], check=True, stdout=subprocess.PIPE,
                          text=True).stdout


def needed(path):
    return patchelf("--print-needed", path).split()


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def resolved(path):
    """{soname: file} for every library the dynamic loader finds for `path` (ldd)."""
    out = subprocess.run(["ldd", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(0x", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def closure(roots, where):
    """The sonames reachable from `roots` (sonames), not descending into SYSTEM ones."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or SYSTEM.match(name):
            continue
        seen.add(name)
        if name in where:
            todo += needed(where[name])
    return seen


def hashed_name(soname, path):
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, dot, rest = soname.partition(".so")
    return "%s-%s%s%s" % (stem, digest, dot, rest)


def main(package):
    elves = []
    for folder, _, names in os.walk(package):
        if os.path.relpath(folder, package).split(os.sep)[0] == LIBS:
            continue
        elves += [os.path.join(folder, n) for n in names
                  if is_elf(os.path.join(folder, n))]
    libs_dir = os.path.join(package, LIBS)
    os.makedirs(libs_dir, exist_ok=True)
    copies = {}  # soname -> new file name
    mine = {}  # ELF file -> the sonames it gets from _libs (not those of its LibTorch side)
    total = 0
    for elf in sorted(elves):
        where = resolved(elf)
        direct = needed(elf)
        torch_side = closure([n for n in direct if TORCH.match(n)], where)
        mine[elf] = closure([n for n in direct if not TORCH.match(n)], where) - torch_side
        for name in sorted(mine[elf]):
            if name in copies:
                continue
            if name not in where or where[name] == "not":
                sys.exit("bundle_libs: %s needs %s, which the dynamic loader does not find"
                         % (elf, name))
            new = hashed_name(name, where[name])
            shutil.copyfile(where[name], os.path.join(libs_dir, new))
            os.chmod(os.path.join(libs_dir, new), 0o755)
            copies[name] = new
            size = os.path.getsize(os.path.join(libs_dir, new))
            total += size
            print("bundle_libs: %-32s %s (%.1f MB)" % (name, where[name], size / 1e6))
    # Point every file at the copies: their new names, and RPATHs relative to each file.
    bundled = [os.path.join(libs_dir, n) for n in copies.values()]
    # One change per patchelf call: patchelf 0.14 (Debian 12) corrupts the dynamic string
    # table when one call both replaces needed names and sets the RPATH.
    for path in elves + bundled:
        replace = []
        for old in needed(path):
            if old in mine.get(path, copies):
                replace += ["--replace-needed", old, copies[old]]
        if replace:
            patchelf(*replace, path)
        if path in bundled:
            patchelf("--set-soname", os.path.basename(path), path)
        rel = os.path.relpath(libs_dir, os.path.dirname(path))
        rpath = "$ORIGIN" if rel == "." else "$ORIGIN/" + rel
        if any(TORCH.match(n) for n in needed(path)):  # pip's torch: site-packages/torch/lib
            rpath += ":$ORIGIN/" + os.path.relpath(os.path.join(os.path.dirname(package),
                                                                "torch", "lib"),
                                                   os.path.dirname(path))
        patchelf("--remove-rpath", path)
        patchelf("--force-rpath", "--set-rpath", rpath, path)
    print("bundle_libs: %d libraries, %.1f MB, in %s" % (len(copies), total / 1e6, libs_dir))


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: bundle_libs.py PACKAGE_DIR")
    main(os.path.abspath(sys.argv[1]))
