"""`pip install --no-build-isolation .` as a user runs it: into a fresh venv
(--system-site-packages, for Debian's setuptools, wheel and numpy) from a copy of the checkout,
pyproject.toml's in-tree backend running tools/python_package/setup.py, which configures and
builds CMake for the venv's interpreter (its build folder beside the copy's sources, as build/
is beside the checkout's, so that ccache serves the build tree's objects), then `import mmpack` with a build, a read and a Loader epoch from another folder, the
console commands, `mmpack env` with h5dump and h5py, no folder of the build in any installed
file, and `pip uninstall` leaving nothing behind.
"""

import glob
import os
import re

import package_util as u


class PipInstall(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.src = os.path.join(cls.tmp, "src")
        u.copy_checkout(cls.src)
        cls.venv = os.path.join(cls.tmp, "venv")
        u.run([u.PYTHON, "-m", "venv", "--system-site-packages", cls.venv])
        cls.python = os.path.join(cls.venv, "bin", "python")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_NO_CACHE_DIR="1",
                   MMPACK_BUILD_DIR=os.path.join(cls.src, "build-pip"),
                   MMPACK_CMAKE_ARGS="-DMM_WERROR=" + os.environ.get("MM_WERROR", "OFF"))
        r = u.run([cls.python, "-m", "pip", "install", "-v", "--no-build-isolation", cls.src],
                  env=env, cwd=cls.tmp, timeout=2400)
        print("pip install --no-build-isolation .: %.0f s" % r.seconds)
        compiled = len(re.findall(r"Building C(XX)? object", r.stdout))
        print("  %d objects compiled (ccache hits included), log tail:" % compiled)
        print("\n".join(r.stdout.splitlines()[-8:]))
        cls.site = u.run([cls.python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                          "['purelib'])"]).stdout.strip()
        cls.package = os.path.join(cls.site, "mmpack")

    def test_package_holds_the_module_programs_plugin_and_libraries(self):
        p = self.package
        self.assertEqual(len(glob.glob(os.path.join(p, "_mmpack.cpython-*.so"))), 1)
        self.assertTrue(os.access(os.path.join(p, "bin", "mmpack"), os.X_OK))
        self.assertTrue(os.path.isfile(os.path.join(p, "hdf5-plugins", "libh5z_zstd.so")))
        self.assertTrue(glob.glob(os.path.join(p, "_libs", "libhdf5*.so*")), os.listdir(p))
        self.assertEqual(os.path.exists(os.path.join(p, "bin", "mmtrain")), u.TRAINER)
        self.assertTrue(os.path.isfile(os.path.join(self.venv, "bin", "mmpack")))
        self.assertEqual(os.path.isfile(os.path.join(self.venv, "bin", "mmtrain")), u.TRAINER)

    def test_builds_reads_and_loads_from_another_folder(self):
        report = u.use_installed(self.python, os.path.join(self.tmp, "elsewhere"))
        self.assertEqual(os.path.dirname(report["module"]), self.package)
        self.assertEqual(os.path.dirname(report["extension"]), self.package)
        self.assertEqual(report["mmpack"], os.path.join(self.package, "bin", "mmpack"))
        self.assertEqual(report["plugin"], os.path.join(self.package, "hdf5-plugins"))
        self.assertGreater(report["samples"], 0)
        self.assertEqual(report["epoch"], list(range(report["samples"])))
        self.assertEqual(report["shape"], [32, 32, 3])
        hdf5 = [m for m in report["maps"] if "libhdf5" in os.path.basename(m)]
        self.assertTrue(hdf5 and all(m.startswith(self.package + "/_libs/") for m in hdf5), hdf5)

    def test_console_commands_run_the_package_programs(self):
        bin_dir = os.path.join(self.venv, "bin")
        r = u.run([os.path.join(bin_dir, "mmpack"), "--version"])
        self.assertRegex(r.stdout, r"^mmpack \d+\.\d+\.\d+")
        out = os.path.join(self.tmp, "cli-set")
        u.run([os.path.join(bin_dir, "mmpack"), "build", u.RAW, "-o", out, "--tokenizer",
               u.ALBERT, "--image-size", "16"])
        u.run([os.path.join(bin_dir, "mmpack"), "verify", out])
        env_text = u.run([os.path.join(bin_dir, "mmpack"), "env"]).stdout
        self.assertIn("HDF5_PLUGIN_PATH='%s'" % os.path.join(self.package, "hdf5-plugins"),
                      env_text)
        # The lines work: h5dump and Debian's h5py read a zstd chunk through the plugin.
        shard = os.path.join(out, "shard-000000.h5")
        script = ('eval "$("$0" env)" && h5dump -d images -s 0,0,0,0 -c 1,1,1,3 "$1" && '
                  '/usr/bin/python3 -c "import h5py, sys; '
                  'print(\'SUM\', int(h5py.File(sys.argv[1])[\'images\'][0].sum()))" "$1"')
        env = {k: v for k, v in os.environ.items() if k not in ("HDF5_PLUGIN_PATH", "PYTHONPATH")}
        r = u.run(["bash", "-c", script, os.path.join(bin_dir, "mmpack"), shard], env=env)
        self.assertIn("(0,0,0,0): ", r.stdout)
        total = u.run([self.python, "-c", "import mmpack, sys; "
                       "print(int(mmpack.ShardSet(sys.argv[1])[0]['image'].sum()))", out])
        self.assertIn("SUM %s" % total.stdout.strip(), r.stdout)
        if u.TRAINER:
            r = u.run([os.path.join(bin_dir, "mmtrain"), "--help"])
            self.assertIn("--shards", r.stdout)

    def test_nothing_installed_names_the_build_machine(self):
        paths = u.build_paths() + [self.src]
        infos = glob.glob(os.path.join(self.site, "mmpack-*.dist-info"))
        self.assertEqual(len(infos), 1, infos)
        # direct_url.json is pip's record of where the install came from (PEP 610), which
        # mmpack never reads; it names the source folder by design.
        found = u.files_naming(self.package, paths) + u.files_naming(infos[0], paths)
        self.assertEqual([f for f in found if "/direct_url.json: " not in f], [])

    def test_uninstall_leaves_nothing_behind(self):
        u.run([self.python, "-m", "pip", "uninstall", "-y", "mmpack"])
        left = [n for n in os.listdir(self.site) if "mmpack" in n.lower()]
        left += [n for n in os.listdir(os.path.join(self.venv, "bin"))
                 if n in ("mmpack", "mmtrain")]
        self.assertEqual(left, [])


if __name__ == "__main__":
    u.main([PipInstall("test_package_holds_the_module_programs_plugin_and_libraries"),
            PipInstall("test_builds_reads_and_loads_from_another_folder"),
            PipInstall("test_console_commands_run_the_package_programs"),
            PipInstall("test_nothing_installed_names_the_build_machine"),
            PipInstall("test_uninstall_leaves_nothing_behind")])
