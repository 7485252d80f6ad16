#!/usr/bin/env bash
# Side by side, in one run (issue 29): `tandem local --model torchscript:`
# and PyTorch DDP (gloo, one process per rank, torch.set_num_threads(1))
# training the same scripted modules with the same data, per-worker batch,
# optimizer (AdamW), lr rule (none, cosine) and epochs, at world sizes 2 and
# 4:
#  - cnn: examples/cnn_fashion_mnist.py (Conv2d, BatchNorm, max-pool) on
#    Fashion-MNIST: samples/s and test accuracy;
#  - lm: examples/transformer_lm.py (pre-LN transformer, 64-token context)
#    on the byte-level fortunes text, cut the same way on both sides:
#    tokens/s and held-out next-token accuracy.
# Rates are the median of the progress windows after the first. The DDP
# side is tools/bench/ddp_vs_pytorch.py.
#
#   tools/bench/torchscript_vs_pytorch.sh [--models "cnn lm"] [--epochs 1] [--worlds "2 4"]
#       [--batch_size 32] [--lr 0.002] [--lm_lr 0.003]
# Env: BAZEL (default bazel), PYTHON (default /usr/bin/python3, Debian's
#      python3-torch, the PyTorch of the libtorch tandem links).
set -euo pipefail
cd "$(dirname "$0")/../.."
BAZEL=${BAZEL:-bazel}
PYTHON=${PYTHON:-/usr/bin/python3}
MODELS="cnn lm" EPOCHS=1 WORLDS="2 4" BATCH=32 LR=0.002 LM_LR=0.003 LOG_EVERY=50
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS=$2 ;;
    --worlds) WORLDS=$2 ;;
    --batch_size) BATCH=$2 ;;
    --lr) LR=$2 ;;
    --lm_lr) LM_LR=$2 ;;
    --models) MODELS=$2 ;;
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
"$PYTHON" examples/transformer_lm.py --out "$OUT/lm.pt" --seed 1 --context 64

# median_rate FILE UNIT: the median UNIT (samples/s, tokens/s) of FILE's
# progress lines after the first.
median_rate() {
  grep '^step ' "$1" | sed -n "s|.* $2 \([0-9.]*\).*|\1|p" | tail -n +2 | sort -n |
    awk '{v[NR] = $1} END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

declare -A T_RATE T_ACC P_RATE P_ACC
for m in $MODELS; do
  case "$m" in
    cnn) DATASET=fashion-mnist UNIT=samples/s M_LR=$LR
         T_ACC_RE='s/^epoch [0-9]* test accuracy \([0-9.]*\).*/\1/p' ;;
    lm) DATASET=fortunes UNIT=tokens/s M_LR=$LM_LR
        T_ACC_RE='s/^epoch [0-9]* eval loss [0-9.]* token accuracy \([0-9.]*\).*/\1/p' ;;
    *) echo "torchscript_vs_pytorch.sh: unknown model $m (cnn, lm)" >&2; exit 2 ;;
  esac
  SPEC="torchscript:$OUT/$m.pt"
  for w in $WORLDS; do
    k="$m-$w"
    echo "== $m world $w: tandem local" >&2
    "$TANDEM" local --workers "$w" --model "$SPEC" --dataset "$DATASET" --epochs "$EPOCHS" \
      --batch-size "$BATCH" --lr "$M_LR" --optimizer adamw --lr-scaling none \
      --log-every "$LOG_EVERY" --checkpoint-every 0 --run-dir "$OUT/run-$k" |
      tee "$OUT/tandem-$k.txt" | grep -E '^epoch' >&2 || true
    CORETYPE=$(sed -n 's/^kernels: .*children run with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p' "$OUT/tandem-$k.txt")
    T_RATE[$k]=$(median_rate "$OUT/tandem-$k.txt" "$UNIT")
    T_ACC[$k]=$(sed -n "$T_ACC_RE" "$OUT/tandem-$k.txt" | tail -1)
    echo "== $m world $w: PyTorch DDP (gloo)" >&2
    env ${CORETYPE:+OPENBLAS_CORETYPE=$CORETYPE} OMP_NUM_THREADS=1 "$PYTHON" tools/bench/ddp_vs_pytorch.py \
      --world "$w" --spec "$SPEC" --dataset "$DATASET" --context 64 --epochs "$EPOCHS" \
      --batch_size "$BATCH" --lr "$M_LR" --optimizer adamw --lr_scaling none \
      --log_every "$LOG_EVERY" |
      tee "$OUT/pytorch-$k.txt" | grep RESULT >&2
    P_RATE[$k]=$(median_rate "$OUT/pytorch-$k.txt" "$UNIT")
    P_ACC[$k]=$(sed -n 's/^RESULT .* accuracy=\([0-9.]*\).*/\1/p' "$OUT/pytorch-$k.txt")
  done
done

echo
echo "summary: batch $BATCH per worker, adamw (no scaling, cosine), $EPOCHS epoch(s), $(nproc) cores;"
echo "  cnn: examples/cnn_fashion_mnist.py on fashion-mnist, lr $LR, samples/s, test accuracy"
echo "  lm:  examples/transformer_lm.py on fortunes (64 tokens), lr $LM_LR, tokens/s, held-out token accuracy"
printf "%-5s %-6s %14s %14s %7s %10s %10s\n" model world tandem_rate torch_rate ratio tandem_acc torch_acc
for m in $MODELS; do
  for w in $WORLDS; do
    k="$m-$w"
    ratio=$(awk -v t="${T_RATE[$k]}" -v p="${P_RATE[$k]}" 'BEGIN { printf "%.2f", (p > 0 ? t / p : 0) }')
    printf "%-5s %-6s %14.0f %14.0f %6sx %10s %10s\n" "$m" "$w" "${T_RATE[$k]}" "${P_RATE[$k]}" \
      "$ratio" "${T_ACC[$k]:-n/a}" "${P_ACC[$k]:-n/a}"
  done
done
