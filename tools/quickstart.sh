#!/usr/bin/env bash
# tandem quickstart: installs what is missing, builds everything, and starts a
# coordinator on a free port, prints its job status, then stops it.
# (Replaced by `tandem local` once the training job lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --check >/dev/null 2>&1 || tools/setup.sh
bazel build //... 2>&1 | grep -v linux-sandbox | tail -3
run=$(mktemp -d /tmp/tandem-quickstart.XXXXXX)
bazel-bin/services/coordinator/coordinator --port_file="$run/port" --metrics_port=0 \
  --state_dir="$run/state" 2>"$run/coordinator.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$run/port" ] && break; sleep 0.1; done
[ -s "$run/port" ] || { echo "quickstart: coordinator did not start; see $run/coordinator.log" >&2; exit 1; }
echo "coordinator listening on 127.0.0.1:$(cat "$run/port")"
cat "$run/coordinator.log"
