"""`cpack -G DEB` gives a Debian package whose Depends name the package of every shared library
its programs, module, plugin and libmm_reader link (as dpkg knows them), plus the Python the
module is built for and numpy; whose contents are the programs, the Python package (in
/usr/lib/python3/dist-packages), libmm_reader with headers and mmpackConfig.cmake and the
plugin; and whose programs and module, unpacked into a root of their own, run and find one
another there. No file of it names a folder of the build.
"""

import glob
import os
import re
import sys

import package_util as u


def package_of(lib):
    """The Debian package that holds shared library `lib` (dpkg -S), or None."""
    real = os.path.realpath(lib)
    for path in (lib, real, re.sub(r"^/usr/lib/", "/lib/", real),
                 re.sub(r"^/lib/", "/usr/lib/", real)):
        r = u.run(["dpkg", "-S", path], check=False)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def direct_libraries(elf):
    """The files of the libraries `elf` needs directly (DT_NEEDED resolved by ldd)."""
    where = dict(re.findall(r"\s(\S+) => (\S+) \(0x", u.run(["ldd", elf]).stdout))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]",
                        u.run(["readelf", "-d", elf]).stdout)
    return [where[n] for n in needed if n in where]


class DebPackage(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        config = os.path.join(u.BUILD_ROOT, "CPackConfig.cmake")
        r = u.run(["cpack", "-G", "DEB", "--config", config, "-B", os.path.join(cls.tmp, "pkg")],
                  cwd=u.BUILD_ROOT, timeout=1800)
        print("cpack -G DEB: %.0f s" % r.seconds)
        debs = glob.glob(os.path.join(cls.tmp, "pkg", "*.deb"))
        assert len(debs) == 1, r.stdout
        cls.deb = debs[0]
        print("package: %s, %.1f MB" % (os.path.basename(cls.deb), os.path.getsize(cls.deb) / 1e6))
        cls.root = os.path.join(cls.tmp, "root")
        u.run(["dpkg-deb", "-x", cls.deb, cls.root])
        cls.site = os.path.join(cls.root, "usr", "lib", "python3", "dist-packages")

    def test_depends_names_the_package_of_every_linked_library(self):
        fields = u.run(["dpkg-deb", "-f", self.deb, "Package", "Version", "Depends"]).stdout
        print(fields)
        depends = {d.strip().split()[0] for d in
                   re.search(r"^Depends: (.*)$", fields, re.M).group(1).split(",")}
        elves = [os.path.join(self.root, "usr", "bin", "mmpack"),
                 os.path.join(self.root, "usr", "lib", "hdf5", "plugins", "libh5z_zstd.so")]
        elves += glob.glob(os.path.join(self.site, "mmpack", "_mmpack*.so"))
        elves += glob.glob(os.path.join(self.root, "usr", "lib", "libmm_reader.so.*.*"))
        if u.TRAINER:
            elves.append(os.path.join(self.root, "usr", "bin", "mmtrain"))
        missing = []
        for elf in elves:
            for lib in direct_libraries(elf):
                package = package_of(lib)
                if package and package not in depends:
                    missing.append("%s: %s (%s)" % (os.path.basename(elf), lib, package))
        self.assertEqual(missing, [])
        self.assertIn("python3", depends)
        self.assertIn("python3-numpy", depends)
        self.assertRegex(fields, r"python3 \(>= %d\.%d~\), python3 \(<< %d\.%d\)"
                         % (sys.version_info[0], sys.version_info[1], sys.version_info[0],
                            sys.version_info[1] + 1))

    def test_contents(self):
        listing = u.run(["dpkg-deb", "-c", self.deb]).stdout
        paths = {line.split()[5] for line in listing.splitlines()}
        for path in ("./usr/bin/mmpack", "./usr/lib/libmm_reader.so",
                     "./usr/include/mm/reader.h", "./usr/include/mm/version.h",
                     "./usr/lib/cmake/mmpack/mmpackConfig.cmake",
                     "./usr/lib/hdf5/plugins/libh5z_zstd.so",
                     "./usr/lib/python3/dist-packages/mmpack/__init__.py",
                     "./usr/lib/python3/dist-packages/mmpack/_config.py"):
            self.assertIn(path, paths)
        self.assertEqual("./usr/bin/mmtrain" in paths, u.TRAINER)
        self.assertRegex(listing,
                         r"\./usr/lib/python3/dist-packages/mmpack/_mmpack\.cpython-\S+\.so")
        self.assertNotIn("./usr/local", listing)

    def test_unpacked_programs_and_module_run_and_find_each_other(self):
        mmpack = os.path.join(self.root, "usr", "bin", "mmpack")
        self.assertRegex(u.run([mmpack, "--version"]).stdout, r"^mmpack \d+\.\d+\.\d+")
        self.assertIn("HDF5_PLUGIN_PATH='%s'" % os.path.join(self.root, "usr", "lib", "hdf5",
                                                              "plugins"),
                      u.run([mmpack, "env"]).stdout)
        report = u.use_installed(u.PYTHON, os.path.join(self.tmp, "use"),
                                 env={"PYTHONPATH": self.site})
        self.assertEqual(report["mmpack"], mmpack)
        self.assertEqual(report["epoch"], list(range(report["samples"])))
        u.run([mmpack, "verify", os.path.join(self.tmp, "use", "set")])
        if u.TRAINER:
            mmtrain = os.path.join(self.root, "usr", "bin", "mmtrain")
            self.assertIn("--shards", u.run([mmtrain, "--help"]).stdout)

    def test_nothing_in_it_names_the_build_machine(self):
        self.assertEqual(u.files_naming(self.root, u.build_paths()), [])


if __name__ == "__main__":
    u.main([DebPackage("test_depends_names_the_package_of_every_linked_library"),
            DebPackage("test_contents"),
            DebPackage("test_unpacked_programs_and_module_run_and_find_each_other"),
            DebPackage("test_nothing_in_it_names_the_build_machine")])
