#!/usr/bin/env bash
# `mmpack build` of a manifest at a URL against the same manifest on local disk (issue 28 item 3;
# a minute or two of both cores; not in the default ctest run).
#
#   tests/bench/remote_manifest_bench.sh [BUILD_DIR=build] [WORK_DIR=BUILD_DIR/bench-remote-manifest] [N=500] [DELAY_MS=50]
#
# Expands N coco-cc photos (build_expand.py), serves them with tests/remote/http_server.py on
# 127.0.0.1, every image request held DELAY_MS (a store's latency), and builds captions.jsonl
# from http:// and from disk with --threads 2 (tests/bench/remote_manifest_measure.py says what
# is printed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"  # here, root, shared, bench_require
build="$(cd "${1:-$root/build}" && pwd)"
work="${2:-$build/bench-remote-manifest}"
bench_require remote_manifest_bench "mmpack h5z_zstd" mmpack
exec /usr/bin/python3 "$here/remote_manifest_measure.py" "$build" "$work" "$shared" \
  "${3:-500}" "${4:-50}"
