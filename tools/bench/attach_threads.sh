#!/usr/bin/env bash
# Side by side: what N open Coordinator.Attach calls cost two coordinator
# builds (threads, idle CPU ms per wall second), rounds interleaved A, B.
#
#   tools/bench/attach_threads.sh A_COORDINATOR B_COORDINATOR [CALLS] [ROUNDS] [SECONDS]
#
# Each A_/B_COORDINATOR is an executable that runs a coordinator with the
# flags it is given (a built `services/coordinator/coordinator`, or a
# wrapper that execs one with its LD_LIBRARY_PATH). Needs
# `bazel build //tools/bench:attach_load`.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 A_COORDINATOR B_COORDINATOR [CALLS=256] [ROUNDS=3] [SECONDS=10]" >&2
  exit 2
fi
A=$1 B=$2 CALLS=${3:-256} ROUNDS=${4:-3} SECONDS_EACH=${5:-10}
LOAD=$(dirname "$0")/../../bazel-bin/tools/bench/attach_load
[[ -x $LOAD ]] || { echo "$LOAD missing: bazel build //tools/bench:attach_load" >&2; exit 2; }

one() {  # label binary
  local dir pid port
  dir=$(mktemp -d)
  "$2" --job_id=bench --port_file="$dir/port" --min_workers=1 --max_workers=1 \
    >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do [[ -s $dir/port ]] && break; sleep 0.05; done
  port=$(cat "$dir/port" 2>/dev/null || true)
  if [[ -z $port ]]; then
    echo "$1: the coordinator did not start (log: $dir/log)" >&2
    kill "$pid" 2>/dev/null || true
    return 1
  fi
  echo "$1 $("$LOAD" --coordinator="127.0.0.1:$port" --pid="$pid" --job_id=bench \
    --calls="$CALLS" --seconds="$SECONDS_EACH")"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  one A "$A"
  one B "$B"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
