#!/usr/bin/env bash
# Side by side, in one run: `tandem local` and PyTorch DDP (gloo, one process
# per rank, one thread each; tools/bench/gpt_vs_pytorch.py) training the same
# GPT on the same byte-level fortunes text with the same per-worker batch,
# AdamW and a constant lr (no scaling with the world size on either side, so
# the loss curves compare), for the same number of steps, at each world size
# and model size asked for. Prints tokens/s (median of the progress windows
# after the first, which is the warm-up), the ratio, and each side's share of
# the FLOP limit: min(world, cores) x the calibrated single-thread GEMM rate
# (`tandem plan --calibrate`, measured first in the same run) over the
# model's training FLOP per token (`tandem plan`'s cost model).
#
# Seeds. With --seeds K every (size, world) pair runs K times, seed s = 1..K
# (--first_seed F: F..F+K-1) on both sides (the initialisation and the data
# order; each side draws from its own generator unless --same_batches),
# the two sides alternating. Rates are the medians over
# the seeds (each seed's ratio is listed too). After the last step both
# sides evaluate the same held-out windows (the last 5% of the text:
# tandem's --dataset fortunes eval split) and print the mean next-token
# loss; the summary compares the two sides' mean over the seeds, with each
# side's standard deviation over the seeds and the difference's 2-sigma
# uncertainty (2 x sqrt(sd_t^2 / K + sd_p^2 / K)). In the plateau phase
# (loss ~3.3-3.8 after a few dozen steps) one seed pair differs by up to 0.5
# either way, so a single seed says nothing within 0.05. Verdict: "within"
# when |diff| + 2 sigma <= 0.05, "differs" when |diff| - 2 sigma > 0.05,
# otherwise "more seeds" (always so with K = 1).
#
# Same batches (--same_batches). The PyTorch side trains on exactly
# tandem's batches, rank for rank and step for step, from exactly tandem's
# initial weights: gpt_vs_pytorch.py reproduces tandem's sampler and its
# initialiser from the seed (tools/bench/tandem_order.py; the
# tandem_order_test checks them against the C++). The seed spread then
# drops out of the comparison: each pair prints both training-loss curves
# at every logged step and a verdict line, max |tandem - torch| over the
# logged steps and of the held-out loss, "within 0.05" or "differs by more
# than 0.05"; the summary repeats the verdict lines. Both sides log the mean
# of the ranks' losses.
#
# Time limits. Each side runs under a limit that scales with the size and
# the world: 60 s plus 10 x (the steps' training FLOP + the held-out
# evaluation's forward FLOP) / (the calibrated GEMM rate x min(world,
# cores)), times --time_scale. The calibration is wall-clock, so on a loaded
# machine the rate and hence the limit move with the load. A side that runs
# past its limit is stopped (its whole process group), shows "-" and the
# pair's other numbers still print; a PyTorch side that had already printed
# its RESULT (only a rank's gloo teardown overran) keeps its rate and loss. --steps takes one value per spec (or one
# for all): at `gpt:layers=6,d=384,heads=6,ctx=256`, world 4 one step is 32
# sequences of 256 tokens on 2 cores (PyTorch ~3.4 s a step on a quiet
# machine, several times that under load), so fewer steps there keep the
# pair inside a session.
#
# Tokens per CPU-second (cpu_tok/s: tokens trained over the user + sys
# seconds of every process of the run, /usr/bin/time over the launcher and
# its children, start-up and the held-out evaluation included on both
# sides) move much less with the load than tokens/s.
#
#   tools/bench/gpt_vs_pytorch.sh [--specs "gpt:layers=4,d=256,heads=4,ctx=128 gpt:layers=6,d=384,heads=6,ctx=256"]
#                                 [--worlds "1 2 4"] [--batch_size 8] [--lr 0.001]
#                                 [--steps 60 | --steps "30 12" (one per spec)]
#                                 [--log_every 10] [--seeds 1] [--first_seed 1] [--time_scale 1]
#                                 [--same_batches]
# (--rounds R is the earlier name of --seeds R.)
# Env: BAZEL (default bazel), BAZEL_STARTUP, PYTHON (default /usr/bin/python3,
#      with Debian's python3-torch: tools/setup.sh --bench installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BAZEL=${BAZEL:-bazel}
PYTHON=${PYTHON:-/usr/bin/python3}
SPECS="gpt:layers=4,d=256,heads=4,ctx=128 gpt:layers=6,d=384,heads=6,ctx=256"
WORLDS="1 2 4" BATCH=8 LR=0.001 STEPS=60 LOG_EVERY=10 SEEDS=1 FIRST_SEED=1 TIME_SCALE=1 SAME_BATCHES=""
FORTUNES=/usr/share/games/fortunes
while [ $# -gt 0 ]; do
  case "$1" in
    --same_batches) SAME_BATCHES=--same_batches; shift; continue ;;
    --specs) SPECS=$2 ;;
    --worlds) WORLDS=$2 ;;
    --batch_size) BATCH=$2 ;;
    --lr) LR=$2 ;;
    --steps) STEPS=$2 ;;
    --log_every) LOG_EVERY=$2 ;;
    --seeds|--rounds) SEEDS=$2 ;;
    --first_seed) FIRST_SEED=$2 ;;
    --time_scale) TIME_SCALE=$2 ;;
    *) echo "gpt_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
