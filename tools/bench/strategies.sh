#!/usr/bin/env bash
# Every registered sync strategy x link rate x node layout, side by side in
# one run, on simulated nodes (`tandem local --nodes`, needs root): for a
# fixed model and STEPS steps, the step time, samples/s, the bytes that
# crossed node links per step (tc class counters, not estimates) and the
# test accuracy after EPOCHS epochs, each also as a ratio to plain ring
# allreduce. allreduce runs as hier=0 and hier=1 once `tandem local --help`
# lists the hier key; a strategy that fails is reported and the rest go on.
# `compressed` runs as its codecs: "compressed int8+EF" (also hier=1),
# "compressed topk" and "compressed threshold" with their accurate defaults,
# "compressed topk plain-EF" (no warm-up, no momentum correction) and
# "compressed powersgd r4"; allreduce also as "allreduce wire=fp16" (fp16
# buckets, fp32 sums: the fair baseline). Every row has its step-time ratio
# to the fp32 ring and to the fp16 ring, and the codecs' speed-up and
# accuracy checks against both are printed after the table (issue 33:
#   sudo tools/bench/strategies.sh --layouts 2x2 --rates 100mbit --epochs 1 \
#     --only "allreduce hier=0,allreduce wire=fp16,compressed topk,compressed threshold,compressed powersgd r4"); `hybrid` runs as
# "hybrid" (fp32 pushes), "hybrid replicate=0" (no shard-server replicas),
# "hybrid ring_share=auto" (a share of the vector by a cross-node ring, the
# rest through the servers) and "hybrid int8+EF" (compress=int8), with its
# speed-up against the flat and hierarchical rings printed (issue 12:
#   sudo tools/bench/strategies.sh --layouts 2x2 --rates 1gbit --no-accuracy \
#     --only "allreduce hier=0,allreduce hier=1,hybrid,hybrid int8+EF").
# Issue 13's run:
#   sudo tools/bench/strategies.sh --layouts 2x2 --rates 1gbit,100mbit --epochs 2 \
#     --only "allreduce hier=0,compressed int8+EF,compressed topk plain-EF,allreduce wire=fp16"
# Writes OUT/strategies.json and OUT/strategies.png (python3-matplotlib).
#
#   bazel build -c opt //tools/tandem
#   sudo tools/bench/strategies.sh [--out DIR] [--steps 50] [--model mlp:784,256,10] [--dataset fortunes]
#        [--batch 32] [--epochs 1] [--rates 10gbit,1gbit,100mbit]
#        [--layouts 1x4,2x2,4x1] [--only "allreduce hier=0,allreduce hier=1"]
#        [--no-accuracy] [--repeat 3] [--servers nodes,2] [--before DIR/tandem]
#        [--before_syncs ps,hybrid]
# --repeat R runs every configuration R times, round-robin, and reports the
# median run (each run's step ms is in strategies.json). --servers: ps and
# hybrid with one shard server per node ('nodes', the default) and/or a
# fixed count N (labelled '<variant> sN').
# --before PATH: ps and hybrid (or the strategies --before_syncs names,
# e.g. allreduce,zero2,zero3) also run with another tandem binary (its
# coordinator, worker, shardserver, dataserver and libtandem_bind_source.so
# copied beside it), labelled '<variant> before', in the same rounds: a
# before/after comparison under the same load. ps / hybrid rows print their
# speed-up against the flat ring (issue 33: >= 0.85x with fewer servers than
# nodes, >= 1.3x with as many) and how busy the server and worker links were
# while stepping: bytes sent (tc class counters) / (rate x steps x step ms).
# Issue 33's run:
#   sudo tools/bench/strategies.sh --layouts 2x2,4x1 --rates 1gbit,100mbit --no-accuracy \
#     --servers nodes --repeat 3 --before /tmp/hyb_before --model mlp:784,1024,1024,10 \
#     --only "allreduce hier=0,hybrid"
# and with fewer servers than nodes (ring_share):
#   sudo tools/bench/strategies.sh --layouts 4x1 --rates 100mbit --no-accuracy --steps 30 \
#     --servers nodes,2,1 --repeat 3 --model mlp:784,1024,1024,10 \
#     --only "allreduce hier=0,hybrid,hybrid ring_share=auto"
# TANDEM=path overrides the binary (default bazel-bin/tools/tandem/tandem,
# resolved once at the start: a later build of another configuration, which
# repoints bazel-bin, does not change the binaries of a run in progress);
# PYTHON the interpreter (default Debian's /usr/bin/python3, which has
# python3-matplotlib; another python3 on PATH may not).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TANDEM=${TANDEM:-bazel-bin/tools/tandem/tandem}
if [ ! -x "$TANDEM" ]; then
  echo "strategies.sh: no tandem binary at $TANDEM; run 'bazel build -c opt //tools/tandem' or set TANDEM" >&2
  exit 1
fi
TANDEM="$(readlink -f "$TANDEM")"
out=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#--out=}"; shift ;;
    -h|--help) awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$out" ] || out="$(mktemp -d /tmp/tandem-strategies-XXXXXX)"
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" "$here/strategies.py" --tandem "$TANDEM" --out "$out" "${args[@]}"
