#!/usr/bin/env bash
# The builds-at-scale benchmark of issue 13 (not a ctest: minutes of both cores, more for 1M lines).
#
#   tests/bench/build_scale_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-scale] [SIZES=10000,100000,1000000] [N=2000]
#
# Peak RSS of `mmpack build` on manifests of SIZES lines that name the real coco-cc photos (only
# the manifest grows), and `mpirun -n 2` against one process with --threads 2 on N expanded
# photos: images/s ratio and identical bytes (tests/bench/build_scale_measure.py says what is
# printed). N=0 skips the second. Exits 1 if the memory target is missed or the bytes differ.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-scale}"
bench_require build_scale_bench "mmpack" mmpack
exec /usr/bin/python3 "$here/build_scale_measure.py" "$build" "$work" "$shared" \
  "${3:-10000,100000,1000000}" "${4:-2000}"
