#!/usr/bin/env bash
# tests/gpu/run.sh: the one-command GPU check of mmpack (see README.md beside it).
#
#   bash tests/gpu/run.sh                 on a lent GPU machine, from the checkout's root, with
#                                         tests/gpu/carry/ (prep.sh) carried: builds the reader,
#                                         the Python module and mmtrain against the machine's
#                                         torch, then measures (a) a ResNet-50 step fed three
#                                         ways, (b) mmtrain bf16 and fp16 on CUDA, (c) the
#                                         loader's images/s at 1..16 threads; prints a table last
#   bash tests/gpu/run.sh --cpu BUILD     the same steps at tiny sizes on CPU, with the build
#                                         tree BUILD instead of a build (ctest: mm_gpu_check_cpu)
#
# Every step runs under `timeout` and its output goes to $WORK/logs/STEP.log; what fails is
# marked in the table and the steps that do not need it still run. Budget: BUDGET seconds
# (default 540, for a device call of 600). Results: $OUT (the device tool's folder, else
# $WORK/out): summary.txt, summary.json, logs.tar.gz. Exit status: 0 when every part produced
# its figures, 1 otherwise.
set -u -o pipefail
T0=$SECONDS
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/gpu
cd "$ROOT"
MODE=device PREBUILT=""
if [ "${1:-}" = "--cpu" ]; then MODE=cpu PREBUILT=$(cd "${2:?--cpu BUILD_DIR}" && pwd); fi
WORK=${WORK:-/tmp/mm-gpu-check}
OUT=${OUT:-$WORK/out}
BUDGET=${BUDGET:-540}
PY=${PY:-python3}
LOG=$WORK/logs DATA=$WORK/data BUILD=$WORK/build
rm -rf "$LOG" "$DATA"
mkdir -p "$OUT" "$LOG" "$DATA"
: > "$LOG/steps.tsv"
export PYTHONUNBUFFERED=1

el() { echo $((SECONDS - T0)); }
left() { echo $((BUDGET - (SECONDS - T0))); }
min() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }
say() { echo "[gpu-check $(el)s] $*"; }
# step NAME TIMEOUT CMD...: CMD under timeout, output in $LOG/NAME.log, "NAME rc seconds" in
# steps.tsv. Returns CMD's status (124: timed out; 99: skipped, no time left).
step() {
  local name=$1 lim=$2 t=$SECONDS rc; shift 2
  if [ "$lim" -lt 5 ]; then
    say "$name: skipped (no time left)"; printf '%s\t99\t0\n' "$name" >> "$LOG/steps.tsv"; return 99
  fi
  say "$name (at most ${lim}s)"
  timeout -k 10 "$lim" "$@" > "$LOG/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t)) >> "$LOG/steps.tsv"
  say "$name: rc=$rc in $((SECONDS - t))s"
  return $rc
}

if [ $MODE = cpu ]; then
  PY=${MM_PYTHON:-/usr/bin/python3}
  PER_PHOTO=2 REPEAT_JPG=3 REPEAT_RAW=1 RAW_SIZE=64 PROCS=2 DEVICE=cpu
  STEP_ARGS=(--device cpu --model tiny --batch 8 --seconds 2 --warmup-steps 1
             --phases synthetic,mmpack-2,pil-2,pil-1)
  LOADER_ARGS=(--batch 8 --seconds 2 --threads 1,2)
  TRAIN_ARGS=(--device cpu --dim 64 --layers 1 --heads 4 --patch 16 --batch-size 8
              --loader-threads 2 --prefetch 4 --threads 1 --steps 6 --log-every 2)
  AMPS="bf16 off" TRAIN_SECONDS=120
