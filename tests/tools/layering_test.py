"""tools/src's folders include each other only downwards (tools/CMakeLists.txt, tools/README.md):

    commands/ -> build/, set/, ingest/, image/, shard/, text/, curate/
    build/    -> set/, ingest/, image/, shard/, text/, curate/
    set/      -> ingest/ (IsRemoteUrl)
    curate/   -> ingest/, text/
    ingest/   -> text/
    image/    -> text/
    shard/, text/ -> none of the others

so no two folders include each other (no include cycle). Reads every #include "folder/..." of
tools/src; exits non-zero naming the file and the include that breaks the rule. Also checks that
every file opens with "// NAME: what it is" (tools/README.md "Files": the folder's map is those
first lines, so it cannot disagree with the tree)."""
import os
import re
import sys

ALLOWED = {
    "commands": {"commands", "build", "set", "ingest", "image", "shard", "text", "curate"},
    "build": {"build", "set", "ingest", "image", "shard", "text", "curate"},
    "set": {"set", "ingest"},
    "curate": {"curate", "ingest", "text"},
    "ingest": {"ingest", "text"},
    "image": {"image", "text"},
    "shard": {"shard"},
    "text": {"text"},
}

src = os.path.join(os.environ.get("MM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")), "tools", "src")
include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
bad, files = [], 0
for folder in sorted(os.listdir(src)):
    path = os.path.join(src, folder)
    if not os.path.isdir(path):
        bad.append("%s: a file outside the stage folders" % folder)
        continue
    if folder not in ALLOWED:
        bad.append("%s/: a folder the layering does not know (add it to ALLOWED)" % folder)
        continue
    for name in sorted(os.listdir(path)):
        files += 1
        with open(os.path.join(path, name), encoding="utf-8") as f:
            text = f.read()
            if name.endswith((".cc", ".h", ".c")) and not text.startswith("// %s: " % name):
                bad.append("%s/%s: the first line is not '// %s: what it is'" % (folder, name, name))
            for target in include.findall(text):
                if target in ALLOWED and target not in ALLOWED[folder]:
                    bad.append('%s/%s includes "%s/..."' % (folder, name, target))
if files == 0:
    bad.append("no source files found under " + src)
for line in bad:
    print("layering:", line)
print("layering: %d files, %s" % (files, "OK" if not bad else "%d problems" % len(bad)))
sys.exit(1 if bad else 0)
