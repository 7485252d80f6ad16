#!/usr/bin/env bash
# Side by side, in one run: `tandem local` and PyTorch DDP (gloo, one process
# per rank, one thread each) training the same MLP on Fashion-MNIST with the
# same per-worker batch, optimizer, lr rule and epochs, at world sizes 2 and 4.
# Prints samples/s (median of the progress windows after the first, both
# sides logging every --log_every steps), end-to-end wall time (start-up,
# data loading and evaluation included, for both), the ratio and the test
# accuracy of each, and the CPU seconds each whole run used (user + sys of
# every process: /usr/bin/time over the launcher and its children). On a
# machine shared with other work, wall-clock rates move with the load;
# samples per CPU-second (the cpu_samp/s columns: training samples over the
# run's CPU seconds, start-up and evaluation included) move much less.
# First it measures this machine's limit in the same run (`tandem plan
# --calibrate`: the model's own forward + backward on one thread, memory
# streaming) and prints each side's samples/s as a share of
# min(world, cores) x that single-thread rate. Both sides run with the same
# OpenBLAS kernel: the OPENBLAS_CORETYPE tandem local gives its children (if
# any) is exported for PyTorch too.
#
# With --rounds R each world runs R times, tandem and PyTorch alternating
# (round r with --seed r on both sides), and every column is the median over
# the rounds, with each round's ratio listed: on a machine shared with other
# work one pair of runs meets two different loads, so one round says little
# about the wall-clock ratio.
#
#   tools/bench/ddp_vs_pytorch.sh [--epochs 2] [--worlds "2 4"] [--spec mlp:784,1024,1024,10]
#                                 [--batch_size 64] [--lr 0.05] [--optimizer sgd] [--rounds 1]
#                                 [--tandem_args "--sync_opt bucket_cap_mb=2"]
# (--tandem_args: extra `tandem local` flags, e.g. to measure a setting
# against PyTorch before it becomes a default.)
# Env: BAZEL (default bazel), BAZEL_STARTUP (e.g. --output_base=...),
#      PYTHON (default /usr/bin/python3, with Debian's python3-torch:
#      tools/setup.sh --bench installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BAZEL=${BAZEL:-bazel}
PYTHON=${PYTHON:-/usr/bin/python3}
EPOCHS=2 WORLDS="2 4" SPEC=mlp:784,1024,1024,10 BATCH=64 LR=0.05 OPT=sgd LOG_EVERY=20 ROUNDS=1 TANDEM_ARGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS=$2 ;;
    --worlds) WORLDS=$2 ;;
    --spec) SPEC=$2 ;;
    --batch_size) BATCH=$2 ;;
    --lr) LR=$2 ;;
    --optimizer) OPT=$2 ;;
    --log_every) LOG_EVERY=$2 ;;
    --rounds) ROUNDS=$2 ;;
    --tandem_args) TANDEM_ARGS=$2 ;;
    *) echo "ddp_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
"$PYTHON" -c "import torch" 2>/dev/null || {
  echo "ddp_vs_pytorch.sh: $PYTHON has no torch; run tools/setup.sh --bench" >&2; exit 1; }
# tandem's workers use linear lr scaling for sgd and we ask for the same in
# PyTorch; for adamw both get sqrt.
SCALING=linear; [ "$OPT" = adamw ] && SCALING=sqrt
${BAZEL} ${BAZEL_STARTUP:-} build --symlink_prefix=/ //tools/tandem >&2
TANDEM="$(${BAZEL} ${BAZEL_STARTUP:-} info bazel-bin 2>/dev/null)/tools/tandem/tandem"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# The limit, measured next to the runs.
"$TANDEM" plan --calibrate --model "$SPEC" --batch_size "$BATCH" --optimizer "$OPT" \
  --profile "$OUT/profile" > "$OUT/plan.txt"
