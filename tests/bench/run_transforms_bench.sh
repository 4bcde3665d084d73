#!/usr/bin/env bash
# The load-time transform benchmark of issue 10 (a few minutes of both cores; not in the default
# ctest run): FFCV 0.0.3 against mmpack formats 1 (raw) and 2 (JPEG) on the same photos in one
# run (transforms_bench.py), writing and reading.
#
#   tests/bench/run_transforms_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-transforms] [N=2040] [SECONDS=5] [ROUNDS=3]
#
# Needs FFCV, which is not a dependency of mmpack: Debian's python3-ffcv plus python3-numba and
# python3-opencv, which it needs but does not declare:
#   apt-get install -y --no-install-recommends python3-ffcv python3-numba python3-opencv
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-transforms}"
n="${3:-2040}"
seconds="${4:-5}"
rounds="${5:-3}"
bench_require run_transforms_bench "mmpack" mmpack
/usr/bin/python3 -c "import ffcv, numba, cv2" 2>/dev/null || {
  echo "run_transforms_bench: FFCV missing: apt-get install -y --no-install-recommends python3-ffcv python3-numba python3-opencv" >&2
  exit 1
}
exec /usr/bin/python3 "$here/transforms_bench.py" "$build" "$work" "$shared" "$n" "$seconds" "$rounds"
