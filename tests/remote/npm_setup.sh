#!/usr/bin/env bash
# Installs the test servers' npm packages (s3rver, pinned by package-lock.json) into the build
# tree: DEST/node_modules. Run by ctest as the fixture "remote_servers" before the remote-set
# tests (tests/reader/CMakeLists.txt); never installs anything globally.
# Usage: npm_setup.sh SOURCE_DIR DEST_DIR
# Without node or npm it does nothing (the S3 tests then skip, saying node is absent). A failed
# install is reported here and exits 0: the S3 tests then fail naming the missing s3rver.
set -uo pipefail
src=$1
dest=$2
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "npm_setup: node or npm is not installed: the S3 tests will skip (tools/install-deps.sh)"
  exit 0
fi
mkdir -p "$dest"
cp -f "$src/package.json" "$src/package-lock.json" "$dest/"
# npm ci writes node_modules/.package-lock.json; the same lock installed before: nothing to do.
if [ -f "$dest/node_modules/s3rver/bin/s3rver.js" ] &&
   [ "$dest/node_modules/.mm-lock-stamp" -nt "$src/package-lock.json" ]; then
  echo "npm_setup: s3rver already installed in $dest/node_modules"
  exit 0
fi
if (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error); then
  touch "$dest/node_modules/.mm-lock-stamp"
  echo "npm_setup: installed s3rver into $dest/node_modules"
else
  echo "npm_setup: npm ci failed in $dest: the S3 tests will fail (s3rver missing)" >&2
fi
exit 0
