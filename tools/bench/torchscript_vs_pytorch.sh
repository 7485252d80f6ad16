#!/usr/bin/env bash
# Side by side, in one run (issue 29): `tandem local --model torchscript:`
# and PyTorch DDP (gloo, one process per rank, torch.set_num_threads(1))
# training the same scripted module (examples/cnn_fashion_mnist.py: Conv2d,
# BatchNorm, max-pool) on Fashion-MNIST, same per-worker batch, optimizer,
# lr rule (none) and epochs, at world sizes 2 and 4. Prints samples/s
# (median of the progress windows after the first) and test accuracy of
# each, and their ratio. The DDP side is tools/bench/ddp_vs_pytorch.py.
#
#   tools/bench/torchscript_vs_pytorch.sh [--epochs 1] [--worlds "2 4"] [--batch_size 32]
# Env: BAZEL (default bazel), PYTHON (default /usr/bin/python3, Debian's
#      python3-torch, the PyTorch of the libtorch tandem links).
set -euo pipefail
cd "$(dirname "$0")/../.."
BAZEL=${BAZEL:-bazel}
PYTHON=${PYTHON:-/usr/bin/python3}
EPOCHS=1 WORLDS="2 4" BATCH=32 LR=0.002 LOG_EVERY=50
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS=$2 ;;
    --worlds) WORLDS=$2 ;;
    --batch_size) BATCH=$2 ;;
    --lr) LR=$2 ;;
    *) echo "torchscript_vs_pytorch.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
"$PYTHON" -c "import torch" 2>/dev/null || {
  echo "torchscript_vs_pytorch.sh: $PYTHON has no torch; run tools/setup.sh" >&2; exit 1; }
${BAZEL} build --jobs=2 //tools/tandem >&2
TANDEM="$(${BAZEL} info bazel-bin 2>/dev/null)/tools/tandem/tandem"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$PYTHON" examples/cnn_fashion_mnist.py --out "$OUT/cnn.pt" --seed 1
SPEC="torchscript:$OUT/cnn.pt"

median_rate() {
  grep '^step ' "$1" | sed -n 's/.* samples\/s \([0-9.]*\).*/\1/p' | tail -n +2 | sort -n |
    awk '{v[NR] = $1} END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

declare -A T_RATE T_ACC P_RATE P_ACC
for w in $WORLDS; do
  echo "== world $w: tandem local" >&2
  "$TANDEM" local --workers "$w" --model "$SPEC" --dataset fashion-mnist --epochs "$EPOCHS" \
    --batch-size "$BATCH" --lr "$LR" --optimizer adamw --lr-scaling none \
    --log-every "$LOG_EVERY" --checkpoint-every 0 --run-dir "$OUT/run-$w" |
    tee "$OUT/tandem-$w.txt" | grep -E '^epoch' >&2 || true
  CORETYPE=$(sed -n 's/^kernels: .*children run with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' "$OUT/tandem-$w.txt")
  T_RATE[$w]=$(median_rate "$OUT/tandem-$w.txt")
  T_ACC[$w]=$(sed -n 's/^epoch [0-9]* test accuracy \([0-9.]*\).*/\1/p' "$OUT/tandem-$w.txt" | tail -1)
  echo "== world $w: PyTorch DDP (gloo)" >&2
  env ${CORETYPE:+OPENBLAS_CORETYPE=$CORETYPE} OMP_NUM_THREADS=1 "$PYTHON" tools/bench/ddp_vs_pytorch.py \
    --world "$w" --spec "$SPEC" --epochs "$EPOCHS" --batch_size "$BATCH" --lr "$LR" \
    --optimizer adamw --lr_scaling none --log_every "$LOG_EVERY" |
    tee "$OUT/pytorch-$w.txt" | grep RESULT >&2
  P_RATE[$w]=$(median_rate "$OUT/pytorch-$w.txt")
  P_ACC[$w]=$(sed -n 's/^RESULT .* accuracy=\([0-9.]*\).*/\1/p' "$OUT/pytorch-$w.txt")
done

echo
echo "summary: examples/cnn_fashion_mnist.py, batch $BATCH per worker, adamw lr $LR (no scaling, cosine), $EPOCHS epoch(s), $(nproc) cores"
printf "%-6s %14s %14s %7s %10s %10s\n" world tandem_samp/s torch_samp/s ratio tandem_acc torch_acc
for w in $WORLDS; do
  ratio=$(awk -v t="${T_RATE[$w]}" -v p="${P_RATE[$w]}" 'BEGIN { printf "%.2f", (p > 0 ? t / p : 0) }')
  printf "%-6s %14.0f %14.0f %6sx %10s %10s\n" "$w" "${T_RATE[$w]}" "${P_RATE[$w]}" "$ratio" \
    "${T_ACC[$w]:-n/a}" "${P_ACC[$w]:-n/a}"
done
