#!/usr/bin/env bash
# tandem quickstart: installs what is missing, builds the tandem CLI and the
# services it starts, and trains the issue's MLP on Fashion-MNIST on a local
# cluster (a coordinator, a data server and 4 worker processes; gradients go
# through shared memory when every worker is on this machine, else Gloo):
#
#   tools/quickstart.sh                     # 4 workers, 2 epochs, sgd
#   tools/quickstart.sh --workers 2 --optimizer adamw --lr 0.001   # any tandem local flag
#
# Ctrl-C stops every process it started. Env: BAZEL (default bazel),
# BAZEL_STARTUP (e.g. --output_base=...).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --check >/dev/null 2>&1 || tools/setup.sh
BAZEL=${BAZEL:-bazel}
# .bazelrc builds with -O2 already; the default config shares the test cache.
${BAZEL} ${BAZEL_STARTUP:-} build //tools/tandem 2>&1 | grep -v linux-sandbox | tail -3
BIN="$(${BAZEL} ${BAZEL_STARTUP:-} info bazel-bin 2>/dev/null)/tools/tandem/tandem"
exec "$BIN" local --workers 4 --model mlp:784,1024,1024,10 --dataset fashion-mnist \
  --epochs 2 --batch-size 64 --lr 0.05 --optimizer sgd "$@"
