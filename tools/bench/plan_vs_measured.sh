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
#        [--calibrate_layout 8x2] [--calibrate_link 100mbit|none] [--share measured|1]
# --calibrate: `tandem plan --calibrate` right before and right after the
# runs, planned with the mean of the two profiles (OUT/profile.txt): on a
# loaded host the calibrated ring and shard-server call rounds drift with
# the other load. Before the runs it also runs three 105-step real jobs at
# --calibrate_layout (default: the layout of --layouts with the most
# workers, where the CPU floor matters) on --calibrate_link (default: the
# first of --rates): allreduce hier=0, hier=1 and ps, and measures every
# process's CPU between steps 20 and 100: a real job's CPU per gradient
# ring round (the two rings' difference over their rounds' difference),
# what a worker's step costs beyond its rounds and compute, and a real
# chunk call (job_round_cpu_s, step_cpu_s, shard_call_cpu_s;
# OUT/calibration_jobs.json), and moves the bare ring_round_<N>_s of the
# flat ring job's ring until the plan's chain for that job is its step
# (where the step is the longer: a real job's round). Every measured run also records its job's
# CPU per step by process role over its steady state (strategies.sh,
# tools/bench/job_cpu.py), printed next to the plan's host_cpu_s: the
# check of the CPU floor that the other load moves least. Each run is planned with
# the share of the cores its job could expect (--share measured: its
# processes over them plus the session's median of the threads others
# kept runnable before each run) and printed with the plan's CPU floor,
# that share, the load average and what bounds it (link, CPU, latency).
# Issue 33's acceptance run (docs/benchmarks.md; about 8 minutes with
# --repeat 2 on an idle 2-core host, calibration included):
#   sudo tools/bench/plan_vs_measured.sh --model mlp:784,64,10 --batch 32 --steps 50 \
#     --rates 100mbit --layouts 8x2,2x2,4x1 --repeat 2 --calibrate --only \
#     "allreduce hier=0,allreduce hier=1,allreduce wire=fp16,compressed int8+EF,compressed powersgd r4,ps,hybrid,zero1,zero2,zero3"
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
case "${1:-}" in -h|--help) sed -n '2,45p' "$0"; exit 0 ;; esac
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" "$here/plan_vs_measured.py" --tandem "$TANDEM" --strategies "$here/strategies.sh" "$@"
