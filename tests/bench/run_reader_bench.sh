#!/usr/bin/env bash
# The reader benchmark of issue 3 (a minute or two of both cores; not in the default ctest run).
#
#   tests/bench/run_reader_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-reader] [N=2000] [SECONDS=5]
#
# Expands ../shared/data/coco-cc to N distinct photos (tests/bench/build_expand.py), builds
# 224-px shards with `mmpack build`, then measures in the same run on the same cores: the reader
# (`mmpack bench --threads 2 --batch-size 32`), (a) the PyTorch DataLoader over the raw files
# (reader_torch_baseline.py), (b) HDF5's own read path (h5py in a DataLoader with 2 workers,
# reader_h5py_baseline.py; and H5Dread in C, mm_reader_ceiling h5dread), (c) the zstd
# tight-loop ceiling over the same chunk bytes (mm_reader_ceiling zstd), and the reader's peak
# anonymous RSS on N and N/10 samples. Prints ratios against the targets; exits 1 if one is
# missed. Figures land in WORK_DIR/reader_bench.json. MM_SHARED_DIR overrides ../shared.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-reader}"
n="${3:-2000}"
seconds="${4:-5}"
bench_require run_reader_bench "mmpack mm_reader_ceiling h5z_zstd" mmpack mm_reader_ceiling
exec /usr/bin/python3 "$here/reader_measure.py" "$build" "$work" "$shared" "$n" "$seconds"