else
  PER_PHOTO=40 REPEAT_JPG=10 REPEAT_RAW=4 RAW_SIZE=224 PROCS=$(nproc) DEVICE=cuda
  STEP_ARGS=(--device cuda --model resnet50 --batch 256 --warmup-steps 8
             --phases synthetic,mmpack-16,pil-16,pil-8)
  LOADER_ARGS=(--batch 256 --seconds 6 --threads 1,2,4,8,16)
  TRAIN_ARGS=(--device cuda --preset gpu --batch-size 256 --loader-threads 16 --prefetch 20
              --steps 100000 --warmup 50 --log-every 10)
  AMPS="bf16 fp16" TRAIN_SECONDS=${TRAIN_SECONDS:-55}
  [ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
fi

# --- facts --------------------------------------------------------------------------------------
cat > "$WORK/facts.sh" <<'EOF'
echo "== machine"; grep PRETTY_NAME /etc/os-release; uname -r; echo "cpus $(nproc)"
free -g | sed -n 2p; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
echo "== python"; "$PY" - <<'PYEOF'
import importlib, os, sys
print("python", sys.version.split()[0])
for m in ["torch", "torchvision", "numpy", "PIL", "h5py", "pybind11"]:
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:
        print(m, "MISSING", repr(e)[:100])
try:
    import torch
    print("torch_cuda", torch.version.cuda, "available", torch.cuda.is_available())
    print("torch_dir", os.path.dirname(torch.__file__))
    print("gloo_headers", os.path.isdir(os.path.join(os.path.dirname(torch.__file__), "include", "gloo")))
except Exception as e:
    print("torch:", repr(e)[:200])
PYEOF
echo "== tools"; for t in gcc g++ cmake ninja nvcc; do printf '%s %s\n' "$t" "$("$t" --version 2>&1 | head -1)"; done
EOF
PY=$PY step facts 60 bash "$WORK/facts.sh"

# --- dependencies (device: the carried Debian headers and libraries) ----------------------------
DEPS_OK=1
if [ $MODE = device ]; then
  if step deps 90 bash "$HERE/deps.sh" /tmp/mm-gpu-deps "$HERE/carry/deps.tar.xz"; then
    # shellcheck disable=SC1091
    source /tmp/mm-gpu-deps/env.sh
  else
    DEPS_OK=0
  fi
fi

# --- data, in the background during the build --------------------------------------------------
TOKENS=$HERE/carry/tokens.json
(
  set -e
  if [ $MODE = cpu ]; then
    TOKENS=$DATA/tokens.json
    "$PY" "$HERE/pack.py" tokens --captions examples/data/coco-cc/captions.jsonl --lowercase \
      --tokenizer "${MM_SHARED_DIR:-$ROOT/../shared}/tokenizers/albert-30k-clean.model" --out "$TOKENS"
  fi
  nice -n 5 "$PY" "$HERE/pack.py" variants --src examples/data/coco-cc --out "$DATA/variants" \
    --per-photo $PER_PHOTO --procs $PROCS
  nice -n 5 "$PY" "$HERE/pack.py" set --variants "$DATA/variants" --tokens "$TOKENS" \
    --out "$DATA/jpeg256" --codec jpeg --max-size 256 --repeat $REPEAT_JPG --procs $PROCS
  nice -n 5 "$PY" "$HERE/pack.py" set --variants "$DATA/variants" --tokens "$TOKENS" \
    --out "$DATA/raw" --codec raw --image-size $RAW_SIZE --repeat $REPEAT_RAW --procs $PROCS
  touch "$DATA/ok"
) > "$LOG/data.log" 2>&1 &
DATA_PID=$!

# --- configure and build against this machine's torch -------------------------------------------
if [ $MODE = cpu ]; then
  MMTRAIN=$PREBUILT/bin/mmtrain MODDIR=$PREBUILT/python
  printf 'build\t0\t0\n' >> "$LOG/steps.tsv"
  echo "CPU mode: the build tree $PREBUILT" > "$LOG/build.log"
else
  MMTRAIN=$BUILD/bin/mmtrain MODDIR=$BUILD/python
  if [ $DEPS_OK = 1 ]; then
    TORCH_DIR=$("$PY" -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')
    PB=$("$PY" -m pybind11 --cmakedir 2>/dev/null || true)
    GEN=Ninja; command -v ninja >/dev/null || GEN="Unix Makefiles"
    export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
    rm -rf "$BUILD"
    CFG=(-S "$ROOT" -B "$BUILD" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DMM_BUILD_TESTS=OFF
         -DMM_BUILD_BENCH=OFF -DMM_BUILD_TOOLS=OFF -DMM_WERROR=OFF -DMM_BUILD_PYTHON=AUTO
         -DMM_PYTHON="$(command -v "$PY")" ${PB:+-Dpybind11_DIR="$PB"} -DTorch_DIR="$TORCH_DIR"
         -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "${MM_DEPS_CMAKE[@]}")
    # When LibTorch's CMake config fails, once more without the trainer: the module at least.
    step configure 150 cmake "${CFG[@]}" ||
      { rm -rf "$BUILD"; step configure-without-trainer 90 cmake "${CFG[@]}" -DMM_BUILD_TRAINER=OFF; }
    if [ -f "$BUILD/build.ninja" ] || [ -f "$BUILD/Makefile" ]; then
      step build-module "$(min 200 $(( $(left) - 300 )))" cmake --build "$BUILD" -j "$(nproc)" --target _mmpack
      grep -q -E '^MM_BUILD_TRAINER:(BOOL|STRING)=ON' "$BUILD/CMakeCache.txt" &&
        step build-mmtrain "$(min 360 $(( $(left) - 220 )))" cmake --build "$BUILD" -j "$(nproc)" --target mmtrain
    fi
    grep -h -E 'error:|FAILED:|undefined reference|CMake Error' "$LOG"/configure.log \
      "$LOG"/build-*.log 2>/dev/null | head -40 > "$LOG/build-errors.txt"
  fi
fi

# --- wait for the data ----------------------------------------------------------------------------
waited=0
while kill -0 $DATA_PID 2>/dev/null && [ $waited -lt 240 ]; do sleep 1; waited=$((waited + 1)); done
kill -0 $DATA_PID 2>/dev/null && { say "data: still packing after ${waited}s: stopped"; kill $DATA_PID; }
printf 'data\t%s\t%s\n' "$([ -f "$DATA/ok" ] && echo 0 || echo 1)" "$waited" >> "$LOG/steps.tsv"
say "data: $([ -f "$DATA/ok" ] && echo ready || echo FAILED) (waited ${waited}s)"

# --- (a) one training step fed three ways --------------------------------------------------------
# Shares of what is left: (a) 45 %, (b) 40 %, (c) 15 %.
REST=$(( $(left) - 15 ))
if [ -f "$DATA/ok" ]; then
  lim=$(min 300 $(( REST * 45 / 100 )))
  # Four phases, each its timed window plus ~12 s of warm-up and worker start (device mode).
  [ $MODE = device ] && STEP_ARGS+=(--seconds "$(min "${STEP_SECONDS:-22}" $(( lim / 4 - 12 )))")
  step feed-step "$lim" env PYTHONPATH="$MODDIR" "$PY" "$HERE/feed.py" step \
    "${STEP_ARGS[@]}" --jpeg-set "$DATA/jpeg256" --variants "$DATA/variants" --out "$LOG/feed-step.json"
fi

# --- (b) mmtrain bf16 and fp16 -------------------------------------------------------------------
if [ -x "$MMTRAIN" ] && [ -f "$DATA/ok" ]; then
  for amp in $AMPS; do
    lim=$(min "$TRAIN_SECONDS" $(( ($(left) - 60) / 2 )))
    rm -rf "$WORK/run-$amp"
    step "mmtrain-$amp" "$lim" "$MMTRAIN" --shards "$DATA/raw" --out "$WORK/run-$amp" --amp "$amp" \
      --eval-every 0 "${TRAIN_ARGS[@]}"
    cp "$WORK/run-$amp/metrics.jsonl" "$LOG/mmtrain-$amp.metrics.jsonl" 2>/dev/null
  done
fi

# --- (c) the loader alone at 1..16 threads --------------------------------------------------------
if [ -f "$DATA/ok" ] && [ -d "$MODDIR/mmpack" ]; then
  step feed-loader "$(min 120 $(( $(left) - 10 )))" env PYTHONPATH="$MODDIR" "$PY" "$HERE/feed.py" loader \
    "${LOADER_ARGS[@]}" --jpeg-set "$DATA/jpeg256" --out "$LOG/feed-loader.json"
fi

# --- the table, last ------------------------------------------------------------------------------
tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null
"$PY" "$HERE/summarize.py" --logs "$LOG" --out "$OUT" --mode $MODE --amps "$AMPS" --elapsed "$(el)"
