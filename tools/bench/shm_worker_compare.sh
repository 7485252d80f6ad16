#!/usr/bin/env bash
# ms/step of real worker processes with --transport=gloo vs --transport=shm:
# starts a coordinator and a data server, then WORKERS workers per transport
# for STEPS steps, and prints rank 0's last progress line for each.
#
#   bazel build -c opt //services/worker:worker //services/coordinator:coordinator \
#       //services/dataserver:dataserver
#   BIN=bazel-bin tools/bench/shm_worker_compare.sh [WORKERS] [STEPS] [MODEL] [BATCH]
set -euo pipefail
WORKERS=${1:-2}
STEPS=${2:-300}
MODEL=${3:-mlp:784,1024,1024,10}
BATCH=${4:-64}
BIN=${BIN:-bazel-bin}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
TMP=$(mktemp -d /tmp/shm_worker_compare.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

wait_file() { for _ in $(seq 200); do [[ -s "$1" ]] && return 0; sleep 0.05; done; echo "no $1" >&2; exit 1; }

"$BIN/services/dataserver/dataserver" --dataset="fashion-mnist/train=$DATA/train,fashion-mnist/t10k=$DATA/t10k" \
  --port_file="$TMP/ds.port" >"$TMP/ds.log" 2>&1 &
PIDS+=($!)
wait_file "$TMP/ds.port"
DS=127.0.0.1:$(cat "$TMP/ds.port")

for transport in gloo shm; do
  job="cmp-$transport"
  "$BIN/services/coordinator/coordinator" --job_id="$job" --min_workers="$WORKERS" \
    --max_workers="$WORKERS" --settle_seconds=0.2 --port_file="$TMP/$job.port" >"$TMP/$job.coord.log" 2>&1 &
  cpid=$!
  PIDS+=($cpid)
  wait_file "$TMP/$job.port"
  CO=127.0.0.1:$(cat "$TMP/$job.port")
  wpids=()
  for ((i = 0; i < WORKERS; i++)); do
    "$BIN/services/worker/worker" --coordinator="$CO" --data_servers="$DS" --job_id="$job" \
      --worker_id="w$i" --model="$MODEL" --batch_size="$BATCH" --max_steps="$STEPS" \
      --log_every=100 --eval_dataset= --transport="$transport" >"$TMP/$job.w$i.log" 2>&1 &
    wpids+=($!)
  done
  for p in "${wpids[@]}"; do wait "$p" || { echo "$transport worker failed:"; cat "$TMP/$job".w*.log; exit 1; }; done
  kill "$cpid" 2>/dev/null || true
  echo "== --transport=$transport, $WORKERS workers, $MODEL, batch $BATCH/worker =="
  grep -h "transport" "$TMP/$job".w*.log | head -1 || true
  grep -hv "^I[0-9]" "$TMP/$job".w*.log | grep -i "step" | tail -2
done
