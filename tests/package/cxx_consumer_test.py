"""`cmake --install` gives a C++ package: mmpack, mmtrain, libmm_reader, the public headers and
mmpackConfig.cmake, with which a project outside the tree (tests/package/consumer) builds
against `find_package(mmpack)` / `mmpack::reader` and reads a set that the installed mmpack
made; the installed programs find their plugin, and no installed file names a folder of the
build (installed with --strip, as the README says).
"""

import glob
import os
import shutil

import package_util as u

CONSUMER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "consumer")


class CxxPackage(u.TempDirTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.prefix = os.path.join(cls.tmp, "prefix")
        r = u.run(["cmake", "--install", u.BUILD_ROOT, "--prefix", cls.prefix, "--strip"])
        print("cmake --install --strip: %.1f s" % r.seconds)

    def test_installs_programs_library_headers_and_config(self):
        p = self.prefix
        for path in ("bin/mmpack", "lib/libmm_reader.so", "include/mm/reader.h",
                     "include/mm/format.h", "include/mm/status.h", "include/mm/version.h",
                     "lib/cmake/mmpack/mmpackConfig.cmake",
                     "lib/cmake/mmpack/mmpackConfigVersion.cmake",
                     "lib/hdf5/plugins/libh5z_zstd.so"):
            self.assertTrue(os.path.exists(os.path.join(p, path)), path)
        self.assertEqual(os.path.exists(os.path.join(p, "bin", "mmtrain")), u.TRAINER)
        self.assertTrue(glob.glob(os.path.join(p, "lib", "libmm_reader.so.0*")))

    def test_consumer_project_builds_and_reads_a_set(self):
        shards = os.path.join(self.tmp, "set")
        u.run([os.path.join(self.prefix, "bin", "mmpack"), "build", u.RAW, "-o", shards,
               "--tokenizer", u.ALBERT, "--image-size", "16"])
        build = os.path.join(self.tmp, "consumer-build")
        args = ["cmake", "-S", CONSUMER, "-B", build, "-DCMAKE_PREFIX_PATH=" + self.prefix,
                "-DCMAKE_BUILD_TYPE=Release"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        r = u.run(args)
        r2 = u.run(["cmake", "--build", build])
        print("consumer: configure %.1f s, build %.1f s" % (r.seconds, r2.seconds))
        out = u.run([os.path.join(build, "count_samples"), shards]).stdout
        samples = int(out.split()[1])
        self.assertGreater(samples, 0)
        self.assertIn("samples %d images %d version " % (samples, samples), out)

    def test_installed_programs_find_their_plugin(self):
        r = u.run([os.path.join(self.prefix, "bin", "mmpack"), "env"])
        self.assertIn("HDF5_PLUGIN_PATH='%s'" % os.path.join(self.prefix, "lib", "hdf5", "plugins"),
                      r.stdout)
        if u.TRAINER:
            self.assertIn("--shards", u.run([os.path.join(self.prefix, "bin", "mmtrain"),
                                             "--help"]).stdout)

    def test_nothing_installed_names_the_build_machine(self):
        self.assertEqual(u.files_naming(self.prefix, u.build_paths()), [])


if __name__ == "__main__":
    u.main([CxxPackage("test_installs_programs_library_headers_and_config"),
            CxxPackage("test_consumer_project_builds_and_reads_a_set"),
            CxxPackage("test_installed_programs_find_their_plugin"),
            CxxPackage("test_nothing_installed_names_the_build_machine")])
