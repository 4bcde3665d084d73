#!/bin/sh
# dead_rank_test.sh MMTRAIN SHARDS [kill|stop]: two ranks over Gloo on loopback; once training
# runs, rank 1 is killed (SIGKILL: its sockets close) or stopped (SIGSTOP: alive but silent, so
# only the timeout can notice). Rank 0 must exit non-zero with an error line within
# --dist-timeout (10 s) plus slack, never hang. Fails when it is still alive after 60 s.
set -u
MMTRAIN=$1
SHARDS=$2
MODE=${3:-kill}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PORT=$(( 20000 + $$ % 20000 ))
COMMON="--shards $SHARDS --steps 100000 --batch-size 8 --dim 64 --layers 1 --patch 16 \
  --threads 1 --loader-threads 1 --log-every 1 --dist-timeout 10"
: >"$DIR/r0.log"
: >"$DIR/r1.log"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT WORLD_SIZE=2
RANK=0 LOCAL_RANK=0 "$MMTRAIN" $COMMON >"$DIR/r0.log" 2>&1 &
R0=$!
RANK=1 LOCAL_RANK=1 "$MMTRAIN" $COMMON >"$DIR/r1.log" 2>&1 &
R1=$!

# Wait until rank 0 has logged 3 steps (training with both ranks is under way).
i=0
until [ "$(grep -c '^step' "$DIR/r0.log")" -ge 3 ]; do
  i=$((i + 1))
  if [ $i -gt 600 ] || ! kill -0 $R0 2>/dev/null; then
    echo "FAIL: training did not start"; cat "$DIR/r0.log" "$DIR/r1.log"
    kill -9 $R0 $R1 2>/dev/null; exit 1
  fi
  sleep 0.1
done
if [ "$MODE" = stop ]; then kill -STOP $R1; else kill -9 $R1; fi
START=$(date +%s)
i=0
while kill -0 $R0 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 600 ]; then
    echo "FAIL: rank 0 still running 60 s after rank 1 died"; tail -5 "$DIR/r0.log"
    kill -9 $R0; exit 1
  fi
  sleep 0.1
done
wait $R0
RC=$?
END=$(date +%s)
[ "$MODE" = stop ] && kill -9 $R1
echo "rank 0 exited with status $RC, $((END - START)) s after rank 1 got SIG$(echo $MODE | tr a-z A-Z):"
grep -v '^step' "$DIR/r0.log" | tail -3
if [ $RC -eq 0 ]; then echo "FAIL: rank 0 exited 0"; exit 1; fi
grep -q 'mmtrain (rank 0): error:' "$DIR/r0.log" || { echo "FAIL: no error line"; exit 1; }
if [ $((END - START)) -gt 30 ]; then echo "FAIL: took longer than 30 s"; exit 1; fi
echo PASS
