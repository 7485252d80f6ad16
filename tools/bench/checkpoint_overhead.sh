#!/usr/bin/env bash
# Step time with background checkpoints every 20 steps vs no checkpoints vs
# synchronous checkpoints, side by side (interleaved runs, medians) on
# `tandem local` (issue 34 item 4; target: background <= 5% above none),
# for one strategy: --sync allreduce (default), zero1/2/3, ps or hybrid.
#
#   bazel build -c opt //tools/tandem
#   tools/bench/checkpoint_overhead.sh [--sync zero2] [--model mlp:784,2048,2048,10] [--reps 3] [--every 20]
# TANDEM=path overrides the binary (default bazel-bin/tools/tandem/tandem).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
if [ ! -x "$TANDEM" ]; then
  echo "checkpoint_overhead.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
case "${1:-}" in -h|--help) sed -n '2,8p' "$0"; exit 0 ;; esac
exec "${PYTHON:-python3}" "$here/checkpoint_overhead.py" --tandem "$TANDEM" "$@"
