#!/usr/bin/env bash
# The Python module's benchmark (issue 11; a few minutes of both cores; not in the default ctest
# run). Run it when the machine is quiet (`uptime`: load below ~1.5), or on a shared machine as
# root with MM_BENCH_NICE=-15, which runs the measured readers ahead of the other jobs.
#
#   tests/bench/python_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-python] [N=2040] [SECONDS=5] [ROUNDS=3]
#
# Expands ../shared/data/coco-cc to N distinct photos (tests/bench/build_expand.py), builds
# 224-px shards with `mmpack build`, then compares on the same 2 cores: a Python loop over
# mmpack.Loader (batch 32, 2 threads, as_torch=True; python_loader_bench.py) against
# `mmpack bench` with the same options (the C++ reader; runs alternate, medians compared) and
# against an h5py Dataset in a torch DataLoader with 2 workers (reader_h5py_baseline.py).
# Targets: Python >= 0.9x C++ samples/s, >= 10x h5py's, CPU-ms per sample <= 1.2x C++'s.
# Figures land in WORK_DIR/python_bench.json. MM_SHARED_DIR overrides ../shared.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="$(realpath -m "${2:-$build/bench-python}")"  # absolute: the driver runs in tests/bench
bench_require python_bench "mmpack h5z_zstd _mmpack" mmpack
[[ -f "$build/python/mmpack/__init__.py" ]] || {
  echo "python_bench: no Python module in $build/python (MM_BUILD_PYTHON)" >&2; exit 1; }
cd "$here"
exec /usr/bin/python3 "$here/python_measure.py" "$build" "$work" "$shared" "${3:-2040}" \
  "${4:-5}" "${5:-3}"
