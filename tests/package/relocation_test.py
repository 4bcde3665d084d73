"""A copied build names no folder of the build it came from (issue 25: a copied module ran
another checkout's `mmpack`; `mmpack env` printed the build tree's plugin folder). The build
tree's programs, plugin and Python package are copied into a folder of the same layout
(bin/, hdf5-plugins/, python/mmpack): the copy's module finds the copy's mmpack, the copy's
`mmpack env` names the copy's plugin folder, and a lone copy of mmpack says that it finds no
plugin instead of naming the build's.
"""

import os
import shutil

import package_util as u

BIN_DIR = os.environ["MM_BIN_DIR"]


class Relocation(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.copy = os.path.join(cls.tmp, "moved")
        os.makedirs(os.path.join(cls.copy, "bin"))
        shutil.copy2(os.path.join(BIN_DIR, "mmpack"), os.path.join(cls.copy, "bin"))
        shutil.copytree(os.path.join(u.BUILD_ROOT, "hdf5-plugins"),
                        os.path.join(cls.copy, "hdf5-plugins"))
        shutil.copytree(os.path.join(u.BUILD_ROOT, "python"), os.path.join(cls.copy, "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))

    def test_copied_module_runs_the_copied_mmpack(self):
        code = "import mmpack; print(mmpack.find_mmpack()); print(mmpack.plugin_dir())"
        env = {k: v for k, v in os.environ.items() if k not in ("MMPACK_BIN", "PYTHONPATH")}
        env["PYTHONPATH"] = os.path.join(self.copy, "python")
        env["PATH"] = "/usr/bin:/bin"  # no mmpack on it
        lines = u.run([u.PYTHON, "-c", code], env=env, cwd=self.tmp).stdout.split()
        self.assertEqual(lines, [os.path.join(self.copy, "bin", "mmpack"),
                                 os.path.join(self.copy, "hdf5-plugins")])

    def test_copied_mmpack_env_names_the_copied_plugin(self):
        out = u.run([os.path.join(self.copy, "bin", "mmpack"), "env"]).stdout
        self.assertIn("HDF5_PLUGIN_PATH='%s'" % os.path.join(self.copy, "hdf5-plugins"), out)

    def test_lone_mmpack_env_finds_no_plugin_and_says_so(self):
        lone = os.path.join(self.tmp, "lone")
        os.makedirs(lone)
        shutil.copy2(os.path.join(BIN_DIR, "mmpack"), lone)
        r = u.run([os.path.join(lone, "mmpack"), "env"], check=False)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("mmpack env: NotFound: the zstd filter plugin libh5z_zstd.so is not beside",
                      r.stdout)
        self.assertNotIn(u.BUILD_ROOT, r.stdout)


if __name__ == "__main__":
    u.main([Relocation("test_copied_module_runs_the_copied_mmpack"),
            Relocation("test_copied_mmpack_env_names_the_copied_plugin"),
            Relocation("test_lone_mmpack_env_finds_no_plugin_and_says_so")])
