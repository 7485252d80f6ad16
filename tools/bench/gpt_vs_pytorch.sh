#!/usr/bin/env bash
# Side by side, in one run: `tandem local` and PyTorch DDP (gloo, one process
# per rank, one thread each; tools/bench/gpt_vs_pytorch.py) training the same
# GPT on the same byte-level fortunes text with the same per-worker batch,
# AdamW and a constant lr (no scaling with the world size on either side, so
# the loss curves compare), for the same number of steps, at each world size
# and model size asked for. Prints tokens/s (median of the progress windows
# after the first), the ratio, each side's loss over the last window, and
# each side's share of the FLOP limit: min(world, cores) x the calibrated
# single-thread GEMM rate (`tandem plan --calibrate`, measured first in the
# same run) over the model's training FLOP per token (`tandem plan`'s cost
# model). With --rounds R every (size, world) pair runs R times, the two
# sides alternating, and the medians are reported (and each round's
# ratio): on a machine shared with other work, single runs move with the
# load. Round r runs both sides with --seed r (initialisation and data
# order; each side draws from its own generator), so rounds also show how
# far the loss after a few dozen steps moves with the seed alone: in the
# plateau phase (loss ~3.3-3.8 here) one seed pair differs by up to 0.5
# on either side, so compare losses over several rounds. Tokens per
# CPU-second (the cpu_tok/s columns: tokens trained over
# the user + sys seconds of every process of the run, /usr/bin/time over
# the launcher and its children, start-up included on both sides) move
# much less with the load. After the last step both sides evaluate the
# same held-out windows (the last 5% of the text: tandem's --dataset
# fortunes eval split) and report the mean next-token loss (the *_eval
# columns and their difference): the training-window losses come from each
# side's own shuffle, the held-out loss compares like with like.
#
#   tools/bench/gpt_vs_pytorch.sh [--specs "gpt:layers=4,d=256,heads=4,ctx=128 gpt:layers=6,d=384,heads=6,ctx=256"]
#                                 [--worlds "1 2 4"] [--batch_size 8] [--lr 0.001] [--steps 60]
#                                 [--log_every 10] [--rounds 1]
# Env: BAZEL (default bazel), BAZEL_STARTUP, PYTHON (default /usr/bin/python3,
#      with Debian's python3-torch: tools/setup.sh --bench installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BAZEL=${BAZEL:-bazel}
PYTHON=${PYTHON:-/usr/bin/python3}
SPECS="gpt:layers=4,d=256,heads=4,ctx=128 gpt:layers=6,d=384,heads=6,ctx=256"
WORLDS="1 2 4" BATCH=8 LR=0.001 STEPS=60 LOG_EVERY=10 ROUNDS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --specs) SPECS=$2 ;;
    --worlds) WORLDS=$2 ;;
    --batch_size) BATCH=$2 ;;
    --lr) LR=$2 ;;
    --steps) STEPS=$2 ;;
    --log_every) LOG_EVERY=$2 ;;
    --rounds) ROUNDS=$2 ;;
    *) echo "gpt_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
"$PYTHON" -c "import torch" 2>/dev/null || {
  echo "gpt_vs_pytorch.sh: $PYTHON has no torch; run tools/setup.sh --bench" >&2; exit 1; }
[ -d /usr/share/games/fortunes ] || {
  echo "gpt_vs_pytorch.sh: no /usr/share/games/fortunes; run tools/setup.sh (package fortunes)" >&2; exit 1; }
${BAZEL} ${BAZEL_STARTUP:-} build --symlink_prefix=/ //tools/tandem >&2
TANDEM="$(${BAZEL} ${BAZEL_STARTUP:-} info bazel-bin 2>/dev/null)/tools/tandem/tandem"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# The single-thread GEMM rate, measured next to the runs (calibrate's MLP).
"$TANDEM" plan --calibrate --profile "$OUT/profile" > /dev/null
GEMM=$(sed -n 's/^gemm_flops_per_s = //p' "$OUT/profile")
echo "calibrated: $(awk -v g="$GEMM" 'BEGIN { printf "%.1f", g / 1e9 }') GFLOP/s single-thread GEMM rate" >&2

