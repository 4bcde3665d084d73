#!/usr/bin/env bash
# The remote-set benchmark of issue 12 (a few minutes of both cores; not in the default ctest run).
#
#   tests/bench/remote_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-remote] [N=2000] [EPOCHS=3] [CODEC=raw|jpeg]
#
# Builds N expanded coco-cc photos into shards, serves them from s3rver on 127.0.0.1 and reads
# them with `mmpack bench --shuffle block` through a cache of a quarter of the set, against the
# same set read locally in the same run (tests/bench/remote_measure.py says what is printed).
# Needs s3rver in BUILD_DIR/tests/remote (ctest -R remote_servers_setup). Exits 1 if a target
# is missed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-remote}"
bench_require remote_bench "mmpack h5z_zstd" mmpack
exec /usr/bin/python3 "$here/remote_measure.py" "$build" "$work" "$shared" \
  "$build/tests/remote" "${3:-2000}" "${4:-3}" "${5:-raw}"
