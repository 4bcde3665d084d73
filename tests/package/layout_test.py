"""The checkout's top level is the fixed one (DESIGN.md's components, plus the files every
checkout has): packaging files live with what they package (reader/cmake, tools/cmake,
tools/python_package), and only pyproject.toml, which pip reads from the root, joins the list.
Checked on what git would commit: tracked files and untracked ones that .gitignore does not
hide (build trees are ignored). Skipped (77) where the checkout is not a git work tree.
"""

import os
import subprocess
import sys
import unittest

SKIP = 77  # ctest SKIP_RETURN_CODE (tests/package/CMakeLists.txt)
SOURCE_DIR = os.environ["MM_SOURCE_DIR"]
ALLOWED = {"CMakeLists.txt", "tools", "reader", "trainer", "schemas", "tests", "examples",
           "README.md", "pyproject.toml"}


def git_files(*args):
    r = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files", "-z"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    return [p for p in r.stdout.decode().split("\0") if p]


class Layout(unittest.TestCase):
    def test_top_level_holds_only_the_fixed_entries(self):
        files = git_files() + git_files("--others", "--exclude-standard")
        top = {p.split("/", 1)[0] for p in files}
        extra = sorted(t for t in top - ALLOWED if not t.startswith("."))
        self.assertEqual(extra, [], "not allowed at the top level: %s (move them into the "
                         "folder they belong to)" % ", ".join(extra))

    def test_backend_refuses_an_sdist_in_one_line(self):
        # pyproject.toml's backend (tools/python_package) loaded as a frontend loads it: an
        # sdist would lack the C++ tree, so build_sdist says so and writes nothing.
        out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "layout_test_sdist_%d" % os.getpid())
        code = ("import sys; sys.path[:0] = ['tools/python_package']\n"
                "import mmpack_build_backend as b\n"
                "try:\n    b.build_sdist(sys.argv[1])\n"
                "except RuntimeError as e:\n    print('ERROR', e)\n")
        r = subprocess.run([sys.executable, "-c", code, out], cwd=SOURCE_DIR, check=True,
                           stdout=subprocess.PIPE, text=True)
        self.assertRegex(r.stdout, r"^ERROR mmpack_build_backend: mmpack has no source "
                         r"distribution .*pip wheel --no-build-isolation --no-deps \.\n$")
        self.assertFalse(os.path.exists(out))

if __name__ == "__main__":
    inside = subprocess.run(["git", "-C", SOURCE_DIR, "rev-parse", "--is-inside-work-tree"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if inside.returncode != 0 or inside.stdout.strip() != b"true":
        print("layout_test: %s is not a git work tree: skipped" % SOURCE_DIR)
        sys.exit(SKIP)
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
