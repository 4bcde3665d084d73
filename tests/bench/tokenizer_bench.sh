#!/usr/bin/env bash
# The tokenizer benchmark of issue 28 (not a timed test; minutes of both cores):
#
#   tests/bench/tokenizer_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-tokenizer] [CAPTIONS=20000] [SIZES=10000,300000]
#
#   speed   CLIP BPE captions/s: `mmpack tokenize` (one thread) against OpenAI's
#           clip/simple_tokenizer.py (tests/e2e/tokenizers/clip_reference.py), same captions,
#           same run; the ids must be equal (target >= 20x)
#   memory  peak RSS of `mmpack build` with a trained tokenizer (default --tokenizer-sample) on
#           manifests of SIZES lines (tests/bench/build_scale_measure.py's), last against first
#           (target <= 1.3x)
# Exits 1 if a target is missed or the ids differ.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-tokenizer}"
bench_require tokenizer_bench "mmpack" mmpack
exec /usr/bin/python3 "$here/tokenizer_measure.py" "$build" "$work" "$shared" \
  "${3:-20000}" "${4:-10000,300000}"
