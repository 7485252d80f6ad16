#!/usr/bin/env bash
# The cost of --trace on a real job: the same `tandem local` run with
# --trace off and on, PAIRS times, interleaved (off, on, off, on, ...), so
# load on a shared machine hits both arms alike. Each run's step time is the
# workers' mean tandem_step_seconds (RUN_DIR/metrics/worker-*.prom, all
# steps); prints every pair, then the median step time of each arm and the
# median of the per-pair ratios on/off (target <= 1.01).
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

# ms/step of one run: the workers' mean step time.
run() {  # run NAME [extra tandem local flags...]
  local dir=$TMP/$1
  shift
  "$BIN/tools/tandem/tandem" local --workers="$WORKERS" --model="$MODEL" --max_steps="$STEPS" \
    --log_every=100000 --checkpoint_every=0 --run_dir="$dir" "$@" >"$dir.out" 2>&1 ||
    { cat "$dir.out" >&2; exit 1; }
  awk '/^tandem_step_seconds_sum/ {s += $2} /^tandem_step_seconds_count/ {n += $2}
       END { if (n == 0) exit 1; printf "%.4f\n", 1000 * s / n }' "$dir"/metrics/worker-*.prom
}

median() { sort -g | awk '{v[NR] = $1} END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "trace overhead: $WORKERS workers, $MODEL, $STEPS steps per run, $PAIRS interleaved pairs"
printf "%-6s %12s %12s %8s\n" pair "off ms/step" "on ms/step" ratio
: >"$TMP/off" >"$TMP/on" >"$TMP/ratio"
for ((p = 1; p <= PAIRS; p++)); do
  off=$(run "off$p")
  on=$(run "on$p" --trace)
  ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }')
  echo "$off" >>"$TMP/off"
  echo "$on" >>"$TMP/on"
  echo "$ratio" >>"$TMP/ratio"
  printf "%-6s %12s %12s %8s\n" "$p" "$off" "$on" "$ratio"
done
[[ -s "$TMP/on$PAIRS/trace.json" ]] || { echo "the --trace run left no trace.json" >&2; exit 1; }
printf "%-6s %12s %12s %8s\n" median "$(median <"$TMP/off")" "$(median <"$TMP/on")" \
  "$(median <"$TMP/ratio")"
