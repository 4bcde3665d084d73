#!/bin/sh
# train_bench.sh BUILD_DIR [STEPS]: mmtrain's throughput and data-wait on this machine's CPUs.
#
# Packs all of ../shared/data (coco-cc, openclipart-pd, skimage-micro: 406 images, 224x224,
# ALBERT tokenizer) with the real mmpack, then trains the default model (--preset cpu: dim 128,
# 2 layers, patch 32) for STEPS steps of 32 samples, twice:
#   reader    batches from the mmpack reader (2 decode threads, 4 batches prefetched)
#   baseline  the first step's batches reused every step (--reuse-batches): the model alone
# and prints samples/s of each, their ratio, data-wait % (time blocked in the reader / step
# time, as mmtrain measures it) and CPU ms per sample (robust to other load on the machine).
# Target: data-wait <= 2%.
set -eu
BUILD=$(cd "$1" && pwd)
STEPS=${2:-30}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${MM_SHARED_DIR:-$SRC/../shared}
export HDF5_PLUGIN_PATH=$BUILD/hdf5-plugins
WORK=${MM_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$WORK"
if [ ! -f "$WORK/all224/index.json" ]; then
  for s in coco-cc openclipart-pd skimage-micro; do
    /usr/bin/python3 - "$SHARED/data/$s" <<'PY'
import json, os, sys
d = sys.argv[1]
for line in open(os.path.join(d, "captions.jsonl"), encoding="utf-8"):
    if line.strip():
        r = json.loads(line); r["image"] = os.path.join(d, r["image"]); print(json.dumps(r))
PY
  done > "$WORK/all.jsonl"
  "$BUILD/bin/mmpack" build "$WORK/all.jsonl" -o "$WORK/all224" --overwrite \
    --tokenizer "$SHARED/tokenizers/albert-30k-clean.model" --lowercase -q
fi
COMMON="--shards $WORK/all224 --steps $STEPS --batch-size 32 --threads 2 --log-every 10 --seed 1"
echo "== reader: mmtrain $COMMON"
"$BUILD/bin/mmtrain" $COMMON --out "$WORK/run_reader"
echo "== baseline (no reading): mmtrain $COMMON --reuse-batches"
"$BUILD/bin/mmtrain" $COMMON --reuse-batches --out "$WORK/run_baseline"
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
r = json.load(open(w + "/run_reader/summary.json"))
b = json.load(open(w + "/run_baseline/summary.json"))
print("train_bench: reader %.2f samples/s, data-wait %.2f%%; model alone %.2f samples/s; "
      "reader/baseline %.3f; target data-wait <= 2%%: %s"
      % (r["samples_per_s"], r["data_wait_pct"], b["samples_per_s"],
         r["samples_per_s"] / b["samples_per_s"], "met" if r["data_wait_pct"] <= 2 else "NOT met"))
# CPU time per sample (all threads, eval excluded only in that none runs) does not depend on
# what else the machine runs; wall-clock samples/s does.
print("train_bench: CPU ms/sample: reader %.1f, model alone %.1f (reader/baseline %.3f)"
      % (r["cpu_ms_per_sample"], b["cpu_ms_per_sample"],
         r["cpu_ms_per_sample"] / b["cpu_ms_per_sample"]))
PY
