#!/usr/bin/env bash
# The loader's thread benchmark (issue 24 item 1; about two minutes of both cores; not in the
# default ctest run): do the decode threads share a batch's work, so that throughput no longer
# depends on how many batches may be in flight? Run it when the machine is quiet (`uptime`: load
# below ~1.5), or as root with MM_BENCH_NICE=-15.
#
#   tests/bench/loader_threads_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-threads] [N=2040] [SECONDS=4] [ROUNDS=3]
#
# Expands ../shared/data/coco-cc to N distinct photos (tests/bench/build_expand.py), builds a
# stored-JPEG set and a raw (zstd) set at 224 px with `mmpack build`, then reads each with
# `mmpack bench` (batch 32, shuffled): the JPEG set with random-resized crops to 224 px, the raw
# set as stored, at (threads, prefetch) = (2, 1), (2, 8) and (1, 8), the runs of a round in turn
# (rotating which goes first), ROUNDS rounds, medians compared. Prints images/s, prefetch=1
# against prefetch=8 at 2 threads (target: within 10%) and 2 threads against 1. Figures land
# in WORK_DIR/loader_threads_bench.json; exits 1 when the prefetch target is missed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="$(realpath -m "${2:-$build/bench-threads}")"
bench_require loader_threads_bench "mmpack" mmpack
cd "$here"
exec /usr/bin/python3 "$here/loader_threads_measure.py" "$build" "$work" "$shared" \
  "${3:-2040}" "${4:-4}" "${5:-3}"
