"""The include layering of tools/src and reader/src, and that the reader never includes tools/.

tools/src's folders include each other only downwards (tools/CMakeLists.txt, tools/README.md):

    commands/ -> build/, set/, ingest/, image/, shard/, text/, curate/, base/
    build/    -> set/, ingest/, image/, shard/, text/, curate/, base/
    set/      -> ingest/ (IsRemoteUrl), base/
    curate/   -> ingest/, text/, base/
    ingest/   -> text/, base/
    image/    -> text/, base/
    shard/, text/ -> base/
    base/     -> none of the others

and every tools/src file opens with "// NAME: what it is" (tools/README.md "Files": the folder's
map is those first lines, so it cannot disagree with the tree).

reader/src's folders, by concern, likewise (reader/CMakeLists.txt):

    load/       -> set/, remote/, shard/, order/, transforms/   the Loader
    set/        -> remote/, shard/, order/                      a shard set, its ShardSet and order
    remote/     -> shard/                                       remote sets: transport, cache
    shard/      -> transforms/                                  one shard file (JPEG regions)
    transforms/ -> order/                                       load-time image transforms
    order/, base/ -> none of the others

(base/'s headers are reader/internal/include/mm/internal's, so nothing names "base/..."), with
no file at reader/src's top but mm_reader_so.cc. No two folders include each other: no include
cycle. And nothing under reader/ includes a file of tools/ (every quoted include of
reader/src, include, internal, plugin and python/src is found in reader/ or schemas/), nor does
a CMakeLists.txt under reader/ name tools/ or a tools target.

Exits non-zero naming the file and the include that breaks a rule."""
import os
import re
import sys

TOOLS_ALLOWED = {
    "commands": {"commands", "build", "set", "ingest", "image", "shard", "text", "curate", "base"},
    "build": {"build", "set", "ingest", "image", "shard", "text", "curate", "base"},
    "set": {"set", "ingest", "base"},
    "curate": {"curate", "ingest", "text", "base"},
    "ingest": {"ingest", "text", "base"},
    "image": {"image", "text", "base"},
    "shard": {"shard", "base"},
    "text": {"text", "base"},
    "base": {"base"},
}
READER_ALLOWED = {
    "load": {"load", "set", "remote", "shard", "order", "transforms"},
    "set": {"set", "remote", "shard", "order"},
    "remote": {"remote", "shard"},
    "shard": {"shard", "transforms"},
    "transforms": {"transforms", "order"},
    "order": {"order"},
    "base": {"base"},
}
READER_TOP_FILES = {"mm_reader_so.cc"}
SOURCES = (".cc", ".h", ".c")

root = os.environ.get("MM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
folder_include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
any_include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
bad, files = [], 0


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def check_folders(tree, allowed, top_files, first_line):
    """Every file of tree/ lies in a folder of `allowed` and includes only what it allows."""
    global files
    src = os.path.join(root, tree)
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            if folder not in top_files:
                bad.append("%s/%s: a file outside the folders" % (tree, folder))
            continue
        if folder not in allowed:
            bad.append("%s/%s/: a folder the layering does not know (add it)" % (tree, folder))
            continue
        for name in sorted(os.listdir(path)):
            files += 1
            text = read(os.path.join(path, name))
            if first_line and name.endswith(SOURCES) and not text.startswith("// %s: " % name):
                bad.append("%s/%s/%s: the first line is not '// %s: what it is'"
                           % (tree, folder, name, name))
            for target in folder_include.findall(text):
                if target in allowed and target not in allowed[folder]:
                    bad.append('%s/%s/%s includes "%s/..."' % (tree, folder, name, target))


check_folders("tools/src", TOOLS_ALLOWED, set(), first_line=True)
check_folders("reader/src", READER_ALLOWED, READER_TOP_FILES, first_line=False)

# The reader never includes tools/: each quoted include resolves inside reader/ or schemas/
# (a generated header from its .in template).
reader = os.path.join(root, "reader")
roots = [os.path.join(reader, p) for p in ("src", "include", "internal/include", "plugin",
                                           "python/src")] + [os.path.join(root, "schemas/include")]
for sub in ("src", "include", "internal", "plugin", "python/src"):
    for dirpath, _, names in os.walk(os.path.join(reader, sub)):
        for name in sorted(names):
            if not name.endswith(SOURCES + (".in",)):
                continue
            path = os.path.join(dirpath, name)
            files += 1
            for target in any_include.findall(read(path)):
                found = [d for d in [dirpath] + roots
                         if os.path.exists(os.path.join(d, target))
                         or os.path.exists(os.path.join(d, target + ".in"))]
                if not found:
                    bad.append('%s includes "%s", which is not the reader\'s'
                               % (os.path.relpath(path, root), target))
for dirpath, _, names in os.walk(reader):
    if "CMakeLists.txt" in names:
        path = os.path.join(dirpath, "CMakeLists.txt")
        code = "\n".join(line.split("#", 1)[0] for line in read(path).splitlines())
        for word in re.findall(r"[\w/${}]*tools/[\w/]*|\bmm_pack\w*", code):
            bad.append("%s names %s (tools/)" % (os.path.relpath(path, root), word))

if files == 0:
    bad.append("no source files found under " + root)
for line in bad:
    print("layering:", line)
print("layering: %d files, %s" % (files, "OK" if not bad else "%d problems" % len(bad)))
sys.exit(1 if bad else 0)
