"""`pip wheel .` gives a wheel that carries the shared libraries it links (tools/bundle_libs.py)
and works where those libraries are not installed: the wheel is made from the build tree
(MMPACK_BUILD_DIR: nothing is compiled again), installed with `pip install --target` (no venv),
then used in a private mount namespace where the system's copy of every library the wheel
carries is /dev/null and libvips' loadable modules are gone: the package builds a set with its
own mmpack, reads it, runs a Loader epoch; its programs resolve every library in the package.
The libraries the interpreter itself maps (libz, libexpat, numpy's BLAS...) stay visible: they
are the interpreter's, listed in the output.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import zipfile

import package_util as u

SKIP = 77  # ctest SKIP_RETURN_CODE (tests/package/CMakeLists.txt)
# Libraries every Linux has (not carried, tools/bundle_libs.py): glibc, libstdc++, libgcc_s.
SYSTEM = re.compile(r"/(ld-linux[-\w]*|libc|libm|libpthread|libdl|librt|libutil|libresolv|"
                    r"libnsl|libanl|libmvec|libstdc\+\+|libgcc_s)\.so[.\d]*$")


# hide.py LIST GLOB CMD...: in this (private) mount namespace, bind /dev/null over each file of
# LIST, mount an empty tmpfs over each folder matching GLOB, then exec CMD.
HIDE_SCRIPT = r"""
import ctypes, glob, os, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_BIND = 4096
def mount(source, target, fstype, flags):
    if libc.mount(source.encode(), target.encode(), fstype and fstype.encode(), flags, None):
        sys.exit("hide.py: mount %s: %s" % (target, os.strerror(ctypes.get_errno())))
for path in open(sys.argv[1]).read().split():
    mount("/dev/null", path, None, MS_BIND)
for folder in glob.glob(sys.argv[2]):
    mount("none", folder, "tmpfs", 0)
os.execvp(sys.argv[3], sys.argv[3:])
"""


def original_soname(carried):
    """libhdf5_serial-1a2b3c4d.so.103 -> libhdf5_serial.so.103."""
    return re.sub(r"-[0-9a-f]{8}(?=\.so)", "", carried)


def system_paths():
    """{soname: file} of the dynamic loader's cache (ldconfig -p)."""
    out = u.run(["ldconfig", "-p"]).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m:
            found.setdefault(m.group(1), m.group(2))
    return found


def interpreter_maps():
    """The shared libraries Debian's python3 maps for numpy and the standard modules the test
    uses, before any mmpack."""
    code = ("import json, subprocess, tempfile, hashlib, numpy\n"
            "print('\\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps') "
            "if '.so' in l.split()[-1]})))")
    return {os.path.realpath(p) for p in u.run([u.PYTHON, "-c", code]).stdout.split()}