read -r -a SPEC_LIST <<< "$SPECS"
read -r -a STEP_LIST <<< "$STEPS"
if [ "${#STEP_LIST[@]}" -ne 1 ] && [ "${#STEP_LIST[@]}" -ne "${#SPEC_LIST[@]}" ]; then
  echo "gpt_vs_pytorch.sh: --steps has ${#STEP_LIST[@]} values for ${#SPEC_LIST[@]} specs; give one, or one per spec" >&2
  exit 2
fi
"$PYTHON" -c "import torch" 2>/dev/null || {
  echo "gpt_vs_pytorch.sh: $PYTHON has no torch; run tools/setup.sh --bench" >&2; exit 1; }
[ -d "$FORTUNES" ] || {
  echo "gpt_vs_pytorch.sh: no $FORTUNES; run tools/setup.sh (package fortunes)" >&2; exit 1; }
${BAZEL} ${BAZEL_STARTUP:-} build --symlink_prefix=/ //tools/tandem >&2
TANDEM="$(${BAZEL} ${BAZEL_STARTUP:-} info bazel-bin 2>/dev/null)/tools/tandem/tandem"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# The single-thread GEMM rate, measured next to the runs (calibrate's MLP).
"$TANDEM" plan --calibrate --profile "$OUT/profile" > /dev/null
GEMM=$(sed -n 's/^gemm_flops_per_s = //p' "$OUT/profile")
echo "calibrated: $(awk -v g="$GEMM" 'BEGIN { printf "%.1f", g / 1e9 }') GFLOP/s single-thread GEMM rate" >&2
# Bytes of text the windows are cut from (gpt_vs_pytorch.py's file rule).
TEXT_BYTES=$(find "$FORTUNES" -maxdepth 1 -type f ! -name '.*' ! -name '*.dat' -printf '%s\n' |
  awk '{ s += $1 } END { print s + 0 }')

median() { sort -n | awk '{v[NR] = $1} END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                                             else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# "mean sd n" of the numbers on stdin (sd over n - 1; 0 when n < 2).
mean_sd() { awk '{ s += $1; q += $1 * $1; n++ } END { if (n == 0) { print "0 0 0"; exit }
                   m = s / n; v = n > 1 ? (q - n * m * m) / (n - 1) : 0; if (v < 0) v = 0
                   printf "%.4f %.4f %d\n", m, sqrt(v), n }'; }
# Median tokens/s of the "step ..." lines after the first (the warm-up window).
window_rate() { grep '^step ' "$1" | sed -n 's/.* tokens\/s \([0-9.]*\).*/\1/p' | tail -n +2 | median; }
# The held-out loss both sides print after the last step (tandem's evaluator
# line; gpt_vs_pytorch.py prints the same line).
eval_loss() { grep -E '^(final|epoch) .* eval loss ' "$1" | tail -1 | sed -n 's/.* eval loss \([0-9.]*\) .*/\1/p'; }

# The context of a spec ("ctx=" or "context=").
ctx_of() { echo "$1" | tr ':,' '\n\n' | sed -n 's/^\(ctx\|context\)=//p'; }
TIME=/usr/bin/time; [ -x "$TIME" ] || TIME=""
# Tokens per CPU-second from a /usr/bin/time -o file (empty when the run had none).
cpu_rate() { [ -s "$1" ] && awk -v n="$2" '{ c = $1 + $2 } END { if (c > 0) print n / c }' "$1" || true; }
# Seconds a side may run: see "Time limits" above. Args: MFLOP per sequence, steps, world, ctx.
time_limit() {
  awk -v f="$1" -v s="$2" -v w="$3" -v t="$4" -v b="$BATCH" -v g="$GEMM" -v c="$(nproc)" \
      -v bytes="$TEXT_BYTES" -v x="$TIME_SCALE" 'BEGIN {
    held_out = int(bytes / (t + 1) * 0.05 + 0.5)
    flop = (s * w * b + held_out / 3) * f * 1e6
    cores = w < c ? w : c
    printf "%d", x * (60 + 10 * flop / ((g > 0 ? g : 1e9) * cores)) }'
}
# Runs "$@" under `timeout` (its whole process group) with /usr/bin/time -o $1;
# output to $2. Returns 0, or 124 past the limit (the caller records "-"),
# or the command's own failure.
run_limited() {
  local time_file=$1 out=$2 limit=$3; shift 3
  rm -f "$time_file"
  local rc=0
  timeout -k 15 "$limit" ${TIME:+$TIME -f "%U %S" -o "$time_file"} "$@" > "$out" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "  stopped after its ${limit} s limit: $(grep '^step ' "$out" | tail -1)" >&2
    rm -f "$time_file"
    return 124
  fi
  [ "$rc" -eq 0 ] || { tail -5 "$out" >&2; return "$rc"; }
}
# Appends this seed's numbers of one side (t or p) to its files under $OUT.
record() {
  local side=$1 out=$2 tag=$3 tokens=$4
  window_rate "$out" >> "$OUT/$side-rate-$tag" || true
  local e; e=$(eval_loss "$out" || true)
  if [ -n "$e" ]; then echo "$e" >> "$OUT/$side-eval-$tag"; fi
  cpu_rate "$OUT/$side.time" "$tokens" >> "$OUT/$side-cpu-$tag"
}

