#!/usr/bin/env bash
# The cost of --trace on a real job: the same `tandem local` run with
# --trace off and on, PAIRS times, interleaved (off, on, off, on, ...), so
# load on a shared machine hits both arms alike. Two measures per run: wall
# ms/step, the workers' mean tandem_step_seconds (RUN_DIR/metrics/
# worker-*.prom, all steps), and CPU ms/step, the CPU seconds of tandem
# local and every process it ran (getrusage of reaped children, via
# /usr/bin/time) over the steps — tracing's cost is CPU work, and CPU time
# is far less disturbed by other load than wall time. Prints every pair,
# then the medians of each arm and of the per-pair ratios on/off (target
# <= 1.01).
#
#   bazel build -c opt //tools/tandem //services/...
#   BIN=bazel-bin tools/bench/trace_overhead.sh [PAIRS] [STEPS] [MODEL] [WORKERS]
set -euo pipefail
PAIRS=${1:-5}
STEPS=${2:-300}
MODEL=${3:-mlp:784,1024,1024,10}
WORKERS=${4:-2}
BIN=${BIN:-bazel-bin}
TMP=$(mktemp -d /tmp/trace_overhead.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# "WALL CPU": ms/step of one run, the workers' mean step time and the CPU
# time of the whole run per step.
run() {  # run NAME [extra tandem local flags...]
  local dir=$TMP/$1
  shift
  /usr/bin/time -f "%U %S" -o "$dir.time" \
    "$BIN/tools/tandem/tandem" local --workers="$WORKERS" --model="$MODEL" --max_steps="$STEPS" \
    --log_every=100000 --checkpoint_every=0 --run_dir="$dir" "$@" >"$dir.out" 2>&1 ||
    { cat "$dir.out" >&2; exit 1; }
  local wall cpu
  wall=$(awk '/^tandem_step_seconds_sum/ {s += $2} /^tandem_step_seconds_count/ {n += $2}
       END { if (n == 0) exit 1; printf "%.4f\n", 1000 * s / n }' "$dir"/metrics/worker-*.prom)
  cpu=$(awk -v steps="$STEPS" '{ printf "%.4f\n", 1000 * ($1 + $2) / steps }' "$dir.time")
  echo "$wall $cpu"
}

median() { sort -g | awk '{v[NR] = $1} END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "trace overhead: $WORKERS workers, $MODEL, $STEPS steps per run, $PAIRS interleaved pairs"
FMT="%-6s %10s %10s %7s | %10s %10s %7s\n"
printf "$FMT" pair "wall off" "wall on" ratio "cpu off" "cpu on" ratio
printf "$FMT" "" "ms/step" "ms/step" "" "ms/step" "ms/step" ""
for ((p = 1; p <= PAIRS; p++)); do
  read -r woff coff < <(run "off$p")
  read -r won con < <(run "on$p" --trace)
  wr=$(awk -v a="$won" -v b="$woff" 'BEGIN { printf "%.4f", a / b }')
  cr=$(awk -v a="$con" -v b="$coff" 'BEGIN { printf "%.4f", a / b }')
  echo "$woff $won $wr $coff $con $cr" >>"$TMP/rows"
  printf "$FMT" "$p" "$woff" "$won" "$wr" "$coff" "$con" "$cr"
done
[[ -s "$TMP/on$PAIRS/trace.json" ]] || { echo "the --trace run left no trace.json" >&2; exit 1; }
col() { awk -v c="$1" '{ print $c }' "$TMP/rows" | median; }
printf "$FMT" median "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)"