class Wheel(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        wheels = os.path.join(cls.tmp, "wheels")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_NO_CACHE_DIR="1",
                   MMPACK_BUILD_DIR=u.BUILD_ROOT)
        r = u.run([u.PYTHON, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
                   "-w", wheels, u.SOURCE_DIR], env=env, cwd=cls.tmp, timeout=1800)
        print("pip wheel . (reusing the build tree): %.0f s" % r.seconds)
        print("\n".join(line for line in r.stdout.splitlines() if "bundle_libs:" in line)[-400:])
        found = glob.glob(os.path.join(wheels, "mmpack-*.whl"))
        assert len(found) == 1, found
        cls.wheel = found[0]
        print("wheel: %s, %.1f MB" % (os.path.basename(cls.wheel),
                                       os.path.getsize(cls.wheel) / 1e6))
        cls.site = os.path.join(cls.tmp, "site")
        r = u.run([u.PYTHON, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                   cls.site, cls.wheel], env=env)
        print("pip install --target (the wheel): %.0f s" % r.seconds)
        cls.package = os.path.join(cls.site, "mmpack")
        cls.libs = os.path.join(cls.package, "_libs")

    def hidden(self):
        """A command prefix that runs its command with the carried libraries' system copies
        hidden (bind-mounted /dev/null) and libvips' modules folder emptied."""
        where = system_paths()
        own = interpreter_maps()
        hide, kept = set(), set()
        for carried in os.listdir(self.libs):
            name = original_soname(carried)
            self.assertIn(name, where, "%s: no system copy of %s to hide" % (carried, name))
            real = os.path.realpath(where[name])
            (kept if real in own else hide).add(real)
        print("hidden: %d system libraries; kept for the interpreter itself: %s"
              % (len(hide), ", ".join(sorted(os.path.basename(k) for k in kept)) or "none"))
        listing = os.path.join(self.tmp, "hide.txt")
        with open(listing, "w", encoding="utf-8") as f:
            f.write("\n".join(sorted(hide)) + "\n")
        # mount(8) links libraries that are hidden here (libblkid, libmount): the interpreter
        # mounts through mount(2) itself (HIDE_SCRIPT).
        script = os.path.join(self.tmp, "hide.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(HIDE_SCRIPT)
        return ["unshare", "-m", "--propagation", "private", u.PYTHON, script, listing,
                "/usr/lib/x86_64-linux-gnu/vips-modules-*"]

    def test_wheel_carries_the_libraries_and_no_build_path(self):
        with zipfile.ZipFile(self.wheel) as z:
            names = z.namelist()
            z.extractall(os.path.join(self.tmp, "unzipped"))
        self.assertIn("mmpack/bin/mmpack", names)
        self.assertIn("mmpack/hdf5-plugins/libh5z_zstd.so", names)
        self.assertEqual("mmpack/bin/mmtrain" in names, u.TRAINER)
        carried = [n for n in names if n.startswith("mmpack/_libs/")]
        for lib in ("libhdf5", "libzstd", "libcurl", "libvips", "libsentencepiece"):
            self.assertTrue([n for n in carried if lib in n], (lib, carried))
        self.assertFalse([n for n in carried if re.search(r"/lib(torch|c10|stdc\+\+|c)[-.]", n)],
                         carried)
        self.assertEqual(u.files_naming(os.path.join(self.tmp, "unzipped"), u.build_paths()), [])

    def test_reads_and_builds_with_the_system_libraries_hidden(self):
        wrap = self.hidden()
        # The hiding works: the build tree's mmpack, which links the system's libraries, no
        # longer starts.
        r = u.run(wrap + [os.path.join(os.environ["MM_BIN_DIR"], "mmpack"), "--version"],
                  check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        report = u.use_installed(u.PYTHON, os.path.join(self.tmp, "hidden"),
                                 env={"PYTHONPATH": self.site}, wrap=wrap)
        self.assertEqual(os.path.dirname(report["extension"]), self.package)
        self.assertEqual(report["mmpack"], os.path.join(self.package, "bin", "mmpack"))
        self.assertEqual(report["epoch"], list(range(report["samples"])))
        # Every library mapped is the package's, glibc's or libstdc++'s, one the interpreter
        # mapped anyway, or an extension module of the interpreter's own folders (numpy's).
        own = interpreter_maps()
        modules = tuple(p + "/" for p in u.run([u.PYTHON, "-c", "import sys; print("
                                                "'\\n'.join(p for p in sys.path if p))"],
                                               cwd="/").stdout.split())
        foreign = [m for m in report["maps"] if not m.startswith(self.package + "/")
                   and os.path.realpath(m) not in own and not SYSTEM.search(m)
                   and not m.startswith(modules)]
        self.assertEqual(foreign, [])
        self.assertTrue([m for m in report["maps"] if m.startswith(self.libs + "/libhdf5")])
        # Each program and the plugin find all their libraries in the package.
        programs = [os.path.join(self.package, "bin", "mmpack"),
                    os.path.join(self.package, "hdf5-plugins", "libh5z_zstd.so")]
        for program in programs:
            out = u.run(wrap + ["ldd", program]).stdout
            for m in re.finditer(r"(\S+) => (\S+)", out):
                lib = os.path.normpath(m.group(2))
                self.assertTrue(lib.startswith(self.libs + "/") or SYSTEM.search(lib),
                                "%s: %s" % (program, m.group(0)))
        out = os.path.join(self.tmp, "hidden", "set")
        u.run(wrap + [os.path.join(self.site, "bin", "mmpack"), "verify", out],
              env=dict(os.environ, PYTHONPATH=self.site))

    def test_env_names_the_package_plugin_and_mmtrain_runs(self):
        env = dict(os.environ, PYTHONPATH=self.site)  # pip install --target: no venv
        r = u.run([os.path.join(self.site, "bin", "mmpack"), "env"], env=env)
        self.assertIn("HDF5_PLUGIN_PATH='%s'" % os.path.join(self.package, "hdf5-plugins"),
                      r.stdout)
        if u.TRAINER:  # against the system's LibTorch (not carried)
            r = u.run([os.path.join(self.site, "bin", "mmtrain"), "--help"], env=env)
            self.assertIn("--shards", r.stdout)

    def test_carried_libvips_loads_no_system_module(self):
        # The system's vips-modules-8.x link the system's libvips and GLib: loaded by the
        # carried libvips they would put a second copy of each in the process.
        if not glob.glob("/usr/lib/x86_64-linux-gnu/vips-modules-*/*.so"):
            self.skipTest("no system libvips modules here to stay away from")
        env = dict(os.environ, PYTHONPATH=self.site, LD_DEBUG="files")
        out = os.path.join(self.tmp, "modules-set")
        r = u.run([os.path.join(self.site, "bin", "mmpack"), "build", u.RAW, "-o", out,
                   "--tokenizer", u.ALBERT, "--image-size", "16"], env=env)
        self.assertIn("libvips-", r.stdout)  # LD_DEBUG saw the carried libvips load
        self.assertNotIn("vips-modules", r.stdout)


if __name__ == "__main__":
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-m", "true"], stderr=subprocess.DEVNULL).returncode != 0:
        print("SKIP: no mount namespace here (unshare -m needs CAP_SYS_ADMIN)")
        sys.exit(SKIP)
    u.main([Wheel("test_wheel_carries_the_libraries_and_no_build_path"),
            Wheel("test_reads_and_builds_with_the_system_libraries_hidden"),
            Wheel("test_env_names_the_package_plugin_and_mmtrain_runs"),
            Wheel("test_carried_libvips_loads_no_system_module")])
