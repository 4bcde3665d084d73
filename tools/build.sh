#!/usr/bin/env bash
# Configures and builds mmpack into BUILD_DIR (default: build/) with Ninja and ccache, in the one
# configuration that the README's two commands share (RelWithDebInfo, warnings as errors), so
# that `bash tests/run.sh` after `bash examples/quickstart.sh` compiles only what the quick start
# did not need (the tests), never the same file twice.
# Usage: tools/build.sh [extra cmake -D options...]
#   MM_TARGETS="mm_runtime"  build only these targets (mm_runtime: mmpack, mmtrain, the Python
#                            module and the zstd plugin; what the quick start runs)
#   MM_JOBS=N                parallel jobs (default: nproc)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${MM_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
  -DMM_WERROR=ON "$@" >/dev/null
targets=()
for t in ${MM_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
