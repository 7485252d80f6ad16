#!/usr/bin/env bash
# Fault scenarios on `tandem local`, one table: a hung worker (SIGSTOP, with
# --keep_going), a coordinator and a data-server restart (SIGKILL),
# --max_restarts used up, an RPC without the job's token, a worker added
# mid-run (tandem add-worker), a plain-text RPC to a --tls run, and a worker
# killed (SIGKILL) under allreduce, compressed, zero1, zero2 and zero3, and
# shard server 1 of 2 killed under ps (rebuilt from its replica). Columns: scenario,
# outcome, time to detect, time to recover (fault to the first training step
# after it, seconds), steps redone (completed steps trained again) and where
# the state came from (memory / disk), samples lost and repeated over the
# epoch (from the workers' --sample_log_dir; rolled-back steps do not
# count). Target: every row survived or a clean error / refusal, 0 lost, 0
# repeated, detection <= 10 s, recovery <= 5 s, 0 steps redone from memory
# (allreduce, compressed, scale-up), <= --replica_every (5) from peer
# memory (zero1/2/3), <= 1 for a lost shard server.
# Each run is a small one-epoch job (~5-10 s).
#
#   bazel build -c opt //tools/tandem
#   tools/bench/faults.sh [--out DIR] [--only 1,3]
# TANDEM=path overrides the binary (default bazel-bin/tools/tandem/tandem).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
if [ ! -x "$TANDEM" ]; then
  echo "faults.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
case "${1:-}" in -h|--help) sed -n '2,18p' "$0"; exit 0 ;; esac
exec "${PYTHON:-python3}" "$here/faults.py" --tandem "$TANDEM" "$@"