# --same_batches: both sides' logged training loss side by side and the
# verdict line of one pair (max |tandem - torch| over the logged steps and of
# the held-out loss, against 0.05). Args: tandem log, PyTorch log, label.
loss_curves() {
  awk -v label="$3" -v te="$(eval_loss "$1")" -v pe="$(eval_loss "$2")" '
    FNR == 1 { f++ }
    /^step / { split($2, s, "/"); for (i = 3; i < NF; i++) if ($i == "loss") l = $(i + 1)
               if (f == 1) t[s[1]] = l; else if (s[1] in t) { p[s[1]] = l; k[++n] = s[1] } }
    END {
      printf "  loss curves (%s): step tandem torch diff\n", label
      m = 0; at = "-"
      for (i = 1; i <= n; i++) { d = t[k[i]] - p[k[i]]; printf "    %5d %8.4f %8.4f %+8.4f\n", k[i], t[k[i]], p[k[i]], d
                                 if (d < 0) d = -d; if (d > m) { m = d; at = k[i] } }
      e = (te != "" && pe != "") ? te - pe : ""; ae = e < 0 ? -e : e
      v = (n == 0 || e == "") ? "incomplete" : (m <= 0.05 && ae <= 0.05 ? "within 0.05" : "differs by more than 0.05")
      printf "loss verdict (%s, same batches): max |tandem - torch| %.4f over %d logged steps (at step %s), held-out %s: %s\n",
             label, m, n, at, (e == "" ? "-" : sprintf("%+.4f", e)), v }' "$1" "$2"
}

