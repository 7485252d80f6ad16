#!/usr/bin/env bash
# Fault scenarios on `tandem local`, one table: a worker killed (SIGKILL)
# under each strategy family (allreduce, allreduce over Gloo TCP, hier,
# compressed, zero1/2/3, ps, hybrid), a worker added mid-run (tandem add-worker), a shard server killed
# (ps, 2 servers), a hung worker (SIGSTOP, with --keep_going), a coordinator
# and a data-server restart (SIGKILL), --max_restarts used up, an RPC
# without the job's token, a plain-text RPC to a --tls run. Columns:
# scenario, outcome, time to detect, time to recover (fault to the first
# training step after it, seconds), steps redone (completed steps trained
# again) and where the state came from (memory / disk), samples lost and
# repeated over the epoch (from the workers' --sample_log_dir; rolled-back
# steps do not count), every sample once, final test accuracy and its
# difference (points) to an undisturbed run of the same configuration.
# Targets (issue 34): lost worker <= 1 step redone for allreduce/compressed,
# <= K sharded (zero1/2/3 from peer memory: K = --replica_every, 5); scale-up 0; lost shard server with a replica <= 1; every
# sample once; accuracy within 0.5 point; recovery <= 5 s.
# Each run is a small one-epoch job (~5-10 s unloaded).
#
#   bazel build -c opt //tools/tandem
#   tools/bench/faults.sh [--out DIR] [--only 1,killed-zero1] [--list] [--no-reference]
# TANDEM=path overrides the binary (default bazel-bin/tools/tandem/tandem).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
if [ ! -x "$TANDEM" ]; then
  echo "faults.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
case "${1:-}" in -h|--help) sed -n '2,21p' "$0"; exit 0 ;; esac
exec "${PYTHON:-python3}" "$here/faults.py" --tandem "$TANDEM" "$@"