median() { sort -n | awk '{v[NR] = $1} END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                                             else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Median tokens/s of the "step ..." lines after the first; loss of the last.
window_rate() { grep '^step ' "$1" | sed -n 's/.* tokens\/s \([0-9.]*\).*/\1/p' | tail -n +2 | median; }
last_loss() { grep '^step ' "$1" | tail -1 | sed -n 's/.* loss \([0-9.]*\) .*/\1/p'; }
# The held-out loss both sides print after the last step (tandem's evaluator
# line; gpt_vs_pytorch.py prints the same line).
eval_loss() { grep -E '^(final|epoch) .* eval loss ' "$1" | tail -1 | sed -n 's/.* eval loss \([0-9.]*\) .*/\1/p'; }

# The context of a spec ("ctx=" or "context=").
ctx_of() { echo "$1" | tr ':,' '\n\n' | sed -n 's/^\(ctx\|context\)=//p'; }
TIME=/usr/bin/time; [ -x "$TIME" ] || TIME=""
# Tokens per CPU-second from a /usr/bin/time -o file (0 without one).
cpu_rate() { [ -s "$1" ] && awk -v n="$2" '{ c = $1 + $2 } END { print (c > 0 ? n / c : 0) }' "$1" || echo 0; }

declare -A T_RATE P_RATE T_LOSS P_LOSS T_EVAL P_EVAL MFLOP T_CPU P_CPU RATIOS
RUNS=0  # a fresh run directory per tandem run (a finished one refuses to rejoin)
for spec in $SPECS; do
  MFLOP[$spec]=$("$TANDEM" plan --model "$spec" --batch_size "$BATCH" --profile "$OUT/profile" |
    sed -n 's/.*, \([0-9.]*\) MFLOP per sample.*/\1/p')
  for w in $WORLDS; do
    key="$spec/$w"
    for r in $(seq 1 "$ROUNDS"); do
      echo "== $spec world $w round $r: tandem local" >&2
      ${TIME:+$TIME -f "%U %S" -o "$OUT/t.time"} "$TANDEM" local --workers "$w" --model "$spec" --dataset fortunes --batch_size "$BATCH" \
        --optimizer adamw --lr "$LR" --schedule constant --lr_scaling none --max_steps "$STEPS" \
        --log_every "$LOG_EVERY" --checkpoint_every 0 --seed "$r" --run_dir "$OUT/run-$((++RUNS))" \
        > "$OUT/t.txt" 2>&1 || { tail -5 "$OUT/t.txt" >&2; exit 1; }
      grep '^step ' "$OUT/t.txt" | tail -1 >&2
      window_rate "$OUT/t.txt" >> "$OUT/t-rate-${w}-${spec//[:,=]/_}"
      last_loss "$OUT/t.txt" >> "$OUT/t-loss-${w}-${spec//[:,=]/_}"
      eval_loss "$OUT/t.txt" >> "$OUT/t-eval-${w}-${spec//[:,=]/_}"
      # Same BLAS kernel set for PyTorch as tandem gave its workers (if any).
      CORETYPE=$(sed -n 's/^kernels: .*children run with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' "$OUT/t.txt")
      echo "== $spec world $w round $r: PyTorch DDP (gloo)" >&2
      env ${CORETYPE:+OPENBLAS_CORETYPE=$CORETYPE} OMP_NUM_THREADS=1 \
        ${TIME:+$TIME -f "%U %S" -o "$OUT/p.time"} "$PYTHON" tools/bench/gpt_vs_pytorch.py \
        --world "$w" --spec "$spec" --batch_size "$BATCH" --lr "$LR" --max_steps "$STEPS" \
        --log_every "$LOG_EVERY" --seed "$r" > "$OUT/p.txt" 2>&1 || { tail -5 "$OUT/p.txt" >&2; exit 1; }
      grep '^RESULT' "$OUT/p.txt" >&2
      window_rate "$OUT/p.txt" >> "$OUT/p-rate-${w}-${spec//[:,=]/_}"
      last_loss "$OUT/p.txt" >> "$OUT/p-loss-${w}-${spec//[:,=]/_}"
      eval_loss "$OUT/p.txt" >> "$OUT/p-eval-${w}-${spec//[:,=]/_}"
      grep -E '^final .* eval loss ' "$OUT/t.txt" "$OUT/p.txt" | sed 's|^.*/t.txt:|  tandem  |; s|^.*/p.txt:|  pytorch |' >&2
      tokens=$(awk -v s="$STEPS" -v w="$w" -v b="$BATCH" -v t="$(ctx_of "$spec")" 'BEGIN { print s * w * b * t }')
      cpu_rate "$OUT/t.time" "$tokens" >> "$OUT/t-cpu-${w}-${spec//[:,=]/_}"
      cpu_rate "$OUT/p.time" "$tokens" >> "$OUT/p-cpu-${w}-${spec//[:,=]/_}"
      RATIOS[$key]="${RATIOS[$key]:-}$(awk -v t="$(tail -1 "$OUT/t-rate-${w}-${spec//[:,=]/_}")" \
        -v p="$(tail -1 "$OUT/p-rate-${w}-${spec//[:,=]/_}")" 'BEGIN { printf "%.2f ", (p > 0 ? t / p : 0) }')"
    done
    T_CPU[$key]=$(median < "$OUT/t-cpu-${w}-${spec//[:,=]/_}")
    P_CPU[$key]=$(median < "$OUT/p-cpu-${w}-${spec//[:,=]/_}")
    T_RATE[$key]=$(median < "$OUT/t-rate-${w}-${spec//[:,=]/_}")
    P_RATE[$key]=$(median < "$OUT/p-rate-${w}-${spec//[:,=]/_}")
    T_LOSS[$key]=$(median < "$OUT/t-loss-${w}-${spec//[:,=]/_}")
    P_LOSS[$key]=$(median < "$OUT/p-loss-${w}-${spec//[:,=]/_}")
    T_EVAL[$key]=$(median < "$OUT/t-eval-${w}-${spec//[:,=]/_}")
    P_EVAL[$key]=$(median < "$OUT/p-eval-${w}-${spec//[:,=]/_}")
  done
done

echo
echo "summary: batch $BATCH per worker, adamw lr $LR constant, $STEPS steps, $(nproc) cores, median of $ROUNDS round(s)"
printf "%-40s %5s %13s %13s %7s %11s %11s %11s %11s %9s %10s %10s %14s %14s %7s  %s\n" spec world \
  tandem_tok/s torch_tok/s ratio tandem_loss torch_loss tandem_eval torch_eval eval_diff tandem_lim \
  torch_lim tandem_cpu_tok/s torch_cpu_tok/s cpu_ratio "ratio per round"
for spec in $SPECS; do
  # Tokens/s one thread could train at the calibrated GEMM rate.
  per_thread=$(awk -v g="$GEMM" -v f="${MFLOP[$spec]}" -v t="$(ctx_of "$spec")" \
    'BEGIN { print g / (f * 1e6 / t) }')
  for w in $WORLDS; do
    key="$spec/$w"
    limit=$(awk -v o="$per_thread" -v w="$w" -v c="$(nproc)" 'BEGIN { print o * (w < c ? w : c) }')
    printf "%-40s %5s %13.0f %13.0f %6.2fx %11s %11s %11s %11s %9s %9.0f%% %9.0f%% %14.0f %14.0f %6.2fx  %s\n" \
      "$spec" "$w" "${T_RATE[$key]}" "${P_RATE[$key]}" \
      "$(awk -v t="${T_RATE[$key]}" -v p="${P_RATE[$key]}" 'BEGIN { print (p > 0 ? t / p : 0) }')" \
      "${T_LOSS[$key]}" "${P_LOSS[$key]}" "${T_EVAL[$key]}" "${P_EVAL[$key]}" \
      "$(awk -v t="${T_EVAL[$key]}" -v p="${P_EVAL[$key]}" 'BEGIN { d = t - p; printf "%+.4f", d }')" \
      "$(awk -v r="${T_RATE[$key]}" -v l="$limit" 'BEGIN { print 100 * r / l }')" \
      "$(awk -v r="${P_RATE[$key]}" -v l="$limit" 'BEGIN { print 100 * r / l }')" \
      "${T_CPU[$key]}" "${P_CPU[$key]}" \
      "$(awk -v t="${T_CPU[$key]}" -v p="${P_CPU[$key]}" 'BEGIN { print (p > 0 ? t / p : 0) }')" \
      "${RATIOS[$key]}"
  done
done
echo "tandem_lim / torch_lim: tokens/s as a share of min(world, cores) x the calibrated GEMM rate over the model's training FLOP per token"
echo "cpu_tok/s: tokens trained per CPU-second of the whole run (start-up and the final evaluation included on both sides)"
echo "*_loss: training loss over the last window (each side's own batches); *_eval: mean next-token loss on the same held-out windows (the last 5% of the text) after the same steps; eval_diff = tandem - torch (target: |diff| <= 0.05)"
