#!/usr/bin/env bash
# tandem local --autotune against the default configuration, on the shaped
# cluster (2 nodes x 2 workers, 1 Gbit/s links by default; root needed for
# the network namespace): one autotune run (its table: every configuration's
# trial step time), then the default (allreduce, 25 MiB buckets) and the
# chosen configuration run for the same steps, alternating, --repeats times
# each. Prints the median ms/step of each and their ratio (issue 16's
# report: the chosen configuration's speed-up over the default). Step time
# is the mean of the workers' tandem_step_seconds over a run.
#
#   bazel build -c opt //tools/tandem
#   tools/bench/autotune.sh [--nodes 2] [--per-node 2] [--link 1gbit]
#        [--model mlp:784,1024,1024,10] [--steps 100] [--trial-steps 20] [--repeats 3]
# TANDEM=path overrides the binary (default bazel-bin/tools/tandem/tandem).
set -euo pipefail
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
nodes=2 per_node=2 link=1gbit model=mlp:784,1024,1024,10 steps=100 trial=20 repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --per-node) per_node="$2"; shift 2 ;;
    --link) link="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --trial-steps) trial="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "autotune.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$TANDEM" ]; then
  echo "autotune.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
tmp=$(mktemp -d /tmp/tandem-autotune-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
common=(local --nodes "$nodes" --workers-per-node "$per_node" --link "$link" --model "$model"
        --epochs 1 --max_steps "$steps" --checkpoint_every 0)
# Mean tandem_step_seconds (ms) over the workers of run directory $1.
step_ms() {
  python3 - "$1" <<'PY'
import glob, re, sys
s = c = 0.0
for f in glob.glob(sys.argv[1] + "/metrics/worker-*.prom"):
    for line in open(f):
        m = re.match(r"tandem_step_seconds_(sum|count)(\{[^}]*\})? (\S+)", line)
        if m:
            if m.group(1) == "sum": s += float(m.group(3))
            else: c += float(m.group(3))
print("%.2f" % (1e3 * s / c) if c else "nan")
PY
}
"$TANDEM" "${common[@]}" --autotune --autotune_steps "$trial" --run-dir "$tmp/tune" \
  > "$tmp/tune.out" 2>&1 || { cat "$tmp/tune.out" >&2; exit 1; }
grep '^autotune: ' "$tmp/tune.out"
choice=$(sed -n 's/^autotune: training with --sync //p' "$tmp/tune.out")
sync=${choice%% *}
opt=""
case "$choice" in *--sync_opt*) opt=${choice##*--sync_opt } ;; esac
default_ms=() chosen_ms=()
for r in $(seq 1 "$repeats"); do
  "$TANDEM" "${common[@]}" --run-dir "$tmp/default-$r" > "$tmp/default-$r.out" 2>&1
  default_ms+=("$(step_ms "$tmp/default-$r")")
  "$TANDEM" "${common[@]}" --sync "$sync" ${opt:+--sync_opt "$opt"} --run-dir "$tmp/chosen-$r" \
    > "$tmp/chosen-$r.out" 2>&1
  chosen_ms+=("$(step_ms "$tmp/chosen-$r")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
d=$(median "${default_ms[@]}") c=$(median "${chosen_ms[@]}")
echo "default (allreduce bucket_cap_mb=25): ms/step ${default_ms[*]} median $d"
echo "chosen ($choice): ms/step ${chosen_ms[*]} median $c"
awk -v d="$d" -v c="$c" 'BEGIN {printf "speed-up of the chosen configuration: %.2fx\n", d / c}'
