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
bash tools/build.sh -DMM_WERROR=ON  # warnings are errors here (mm_target_warnings)
cd "$BUILD_DIR"
# Benchmarks (label "bench") are run by hand: tests/bench/*.sh.
ctest --output-on-failure --timeout 900 -j "${MM_TEST_JOBS:-2}" -LE bench "$@"
