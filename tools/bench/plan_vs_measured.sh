#!/usr/bin/env bash
# `tandem plan`'s predictions next to measured runs: runs
# tools/bench/strategies.sh (simulated nodes, shaped links; needs root) for
# every strategy x link rate x layout, asks `tandem plan --one_host` for the
# same configurations, and prints predicted vs measured step time, the error,
# and whether the plan's recommendation was the measured fastest.
# Calibrate first on the same machine (tandem plan --calibrate --model M).
#
#   bazel build -c opt //tools/tandem
#   sudo tools/bench/plan_vs_measured.sh [--out DIR] [--model mlp:784,1024,1024,10]
#        [--steps 30] [--batch 64] [--rates 1gbit,100mbit] [--layouts 2x2,4x1]
#        [--measured OUT/measured/strategies.json]   (re-plan an earlier run only)
#        [--repeat 3] [--only "allreduce hier=0,..."] [--profile FILE | --calibrate]
# --calibrate: `tandem plan --calibrate` right before and right after the
# runs, planned with the mean of the two profiles (OUT/profile.txt): on a
# loaded host the calibrated ring and shard-server call rounds drift with
# the other load. Each row also prints what the plan says bounds it (link,
# CPU, latency).
# Issue 33's 8x2 run (docs/benchmarks.md):
#   sudo tools/bench/plan_vs_measured.sh --model mlp:784,64,10 --batch 32 --steps 50 \
#     --rates 100mbit --layouts 8x2,2x2,4x1 --repeat 3
# --measured plans the model and batch the run used (its strategies.json);
# rows plan has no strategy for (hier=1 int8, threshold) or whose steps were
# all in a codec's dense warm-up are listed without an error; the
# recommendation is judged only where the measured best two differ by > 10%.
# Writes OUT/plan_vs_measured.json. TANDEM=path overrides the binary.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
if [ ! -x "$TANDEM" ]; then
  echo "plan_vs_measured.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
case "${1:-}" in -h|--help) sed -n '2,26p' "$0"; exit 0 ;; esac
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" "$here/plan_vs_measured.py" --tandem "$TANDEM" --strategies "$here/strategies.sh" "$@"
