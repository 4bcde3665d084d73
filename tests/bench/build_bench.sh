#!/usr/bin/env bash
# The `mmpack build` benchmark of issue 2 (not a ctest: it takes a minute or two of both cores).
#
#   tests/bench/build_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-build] [N=2000] [REPEATS=3]
#
# Expands ../shared/data/coco-cc to N distinct JPEGs (seeded crops and re-encodes of the real
# photos), then measures in the same run on the same cores: `mmpack build --threads 2`
# images/s and CPU ms per image, (a) the Python way (Pillow + torchvision Resize + sentencepiece
# in a 2-process Pool), (b) the libjpeg-turbo decode floor (mm_decode_floor), and mmpack's peak
# RSS at N/10 and N images; prints the ratios against the targets. Figures also land in
# WORK_DIR/build_bench.json. MM_SHARED_DIR overrides where ../shared is.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-build}"
n="${3:-2000}"
repeats="${4:-3}"
bench_require build_bench "mmpack mm_decode_floor" mmpack mm_decode_floor
exec /usr/bin/python3 "$here/build_measure.py" "$build" "$work" "$shared" "$n" "$repeats"
