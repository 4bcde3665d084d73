"""Checks that keep the docs from drifting from the tree (run by ctest as docs_first_lines,
docs_no_history and docs_paths; usage: docs_test.py first_lines|no_history|paths).

first_lines: every source file of reader/, trainer/, schemas/, tools/ and examples/ opens with a
line that says what it is, because the READMEs keep no per-file tables: the map of a folder is
`head -qn1` of its files. A header opens with "// NAME: " (or "// dir/NAME: ", as
"// mm/reader.h: "; "/* NAME: " in C); a .c/.cc file with a comment, or with the include of its
own header (which describes it); a Python file (after a #! line) with a docstring or a "#"
comment.

no_history: product code, its comments and the Markdown describe what is, not how it came to
be: no "issue N" (the issue tracker is not the code's documentation; say the reason instead).
Tests may name the defect they guard against; they are not scanned.

paths: a file named by its path from the repository's root (`reader/src/shard/shard.h`), anywhere in
product code, tests or Markdown, exists; in a README, a backticked path from the README's own
folder (`src/shard.h` in reader/README.md) exists too. So a moved or deleted file cannot leave
a description pointing at nothing.

Exits non-zero naming each file and line that breaks a rule."""
import os
import re
import sys

ROOT = os.environ.get("MM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FOLDERS = ["reader", "trainer", "schemas", "tools", "examples"]
SKIP_DIRS = {"data", "build", "__pycache__", "node_modules"}


def walk(exts):
    for top in FOLDERS:
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                if name.endswith(exts):
                    yield os.path.join(base, name)


def rel(path):
    return os.path.relpath(path, ROOT)


def first_lines():
    bad, n = [], 0
    for path in walk((".h", ".hpp", ".c", ".cc", ".py", ".pyi", ".py.in")):
        n += 1
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines() or [""]
        first = lines[0]
        if name.endswith((".h", ".hpp")):
            ok = re.match(r"(//|/\*) (\S+/)?%s: \S" % re.escape(name), first)
            want = "'// %s: what it is'" % name
        elif name.endswith((".c", ".cc")):
            stem = name.rsplit(".", 1)[0]
            ok = first.startswith(("// ", "/* ")) or re.match(
                r'#include [<"](\S+/)?%s\.h[">]' % re.escape(stem), first)
            want = "a '//' comment or the include of %s.h" % stem
        else:
            if first.startswith("#!") and len(lines) > 1:
                first = lines[1]
            ok = first.startswith('"""') or first.startswith("# ")
            want = "a docstring or a '#' comment"
        if not ok:
            bad.append("%s: the first line is not %s" % (rel(path), want))
    return bad, n


HISTORY = re.compile(r"\b[Ii]ssues? #?\d+\b|\bitems? \d+ of issue")


def no_history():
    bad, n = [], 0
    paths = list(walk((".h", ".hpp", ".c", ".cc", ".py", ".pyi", ".in", ".md", ".sh", ".cmake",
                       ".txt", ".json", ".map")))
    paths.append(os.path.join(ROOT, "README.md"))
    for path in paths:
        n += 1
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                m = HISTORY.search(line)
                if m:
                    bad.append("%s:%d: '%s': say what the code does and why instead" %
                               (rel(path), i, m.group(0)))
    return bad, n


EXTS = r"\.(?:h|cc|c|py|pyi|md|sh|cmake|in|map|txt)"
ROOTED = re.compile(r"\b((?:reader|tools|trainer|schemas|examples|tests)/[A-Za-z0-9_./-]*"
                    r"[A-Za-z0-9_]" + EXTS + r")\b")
RELATIVE = re.compile(r"`((?:src|include|internal|python|cmake|plugin|compat)/[A-Za-z0-9_./-]*"
                      r"[A-Za-z0-9_]" + EXTS + r")`")


def paths():
    bad, n = [], 0
    files = list(walk((".h", ".hpp", ".c", ".cc", ".py", ".pyi", ".in", ".md", ".sh", ".cmake",
                       ".txt")))
    for base, dirs, names in os.walk(os.path.join(ROOT, "tests")):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        files += [os.path.join(base, f) for f in sorted(names)
                  if f.endswith((".h", ".cc", ".py", ".sh", ".md", ".txt", ".cmake"))]
    files.append(os.path.join(ROOT, "README.md"))
    for path in files:
        n += 1
        here = os.path.dirname(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                for p in ROOTED.findall(line):
                    if not os.path.exists(os.path.join(ROOT, p)):
                        bad.append("%s:%d: %s does not exist" % (rel(path), i, p))
                if os.path.basename(path) == "README.md":
                    for p in RELATIVE.findall(line):
                        if not os.path.exists(os.path.join(here, p)):
                            bad.append("%s:%d: %s does not exist (from %s/)" %
                                       (rel(path), i, p, rel(here)))
    return bad, n


CHECKS = {"first_lines": first_lines, "no_history": no_history, "paths": paths}
if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
    sys.exit("usage: docs_test.py " + "|".join(CHECKS))
bad, n = CHECKS[sys.argv[1]]()
if n == 0:
    bad.append("no files found under " + ROOT)
for line in bad:
    print("docs:", line)
print("docs %s: %d files, %s" % (sys.argv[1], n, "OK" if not bad else "%d problems" % len(bad)))
sys.exit(1 if bad else 0)
