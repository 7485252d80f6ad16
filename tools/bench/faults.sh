#!/usr/bin/env bash
# Fault scenarios on `tandem local`, one table: a hung worker (SIGSTOP, with
# --keep_going), a coordinator and a data-server restart (SIGKILL),
# --max_restarts used up, an RPC without the job's token, a worker added
# mid-run (tandem add-worker) and a plain-text RPC to a --tls run. Columns:
# scenario, outcome, time to detect, time to recover (both from the fault,
# seconds), samples lost and repeated over the epoch (from the workers'
# --sample_log_dir; rolled-back steps do not count). Target: every row
# survived or a clean error / refusal, 0 lost, 0 repeated, detection <= 10 s.
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
case "${1:-}" in -h|--help) sed -n '2,14p' "$0"; exit 0 ;; esac
exec "${PYTHON:-python3}" "$here/faults.py" --tandem "$TANDEM" "$@"
