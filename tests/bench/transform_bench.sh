#!/usr/bin/env bash
# The transform= benchmark (issue 27 item 2; about a minute; not in the default ctest run): does
# mmpack.Loader's transform thread hide a torchvision colour jitter behind the training step?
#
#   tests/bench/transform_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-transform] [SECONDS=5] [ROUNDS=3] [STEP_MS=50]
#
# Builds ../shared/data/coco-cc 20 times over (1,020 samples: 32 batches an epoch, so that the
# loop measures the steady state, not the transform threads' refill at each epoch's start) at
# 224 px (raw, zstd) and runs a training-loop-shaped Python loop (batch 32, 2 decode threads,
# torch.set_num_threads(1)) whose step is STEP_MS of waiting with the GIL released, as a loop
# that waits for its GPU step does, four ways in turn, ROUNDS rounds, SECONDS each: no
# transform; transform=ColorJitter(0.4, 0.4, 0.4) (brightness, contrast, saturation on the uint8
# [B, 3, H, W] batch) in the Loader's transform thread, and on 2 transform threads
# (transform_threads=2); the same jitter called in the loop. Prints the median loop time per
# batch of each and the ratios to no transform (target for 2 transform threads: <= 1.2x; exit 1
# when missed), and the floor: the jitter's own throughput on 2 threads with nothing else
# running. Figures in WORK_DIR/transform_bench.json.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="$(realpath -m "${2:-$build/bench-transform}")"
bench_require transform_bench "mmpack _mmpack" mmpack
exec /usr/bin/python3 "$here/transform_measure.py" "$build" "$work" "$shared" \
  "${3:-5}" "${4:-3}" "${5:-50}"