declare -A MFLOP RATIOS LIMITS STOPPED
RUNS=0  # a fresh run directory per tandem run (a finished one refuses to rejoin)
for i in "${!SPEC_LIST[@]}"; do
  spec=${SPEC_LIST[$i]}
  steps=${STEP_LIST[$i]:-${STEP_LIST[0]}}
  MFLOP[$spec]=$("$TANDEM" plan --model "$spec" --batch_size "$BATCH" --profile "$OUT/profile" |
    sed -n 's/.*, \([0-9.]*\) MFLOP per sample.*/\1/p')
  for w in $WORLDS; do
    key="$spec/$w" tag="${w}-${spec//[:,=]/_}"
    limit=$(time_limit "${MFLOP[$spec]}" "$steps" "$w" "$(ctx_of "$spec")")
    LIMITS[$key]="$steps steps, ${limit} s limit"
    tokens=$(awk -v s="$steps" -v w="$w" -v b="$BATCH" -v t="$(ctx_of "$spec")" 'BEGIN { print s * w * b * t }')
    touch "$OUT/t-rate-$tag" "$OUT/p-rate-$tag" "$OUT/t-eval-$tag" "$OUT/p-eval-$tag" \
      "$OUT/t-cpu-$tag" "$OUT/p-cpu-$tag"
    for r in $(seq "$FIRST_SEED" $((FIRST_SEED + SEEDS - 1))); do
      echo "== $spec world $w seed $r ($steps steps, ${limit} s limit per side): tandem local" >&2
      rc=0
      run_limited "$OUT/t.time" "$OUT/t.txt" "$limit" "$TANDEM" local --workers "$w" --model "$spec" \
        --dataset fortunes --batch_size "$BATCH" --optimizer adamw --lr "$LR" --schedule constant \
        --lr_scaling none --max_steps "$steps" --log_every "$LOG_EVERY" --checkpoint_every 0 \
        --seed "$r" --run_dir "$OUT/run-$((++RUNS))" || rc=$?
      [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || exit 1
      [ "$rc" -eq 0 ] && { grep '^step ' "$OUT/t.txt" | tail -1 >&2; record t "$OUT/t.txt" "$tag" "$tokens"; }
      [ "$rc" -eq 124 ] && STOPPED[$key]="${STOPPED[$key]:-}tandem@seed$r "
      # Same BLAS kernel set for PyTorch as tandem gave its workers (if any).
      CORETYPE=$(sed -n 's/^kernels: .*children run with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' "$OUT/t.txt")
      echo "== $spec world $w seed $r: PyTorch DDP (gloo)" >&2
      rc=0
      run_limited "$OUT/p.time" "$OUT/p.txt" "$limit" env ${CORETYPE:+OPENBLAS_CORETYPE=$CORETYPE} \
        OMP_NUM_THREADS=1 "$PYTHON" tools/bench/gpt_vs_pytorch.py --world "$w" --spec "$spec" \
        --batch_size "$BATCH" --lr "$LR" --max_steps "$steps" --log_every "$LOG_EVERY" \
        --seed "$r" $SAME_BATCHES || rc=$?
      [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || exit 1
      [ "$rc" -eq 0 ] && { grep '^RESULT' "$OUT/p.txt" >&2; record p "$OUT/p.txt" "$tag" "$tokens"; }
      if [ "$rc" -eq 124 ] && grep -q '^RESULT' "$OUT/p.txt"; then
        # Its numbers were printed and only the teardown (a rank left in
        # gloo's) overran: keep the rate and the loss (cpu_rate prints
        # nothing: the time file went with the stopped run).
        grep '^RESULT' "$OUT/p.txt" >&2
        record p "$OUT/p.txt" "$tag" "$tokens"
        STOPPED[$key]="${STOPPED[$key]:-}pytorch@seed$r(teardown, numbers kept) "
      elif [ "$rc" -eq 124 ]; then
        STOPPED[$key]="${STOPPED[$key]:-}pytorch@seed$r "
      fi
      grep -hE '^final .* eval loss ' "$OUT/t.txt" | sed 's/^/  tandem  /' >&2 || true
      grep -hE '^final .* eval loss ' "$OUT/p.txt" | sed 's/^/  pytorch /' >&2 || true
      if [ -n "$SAME_BATCHES" ]; then
        loss_curves "$OUT/t.txt" "$OUT/p.txt" "$spec world $w seed $r" | tee -a "$OUT/curves" >&2
        tail -1 "$OUT/curves" | sed -n 's/.*: \(within\|differs\|incomplete\).*/\1/p' >> "$OUT/pv-$tag"
      fi
      RATIOS[$key]="${RATIOS[$key]:-}$(awk -v t="$(tail -1 "$OUT/t-rate-$tag")" \
        -v p="$(tail -1 "$OUT/p-rate-$tag")" 'BEGIN { if (p > 0 && t > 0) printf "%.2f ", t / p; else printf "- " }')"
    done
  done
done

echo
echo "summary: batch $BATCH per worker, adamw lr $LR constant, $(nproc) cores, $SEEDS seed(s) per pair (rates: medians over the seeds)"
printf "%-40s %5s %12s %12s %7s %16s %16s %16s %10s %10s %10s %14s %14s %7s  %s\n" spec world \
  tandem_tok/s torch_tok/s ratio "tandem_eval" "torch_eval" "eval_diff" verdict tandem_lim \
  torch_lim tandem_cpu_tok/s torch_cpu_tok/s cpu_ratio "ratio per seed; steps, limit; stopped"
for spec in "${SPEC_LIST[@]}"; do
  # Tokens/s one thread could train at the calibrated GEMM rate.
  per_thread=$(awk -v g="$GEMM" -v f="${MFLOP[$spec]}" -v t="$(ctx_of "$spec")" \
    'BEGIN { print g / (f * 1e6 / t) }')
  for w in $WORLDS; do
    key="$spec/$w" tag="${w}-${spec//[:,=]/_}"
    limit=$(awk -v o="$per_thread" -v w="$w" -v c="$(nproc)" 'BEGIN { print o * (w < c ? w : c) }')
    tr=$(median < "$OUT/t-rate-$tag") pr=$(median < "$OUT/p-rate-$tag")
    tc=$(median < "$OUT/t-cpu-$tag") pc=$(median < "$OUT/p-cpu-$tag")
    read -r tm ts tn < <(mean_sd < "$OUT/t-eval-$tag")
    read -r pm ps pn < <(mean_sd < "$OUT/p-eval-$tag")
    # --same_batches: the pairs' own verdicts decide (the worst of them).
    pv=""
    if [ -n "$SAME_BATCHES" ]; then
      pv=$(awk '{ v[$1] = 1 } END { print ("differs" in v) ? "differs" : ("incomplete" in v) ? \
        "incomplete" : ("within" in v) ? "within" : "-" }' "$OUT/pv-$tag" 2>/dev/null || echo -)
    fi
    printf "%-40s %5s %12s %12s %7s %16s %16s %16s %10s %10s %10s %14s %14s %7s  %s\n" "$spec" "$w" \
      "$(awk -v v="$tr" 'BEGIN { if (v > 0) printf "%.0f", v; else print "-" }')" \
      "$(awk -v v="$pr" 'BEGIN { if (v > 0) printf "%.0f", v; else print "-" }')" \
      "$(awk -v t="$tr" -v p="$pr" 'BEGIN { if (t > 0 && p > 0) printf "%.2fx", t / p; else print "-" }')" \
      "$(awk -v m="$tm" -v s="$ts" -v n="$tn" 'BEGIN { if (n > 0) printf "%.3f+-%.3f", m, s; else print "-" }')" \
      "$(awk -v m="$pm" -v s="$ps" -v n="$pn" 'BEGIN { if (n > 0) printf "%.3f+-%.3f", m, s; else print "-" }')" \
      "$(awk -v a="$tm" -v sa="$ts" -v na="$tn" -v b="$pm" -v sb="$ps" -v nb="$pn" 'BEGIN {
         if (na == 0 || nb == 0) { print "-"; exit }
         printf "%+.3f+-%.3f", a - b, 2 * sqrt(sa * sa / na + sb * sb / nb) }')" \
      "$(awk -v a="$tm" -v sa="$ts" -v na="$tn" -v b="$pm" -v sb="$ps" -v nb="$pn" -v pv="$pv" 'BEGIN {
         if (pv != "") { print pv; exit }
         if (na == 0 || nb == 0) { print "-"; exit }
         d = a - b; if (d < 0) d = -d
         if (na < 2 || nb < 2) { print "more_seeds"; exit }  # no spread from one seed
         e = 2 * sqrt(sa * sa / na + sb * sb / nb)
         print (d + e <= 0.05 ? "within" : (d - e > 0.05 ? "differs" : "more_seeds")) }')" \
      "$(awk -v r="$tr" -v l="$limit" 'BEGIN { if (r > 0) printf "%.0f%%", 100 * r / l; else print "-" }')" \
      "$(awk -v r="$pr" -v l="$limit" 'BEGIN { if (r > 0) printf "%.0f%%", 100 * r / l; else print "-" }')" \
      "$(awk -v v="$tc" 'BEGIN { if (v > 0) printf "%.0f", v; else print "-" }')" \
      "$(awk -v v="$pc" 'BEGIN { if (v > 0) printf "%.0f", v; else print "-" }')" \
      "$(awk -v t="$tc" -v p="$pc" 'BEGIN { if (t > 0 && p > 0) printf "%.2fx", t / p; else print "-" }')" \
      "${RATIOS[$key]:-}; ${LIMITS[$key]}${STOPPED[$key]:+; stopped: ${STOPPED[$key]}}"
  done
done
echo "tandem_lim / torch_lim: tokens/s as a share of min(world, cores) x the calibrated GEMM rate over the model's training FLOP per token"
echo "cpu_tok/s: tokens trained per CPU-second of the whole run (start-up and the final evaluation included on both sides)"
[ -z "$SAME_BATCHES" ] || { echo "same batches and initial weights on both sides:"; grep '^loss verdict' "$OUT/curves" || true; }
echo "*_eval: mean +- sd over the seeds of the held-out loss (the same windows, the last 5% of the text) after the same steps;"
echo "  eval_diff = tandem - torch +- 2 sigma; verdict: within (|diff| + 2 sigma <= 0.05), differs (|diff| - 2 sigma > 0.05), more_seeds (neither, or one seed)"
[ -z "$SAME_BATCHES" ] || echo "  (--same_batches: verdict is the worst of the pairs' loss verdict lines above, each seed paired step by step)"
