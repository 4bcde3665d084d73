#!/usr/bin/env bash
# The mmpack.Writer benchmark (issue 28 item 1; not a ctest: a minute or two of both cores).
#
#   tests/bench/writer_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-writer] [N=1000] [REPEATS=3]
#
# Expands ../shared/data/coco-cc to N distinct JPEGs (build_expand.py, as build_bench.sh does),
# then measures in the same run, alternating, REPEATS times each: `mmpack build MANIFEST` and a
# mmpack.Writer fed the same samples in the same order (images as bytes read by Python, and as
# paths), same options (--threads 2, 224 px, the ALBERT tokenizer, raw); wall-clock images/s of
# each (a Writer's time runs from its construction to the end of close()), the best of the
# repeats, and the Writer/build ratios (target >= 0.9). Figures also in WORK_DIR/writer_bench.json.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-writer}"
n="${3:-1000}"
repeats="${4:-3}"
bench_require writer_bench "mmpack _mmpack" mmpack
/usr/bin/python3 "$here/build_expand.py" "$shared/data/coco-cc" "$work/input" "$n"
exec env PYTHONPATH="$build/python" MMPACK_BIN="$build/bin/mmpack" \
  /usr/bin/python3 "$here/writer_measure.py" "$build" "$work" "$shared" "$repeats"
