#!/usr/bin/env bash
# Installs the tokenizer.json references (npm `tokenizers`, the Rust library's Node binding with
# its prebuilt linux-x64 module, and `@huggingface/tokenizers`, pure JavaScript; pinned by
# package-lock.json) into DEST/node_modules. Run by ctest as the fixture "tokenizer_references"
# before the tokenizer reference tests; never installs anything globally.
# Usage: npm_setup.sh SOURCE_DIR DEST_DIR
# Without node or npm it does nothing (the tests then skip, saying so); a failed install is
# reported here and exits 0: the tests then fail naming the missing package.
set -uo pipefail
src=$1
dest=$2
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "npm_setup: node or npm is not installed: the tokenizer.json tests will skip"
  exit 0
fi
mkdir -p "$dest"
cp -f "$src/package.json" "$src/package-lock.json" "$dest/"
if [ -d "$dest/node_modules/tokenizers" ] && [ -d "$dest/node_modules/@huggingface/tokenizers" ] &&
   [ "$dest/node_modules/.mm-lock-stamp" -nt "$src/package-lock.json" ]; then
  echo "npm_setup: tokenizer references already installed in $dest/node_modules"
  exit 0
fi
if (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error); then
  touch "$dest/node_modules/.mm-lock-stamp"
  echo "npm_setup: installed the tokenizer references into $dest/node_modules"
else
  echo "npm_setup: npm ci failed in $dest: the tokenizer.json tests will fail" >&2
fi
exit 0
