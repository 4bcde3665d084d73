#!/usr/bin/env bash
# mmpack quick start on the bundled real data (examples/data/coco-cc: 51 COCO photos, 255 human
# captions): install dependencies, build, pack a train/val split into shards, inspect them
# (info, verify, h5dump, one sample as PNG), read them from Python and train a small CLIP model
# with PyTorch (examples/train_clip.py), train the CoCa-style model with mmtrain, evaluate.
# Usage: bash examples/quickstart.sh        (OUT=... to write elsewhere; default out/quickstart)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/install-deps.sh
export BUILD_DIR=${BUILD_DIR:-$root/build}
# Only what runs below (mm_runtime: mmpack, mmtrain, the Python module, the zstd plugin), in the
# configuration tests/run.sh uses too: the test command then compiles the tests only.
MM_TARGETS=mm_runtime bash tools/build.sh
bin=$BUILD_DIR/bin
out=${OUT:-$root/out/quickstart}
data=$root/examples/data/coco-cc
rm -rf "$out"
mkdir -p "$out"

step() { printf '\n==> %s\n' "$*"; }

step "pack: train split (trains a SentencePiece tokenizer on the captions)"
"$bin/mmpack" build "$data/train.jsonl" -o "$out/train" --vocab-size 600 --samples-per-shard 16
step "pack: val split, with the train set's tokenizer"
"$bin/mmpack" build "$data/val.jsonl" -o "$out/val" --tokenizer "$out/train/tokenizer.model"

step "inspect: mmpack info / verify"
"$bin/mmpack" info "$out/train"
"$bin/mmpack" verify "$out/train"
"$bin/mmpack" verify "$out/val"

step "inspect: h5dump -H (the zstd filter plugin comes from: eval \"\$($bin/mmpack env)\")"
eval "$("$bin/mmpack" env)"
h5dump -H "$out/train/shard-000000.h5"
step "inspect: the top-left 2x2 pixels of image 0 (h5dump)"
h5dump -d images -s 0,0,0,0 -c 1,2,2,3 "$out/train/shard-000000.h5" | sed -n '/DATA/,/}/p'
step "inspect: sample 0 as the model sees it"
"$bin/mmpack" show "$out/train" 0 -o "$out/sample0.png"

step "python: import mmpack (PYTHONPATH=$BUILD_DIR/python), one sample, then a CLIP-style PyTorch loop"
export PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
/usr/bin/python3 -c 'import sys, mmpack; s = mmpack.ShardSet(sys.argv[1]); x = s[0]
print(s); print(x["key"], x["image"].shape, x["image"].dtype, x["captions"][0], x["tokens"][0][:8])' "$out/train"
/usr/bin/python3 examples/train_clip.py --shards "$out/train" --out "$out/clip" --steps 60

step "train + evaluate: CoCa-style fusion model on 2 CPU cores"
"$bin/mmtrain" --shards "$out/train" --val-shards "$out/val" --out "$out/run" \
  --steps ${STEPS:-150} --batch-size 16 --eval-every 50 --log-every 10 --amp bf16
echo
echo "quickstart: 41 training images teach the captioning loss (it falls) but are too few for"
echo "  retrieval to generalise: val recall on 10 images stays near the chance level printed beside"
echo "  it. tests/trainer (TrainerTest.LearnsCaptionsAndBeatsChanceRecallOnHeldOutImages) trains on"
echo "  all three sets of ../shared/data (326/80 images) and checks val recall@5 above chance."
echo "quickstart: done. Shards in $out/{train,val}, sample image $out/sample0.png, run in $out/run,"
echo "  the Python example's checkpoint and metrics in $out/clip"