GEMM=$(sed -n 's/^gemm_flops_per_s = //p' "$OUT/profile")
STREAM=$(sed -n 's/^stream_bytes_per_s = //p' "$OUT/profile")
MFLOP=$(sed -n 's/.*, \([0-9.]*\) MFLOP per sample.*/\1/p' "$OUT/plan.txt")
ONE_THREAD=$(awk -v g="$GEMM" -v f="$MFLOP" 'BEGIN { printf "%.0f", g / (f * 1e6) }')
echo "limit: $MFLOP MFLOP per sample (forward + backward); this machine trains $ONE_THREAD samples/s per thread ($(awk -v g="$GEMM" 'BEGIN { printf "%.1f", g / 1e9 }') GFLOP/s), streams $(awk -v s="$STREAM" 'BEGIN { printf "%.1f", s / 1e9 }') GB/s per core" >&2

# Median of the numbers on stdin (0 without any).
median() { sort -n | awk '{v[NR] = $1} END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                                             else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Median of the samples/s values of "step ..." lines after the first.
median_rate() { { grep '^step ' "$1" || true; } | sed -n 's/.* samples\/s \([0-9.]*\).*/\1/p' | tail -n +2 | median; }

declare -A T_RATE T_ACC T_WALL P_RATE P_ACC P_WALL T_CPU P_CPU RATIOS
TIME=/usr/bin/time; [ -x "$TIME" ] || TIME=""
# CPU seconds (user + sys) recorded by /usr/bin/time -o, or 0 without it.
cpu_seconds() { [ -s "$1" ] && awk '{ print $1 + $2 }' "$1" || echo 0; }
seconds_since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN { print a - b }'; }
for w in $WORLDS; do
  : > "$OUT/rounds-$w"  # one line per round: t_rate t_acc t_wall t_cpu p_rate p_acc p_wall p_cpu
  for r in $(seq 1 "$ROUNDS"); do
    echo "== world $w round $r: tandem local" >&2
    start=$(date +%s.%N)
    rm -f "$OUT/tandem.time"
    ${TIME:+$TIME -f "%U %S" -o "$OUT/tandem.time"} "$TANDEM" local --workers "$w" --model "$SPEC" --epochs "$EPOCHS" --batch-size "$BATCH" \
      --lr "$LR" --optimizer "$OPT" --lr-scaling "$SCALING" --log-every "$LOG_EVERY" --seed "$r" \
      --checkpoint-every 0 --run-dir "$OUT/run-$w-$r" $TANDEM_ARGS | tee "$OUT/tandem.txt" | grep -E '^(step [0-9]*0/|epoch)' >&2 || true
    t_wall=$(seconds_since "$start")
    # Same BLAS kernel for PyTorch: what tandem local chose for its workers.
    CORETYPE=$(sed -n 's/^kernels: .*children run with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' "$OUT/tandem.txt")
    t_acc=$(sed -n 's/^epoch [0-9]* test accuracy \([0-9.]*\).*/\1/p' "$OUT/tandem.txt" | tail -1)

    echo "== world $w round $r: PyTorch DDP (gloo)" >&2
    start=$(date +%s.%N)
    rm -f "$OUT/pytorch.time"
    env ${CORETYPE:+OPENBLAS_CORETYPE=$CORETYPE} OMP_NUM_THREADS=1 ${TIME:+$TIME -f "%U %S" -o "$OUT/pytorch.time"} "$PYTHON" tools/bench/ddp_vs_pytorch.py --world "$w" --spec "$SPEC" \
      --epochs "$EPOCHS" --batch_size "$BATCH" --lr "$LR" --optimizer "$OPT" --seed "$r" \
      --lr_scaling "$SCALING" --log_every "$LOG_EVERY" | tee "$OUT/pytorch.txt" | grep RESULT >&2
    p_wall=$(seconds_since "$start")
    p_acc=$(sed -n 's/^RESULT .* accuracy=\([0-9.]*\).*/\1/p' "$OUT/pytorch.txt")
    t_rate=$(median_rate "$OUT/tandem.txt") p_rate=$(median_rate "$OUT/pytorch.txt")
    echo "$t_rate ${t_acc:-0} $t_wall $(cpu_seconds "$OUT/tandem.time") $p_rate ${p_acc:-0} $p_wall $(cpu_seconds "$OUT/pytorch.time")" >> "$OUT/rounds-$w"
    RATIOS[$w]="${RATIOS[$w]:-}$(awk -v t="$t_rate" -v p="$p_rate" 'BEGIN { printf "%.2f ", (p > 0 ? t / p : 0) }')"
  done
  col() { awk -v c="$1" '{ print $c }' "$OUT/rounds-$w" | median; }
  T_RATE[$w]=$(col 1) T_ACC[$w]=$(col 2) T_WALL[$w]=$(col 3) T_CPU[$w]=$(col 4)
  P_RATE[$w]=$(col 5) P_ACC[$w]=$(col 6) P_WALL[$w]=$(col 7) P_CPU[$w]=$(col 8)
done

echo
echo "summary: $SPEC, batch $BATCH per worker, $OPT lr $LR ($SCALING scaling, cosine), $EPOCHS epoch(s), $(nproc) cores, median of $ROUNDS round(s)${TANDEM_ARGS:+, tandem local $TANDEM_ARGS}"
printf "%-6s %14s %14s %7s %10s %10s %9s %9s %9s %9s %13s %13s %10s %10s  %s\n" world tandem_samp/s torch_samp/s \
  ratio tandem_acc torch_acc tandem_s torch_s tandem_cpu torch_cpu tandem_cpu_sps torch_cpu_sps \
  tandem_lim torch_lim "ratio per round"
for w in $WORLDS; do
  ratio=$(awk -v t="${T_RATE[$w]}" -v p="${P_RATE[$w]}" 'BEGIN { printf "%.2f", (p > 0 ? t / p : 0) }')
  # Training samples of the run: Fashion-MNIST's 60,000 training images in
  # global batches of world * batch, remainder dropped (both sides).
  samples=$(awk -v w="$w" -v b="$BATCH" -v e="$EPOCHS" 'BEGIN { g = w * b; print int(60000 / g) * g * e }')
  t_sps=$(awk -v s="$samples" -v c="${T_CPU[$w]}" 'BEGIN { printf "%.0f", (c > 0 ? s / c : 0) }')
  p_sps=$(awk -v s="$samples" -v c="${P_CPU[$w]}" 'BEGIN { printf "%.0f", (c > 0 ? s / c : 0) }')
  # Share of the limit: min(world, cores) threads at the measured rate.
  limit=$(awk -v o="$ONE_THREAD" -v w="$w" -v c="$(nproc)" 'BEGIN { print o * (w < c ? w : c) }')
  t_lim=$(awk -v r="${T_RATE[$w]}" -v l="$limit" 'BEGIN { printf "%.0f%%", (l > 0 ? 100 * r / l : 0) }')
  p_lim=$(awk -v r="${P_RATE[$w]}" -v l="$limit" 'BEGIN { printf "%.0f%%", (l > 0 ? 100 * r / l : 0) }')
  printf "%-6s %14.0f %14.0f %6sx %10s %10s %9.1f %9.1f %9.1f %9.1f %13s %13s %10s %10s  %s\n" "$w" "${T_RATE[$w]}" \
    "${P_RATE[$w]}" "$ratio" "${T_ACC[$w]:-n/a}" "${P_ACC[$w]:-n/a}" "${T_WALL[$w]}" "${P_WALL[$w]}" \
    "${T_CPU[$w]}" "${P_CPU[$w]}" "$t_sps" "$p_sps" "$t_lim" "$p_lim" "${RATIOS[$w]}"
done
echo "tandem_lim / torch_lim: samples/s as a share of min(world, cores) x $ONE_THREAD samples/s (measured above)"
