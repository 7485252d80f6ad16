#!/usr/bin/env bash
# --precision fp32 vs bf16 vs fp16, side by side in one run: the same job
# (tandem local, same seed, model, batch and epochs) in each mode, with the
# test accuracy after the last epoch, its difference from fp32 (issue 16's
# target: within 0.5 points), the steps skipped for non-finite gradients,
# the final loss scale (fp16) and the median training samples/s. On the CPU
# backend every mode computes in fp32: bf16 and fp16 round the gradients
# (fp16 also scales the loss and skips overflowed steps), so this measures
# what low-precision gradients and loss scaling do to accuracy, not the
# speed of 16-bit math. A mode "fp32-nocheck" (or bf16-nocheck) runs with
# --check_nonfinite=false: the check's cost, side by side.
#
#   bazel build -c opt //tools/tandem
#   tools/bench/precision.sh [--workers 2] [--epochs 2] [--model mlp:784,256,10]
#        [--batch 64] [--modes "fp32 bf16 fp16"]
# TANDEM=path overrides the binary (default bazel-bin/tools/tandem/tandem).
set -euo pipefail
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
workers=2 epochs=2 model=mlp:784,256,10 batch=64 modes="fp32 bf16 fp16"
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "precision.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$TANDEM" ]; then
  echo "precision.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
tmp=$(mktemp -d /tmp/tandem-precision.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
printf '%-6s %10s %9s %8s %11s %10s\n' mode accuracy "vs fp32" skipped "loss scale" samples/s
base=""
for m in $modes; do
  i=$((${i:-0} + 1))
  run="$tmp/$i-$m"
  p=${m%-nocheck}
  check=true
  [ "$p" != "$m" ] && check=false
  if ! "$TANDEM" local --workers="$workers" --model="$model" --epochs="$epochs" --batch-size="$batch" \
      --log-every=20 --run-dir="$run" --precision="$p" \
      --worker_arg=--check_nonfinite="$check" > "$tmp/$i-$m.out" 2>&1; then
    echo "$m: tandem local failed; last lines:" >&2
    tail -5 "$tmp/$i-$m.out" >&2
    continue
  fi
  acc=$(grep -o 'test accuracy [0-9.]*' "$tmp/$i-$m.out" | tail -1 | awk '{print $3}')
  skipped=$(grep -c ' skipped: ' "$tmp/$i-$m.out" || true)
  scale=$(awk '/^tandem_loss_scale/ {print $NF}' "$run/metrics/worker-0.prom" 2>/dev/null | head -1)
  rate=$(grep -o 'samples/s [0-9.]*' "$tmp/$i-$m.out" | awk '{print $2}' | sort -n |
         awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "?"}')
  [ -z "$base" ] && [ "$m" = fp32 ] && base="$acc"
  [ -z "$acc" ] && acc="?"
  diff="-"
  [ -n "$base" ] && diff=$(awk -v a="$acc" -v b="$base" 'BEGIN {printf "%+.2f pt", 100 * (a - b)}')
  printf '%-6s %10s %9s %8s %11s %10s\n' "$m" "$acc" "$diff" "$skipped" "${scale:-?}" "$rate"
done
