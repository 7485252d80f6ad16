#!/usr/bin/env bash
# Side-by-side, in one run: tandem's CPU MLP training step vs PyTorch's on the
# same model and batch sizes, both on one thread, then tandem's sgemm table.
#   tools/bench/mlp_vs_pytorch.sh [extra mlp_step_bench flags]
# Env: BAZEL (default bazel), BAZEL_STARTUP (e.g. --output_base=...),
#      PYTHON (default /usr/bin/python3, which has Debian's python3-torch).
set -euo pipefail
cd "$(dirname "$0")/../.."
BAZEL=${BAZEL:-bazel}
PYTHON=${PYTHON:-/usr/bin/python3}
# --symlink_prefix=/ : no bazel-* links in the tree.
${BAZEL} ${BAZEL_STARTUP:-} build -c opt --symlink_prefix=/ //tools/bench:mlp_step_bench >&2
BIN="$(${BAZEL} ${BAZEL_STARTUP:-} info -c opt bazel-bin 2>/dev/null)/tools/bench/mlp_step_bench"
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
# Interleave the two so drift in machine load hits both alike.
for round in 1 2; do
  "$BIN" "$@" | tee -a "$OUT" | grep RESULT
  OMP_NUM_THREADS=1 "$PYTHON" tools/bench/mlp_vs_pytorch.py "$@" | tee -a "$OUT"
done
"$BIN" "$@" --repeats=1 --steps=1 | grep GEMM
echo
echo "summary (best round of each, samples/s):"
awk '/^RESULT/ {
  split($4, b, "="); split($6, s, "=");
  key = b[2]; v = s[2] + 0;
  if ($2 == "tandem" && v > t[key]) t[key] = v;
  if ($2 == "pytorch" && v > p[key]) p[key] = v;
}
END { for (k in t) printf "  batch %-4s tandem %9.1f  pytorch %9.1f  ratio %.2fx\n", k, t[k], p[k], (p[k] > 0 ? t[k] / p[k] : 0) }' "$OUT"
