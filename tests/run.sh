#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: install dependencies, build, run ctest.
# Usage: bash tests/run.sh            (BUILD_DIR=... to build elsewhere; extra args go to ctest)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ ! -d "$root/../shared/data" ]; then
  echo "tests/run.sh: ../shared/data (the real test data) is missing beside the checkout" >&2
  exit 1
fi
bash tools/install-deps.sh
export BUILD_DIR=${BUILD_DIR:-$root/build}
# The quick start's configuration (tools/build.sh): after examples/quickstart.sh this compiles
# the tests only.
bash tools/build.sh
cd "$BUILD_DIR"
# Every test writes under one temporary folder of this run (TMPDIR: mkdtemp, gtest's TempDir,
# Python's tempfile and pytest; XDG_CACHE_HOME: a remote set's default cache), removed when the
# run ends, so that runs leave nothing behind on a disk other runs share (a CI run once failed
# with ENOSPC in /tmp). A short path: OpenMPI puts unix sockets under TMPDIR. MM_KEEP_TMP=1
# keeps it for a look after a failure.
df -h "${TMPDIR:-/tmp}" "$BUILD_DIR" | sed 's/^/disk: /'
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/mm-tests.XXXXXX")
if [ -z "${MM_KEEP_TMP:-}" ]; then trap 'rm -rf "$run_tmp"' EXIT; fi
export TMPDIR=$run_tmp XDG_CACHE_HOME=$run_tmp/cache
# Benchmarks (label "bench") are run by hand: tests/bench/*.sh.
ctest --output-on-failure --timeout 900 -j "${MM_TEST_JOBS:-2}" -LE bench "$@"
