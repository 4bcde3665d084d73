#!/usr/bin/env bash
# The `mmpack build` benchmark of issue 2 (not a ctest: it takes a minute or two of both cores).
#
#   tests/bench/build_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-build] [N=2000] [REPEATS=2]
#
# Expands ../shared/data/coco-cc to N distinct JPEGs (seeded crops and re-encodes of the real
# photos), then measures in the same run on the same cores: `mmpack build --threads 2`
# images/s and CPU ms per image, (a) the Python way (Pillow + torchvision Resize + sentencepiece
# in a 2-process Pool), (b) the libjpeg-turbo decode floor (mm_decode_floor), and mmpack's peak
# RSS at N/10 and N images; prints the ratios against the targets. Figures also land in
# WORK_DIR/build_bench.json. MM_SHARED_DIR overrides where ../shared is.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-build}"
n="${3:-2000}"
repeats="${4:-2}"
shared="${MM_SHARED_DIR:-$root/../shared}"

for exe in mmpack mm_decode_floor; do
  if [[ ! -x "$build/bin/$exe" ]]; then
    echo "build_bench: $build/bin/$exe missing: ninja -C $build mmpack mm_decode_floor" >&2
    exit 1
  fi
done
[[ -d "$shared/data/coco-cc" ]] || { echo "build_bench: no $shared/data/coco-cc (set MM_SHARED_DIR)" >&2; exit 1; }
exec /usr/bin/python3 "$here/build_measure.py" "$build" "$work" "$shared" "$n" "$repeats"
