# bench_common.sh: the prologue the benchmark drivers share (build_bench.sh,
# run_reader_bench.sh). Sourced, not run: sets here (tests/bench), root (the source tree) and
# shared (../shared, or MM_SHARED_DIR), and defines bench_require.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
shared="${MM_SHARED_DIR:-$root/../shared}"

# bench_require NAME TARGETS EXE...: exits 1 with a hint (ninja -C $build TARGETS) unless every
# EXE is in $build/bin, and unless $shared/data/coco-cc exists. NAME starts the messages.
bench_require() {
  local name="$1" targets="$2" exe
  shift 2
  for exe in "$@"; do
    if [[ ! -x "$build/bin/$exe" ]]; then
      echo "$name: $build/bin/$exe missing: ninja -C $build $targets" >&2
      exit 1
    fi
  done
  [[ -d "$shared/data/coco-cc" ]] || { echo "$name: no $shared/data/coco-cc (set MM_SHARED_DIR)" >&2; exit 1; }
}
