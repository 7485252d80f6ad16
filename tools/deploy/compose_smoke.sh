#!/usr/bin/env bash
# The compose cluster really trains, here: builds the real images with
# podman on a Debian base made from packages (no image registry needed),
# runs deploy/compose with the loopback override (host networking, every
# service on 127.0.0.x), and checks that
#   - 2 workers train Fashion-MNIST to the end (both exit 0, rank 0 prints
#     the test accuracy),
#   - Prometheus reports every scrape target up while they train,
#   - every metric the dashboard and the alert rules use has series in
#     Prometheus (the e2e side of //deploy:promql_test).
#
#   tools/deploy/compose_smoke.sh [--binaries=prebuilt|bazel] [--keep]
#
# --binaries=bazel (default): the Dockerfile's own builder stage runs
#   `bazel build -c opt` with this machine's Bazel disk cache mounted
#   (podman build -v ~/.cache/tandem-bazel-disk:/root/.cache/tandem-bazel-disk),
#   so actions already built here (TANDEM_NO_CUDA=1 -c opt) are reused:
#   measured 103 of 103 actions from the cache, 26 s. The builder's apt layer
#   (the -dev packages and Bazel's JDK, ~4 min) is built once and cached by
#   podman. --binaries=prebuilt: the image takes CPU binaries built on this
#   machine (TANDEM_NO_CUDA=1 bazel build -c opt in its own output base under
#   the cache folder) through the Dockerfile's BINARIES=prebuilt argument.
# --keep: leave the cluster and podman's API socket running (stop them with
#   DOCKER_HOST=unix://$TANDEM_DEPLOY_CACHE/podman.sock docker-compose -p tandem-smoke
#   -f docker-compose.yml -f docker-compose.loopback.yml down -v, then kill the
#   `podman system service`).
#
# Needs root, podman, runc, debootstrap and docker-compose (tools/setup.sh
# --deploy installs them; docker-compose drives podman through its Docker
# API socket). Exits 77 with "SKIP: reason" where containers
# cannot run; 0 when every check passed; 1 naming the check that failed.
# The debootstrapped base image is made once and kept (podman image
# localhost/tandem-base:bookworm; TANDEM_DEPLOY_CACHE, default
# /var/tmp/tandem-deploy, holds the rest).
set -uo pipefail
# debootstrap and runc live in /usr/sbin, which Bazel's test PATH leaves out.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${TANDEM_DEPLOY_CACHE:-/var/tmp/tandem-deploy}
PROJECT=tandem-smoke
TAG=smoke
BASE_IMAGE=localhost/tandem-base:bookworm
PROM=http://127.0.0.1:19090
binaries=bazel
keep=0
for a in "$@"; do
  case "$a" in
    --binaries=prebuilt|--binaries=bazel) binaries=${a#--binaries=} ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "compose_smoke: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done

start=$(date +%s)
log() { echo "compose_smoke: [$(($(date +%s) - start))s] $*"; }
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "compose_smoke: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (podman with runc and host networking)"
for t in podman debootstrap docker-compose; do
  command -v "$t" >/dev/null || skip "$t is not installed (tools/setup.sh --deploy installs it)"
done
[ -x /usr/sbin/runc ] || skip "runc is not installed (tools/setup.sh --deploy installs it)"
[ -d /usr/share/datasets/fashion-mnist ] || skip "Fashion-MNIST missing (tools/setup.sh installs it)"

mkdir -p "$CACHE"
# crun fails on this kind of machine (rlimits, hybrid cgroups): runc, the
# cgroupfs manager and no default ulimits (checked in BUILDING.md).
export CONTAINERS_CONF=$CACHE/containers.conf
cat > "$CONTAINERS_CONF" <<'EOF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
EOF

# --- 1. a base image from Debian's packages --------------------------------
if ! podman image exists "$BASE_IMAGE"; then
  log "debootstrap --variant=minbase bookworm (once; about a minute)"
  rm -rf "$CACHE/rootfs"
  debootstrap --variant=minbase bookworm "$CACHE/rootfs" http://deb.debian.org/debian \
    > "$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed; see $CACHE/debootstrap.log"
  tar -C "$CACHE/rootfs" -c . | podman import - "$BASE_IMAGE" >/dev/null ||
    die "podman import of the rootfs failed"
  rm -rf "$CACHE/rootfs"
fi
if ! out=$(podman run --rm --network host "$BASE_IMAGE" true 2>&1); then
  skip "podman cannot run a container here: $out"
fi

# --- 2. the images ----------------------------------------------------------
build_args=(--network host --format docker --ignorefile deploy/docker/Dockerfile.dockerignore
            --build-arg "BASE=$BASE_IMAGE" --build-arg "BINARIES=$binaries")
cd "$ROOT"
if [ "$binaries" = prebuilt ]; then
  # TANDEM_BAZEL_OUTPUT_BASE: where to build (default: one under the cache
  # folder, shut down afterwards). TANDEM_NO_CUDA changes every action key, so
  # a separate output base keeps the usual one warm.
  ob=${TANDEM_BAZEL_OUTPUT_BASE:-$CACHE/bazel-nocuda}
  log "bazel build -c opt (TANDEM_NO_CUDA=1) of the binaries"
  TANDEM_NO_CUDA=1 bazel --output_base="$ob" build -c opt --jobs=2 \
    //services/coordinator //services/dataserver //services/worker //tools/tandem \
    > "$CACHE/bazel.log" 2>&1 || die "bazel build failed; see $CACHE/bazel.log"
  out_dir=$(TANDEM_NO_CUDA=1 bazel --output_base="$ob" info -c opt bazel-bin 2>/dev/null)
  [ -n "${TANDEM_BAZEL_OUTPUT_BASE:-}" ] || bazel --output_base="$ob" shutdown >/dev/null 2>&1
  find deploy/docker/prebuilt -mindepth 1 ! -name README.md -delete
  for b in services/coordinator/coordinator services/dataserver/dataserver \
           services/worker/worker tools/tandem/tandem; do
    install -m 0755 "$out_dir/$b" deploy/docker/prebuilt/ || die "no $out_dir/$b"
  done
else
  mkdir -p "$HOME/.cache/tandem-bazel-disk"
  build_args+=(-v "$HOME/.cache/tandem-bazel-disk:/root/.cache/tandem-bazel-disk")
fi
for target in coordinator dataserver worker; do
  log "podman build --target $target (BINARIES=$binaries)"
  podman build "${build_args[@]}" -f deploy/docker/Dockerfile --target "$target" \
    -t "tandem-$target:$TAG" . > "$CACHE/build-$target.log" 2>&1 ||
    die "podman build --target $target failed; see $CACHE/build-$target.log"
done
log "podman build deploy/docker/Dockerfile.prometheus"
podman build --network host --format docker --ignorefile deploy/docker/Dockerfile.prometheus.dockerignore \
  --build-arg "BASE=$BASE_IMAGE" -f deploy/docker/Dockerfile.prometheus \
  -t "tandem-prometheus:$TAG" . > "$CACHE/build-prometheus.log" 2>&1 ||
  die "podman build of Prometheus failed; see $CACHE/build-prometheus.log"

# --- 3. the cluster ---------------------------------------------------------
# docker-compose (Debian's 1.29) drives podman through podman's Docker API
# socket: podman-compose 1.0.3 adds --net to every container, which podman
# refuses together with network_mode: host.
sock=$CACHE/podman.sock
rm -f "$sock"
podman system service --time=0 "unix://$sock" > "$CACHE/podman-service.log" 2>&1 &
service_pid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || die "podman system service did not open $sock; see $CACHE/podman-service.log"
cd "$ROOT/deploy/compose"
export DOCKER_HOST=unix://$sock TANDEM_TAG=$TAG DATA_DIR=/usr/share/datasets
# Two epochs of a wider MLP than .env's: long enough (~20 s) for Prometheus
# to scrape the workers several times while they train.
export EPOCHS=${SMOKE_EPOCHS:-2} MODEL=${SMOKE_MODEL:-mlp:784,512,256,10}
compose=(docker-compose -p "$PROJECT" -f docker-compose.yml -f docker-compose.loopback.yml)
cleanup() {
  if [ $keep -eq 0 ]; then
    "${compose[@]}" down -v >"$CACHE/down.log" 2>&1
    kill "$service_pid" 2>/dev/null
  fi
}
"${compose[@]}" down -v >"$CACHE/down.log" 2>&1
trap cleanup EXIT
# Grafana's image comes from a registry; it is not started here.
log "docker-compose up: prometheus, coordinator, dataserver (host network, loopback)"
"${compose[@]}" up -d --no-build prometheus coordinator dataserver > "$CACHE/up.log" 2>&1 ||
  die "docker-compose up failed; see $CACHE/up.log"

state() { podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$1" 2>/dev/null; }
w0=${PROJECT}_worker_1
w1=${PROJECT}_worker-1_1
query() {  # query PROMQL -> number of series in the instant result
  python3 - "$PROM" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
try:
    r = json.load(urllib.request.urlopen(url, timeout=5))
    print(len(r["data"]["result"]))
except Exception:
    print(-1)
PY
}
targets_up() {  # prints "UP/TOTAL" of Prometheus's active targets
  python3 - "$PROM" <<'PY'
import json, sys, urllib.request
try:
    t = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/targets", timeout=5))["data"]["activeTargets"]
    print(f"{sum(x['health'] == 'up' for x in t)}/{len(t)}")
except Exception:
    print("0/0")
PY
}
# The services first (3 of 5 targets: the workers are not started yet).
deadline=$(($(date +%s) + 120))
until [ "$(targets_up)" = "3/5" ]; do
  [ "$(date +%s)" -lt "$deadline" ] ||
    die "Prometheus, the coordinator and the data server never all came up ($(targets_up)); see podman logs ${PROJECT}_coordinator_1"
  sleep 1
done
# The images' healthcheck (podman here cannot schedule it: no systemd), run
# by hand: it must pass on the metrics port and fail on a port nobody serves.
for svc in coordinator:19100 dataserver:19200; do
  c=${PROJECT}_${svc%%:*}_1
  podman exec "$c" tandem-healthcheck "${svc##*:}" >/dev/null 2>&1 ||
    die "tandem-healthcheck ${svc##*:} fails in $c"
  if podman exec "$c" tandem-healthcheck 19999 >/dev/null 2>&1; then
    die "tandem-healthcheck passes on a port nothing serves (in $c)"
  fi
done
log "Prometheus scrapes the coordinator and the data server (healthchecks pass); starting 2 workers"
"${compose[@]}" up -d --no-build worker worker-1 >> "$CACHE/up.log" 2>&1 ||
  die "docker-compose up of the workers failed; see $CACHE/up.log"

# Every target up while the workers train (5: coordinator, data server, two
# workers, Prometheus itself), and a step recorded.
all_up=""
deadline=$(($(date +%s) + 300))
while [ "$(date +%s)" -lt "$deadline" ]; do
  s0=$(state "$w0"); s1=$(state "$w1")
  case "$s0 $s1" in *exited*) break ;; esac
  up=$(targets_up)
  if [ "$up" = "5/5" ] && [ "$(query 'tandem_samples_total > 0')" -ge 2 ]; then
    all_up=$up
    break
  fi
  sleep 1
done
[ -n "$all_up" ] || {
  podman logs "$w0" 2>&1 | tail -20 >&2
  die "Prometheus never had every target up while the workers trained (last: $(targets_up); workers: $(state "$w0") / $(state "$w1"))"
}
log "Prometheus: $all_up targets up, both workers stepping"

# Every metric the dashboard and the rules use has series (over a range:
# a worker that already finished left its samples, then staleness markers).
metrics=$(python3 "$ROOT/deploy/tests/promql_check.py" --promtool=/usr/bin/promtool --list-metrics \
            --dashboard="$ROOT/deploy/grafana/tandem.json" \
            --rules="$ROOT/deploy/prometheus/rules/tandem.rules.yml") || die "promql_check --list-metrics"
read -r -a missing < <(python3 - "$PROM" $metrics <<'PY'
import json, sys, urllib.parse, urllib.request
prom, names = sys.argv[1], sys.argv[2:]
def count(q):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        return len(json.load(urllib.request.urlopen(url, timeout=10))["data"]["result"])
    except Exception:
        return 0  # counted as missing
print(" ".join(n for n in names if count(f'count(count_over_time({{__name__="{n}"}}[10m]))') == 0))
PY
)
[ ${#missing[@]} -eq 0 ] || die "no series in Prometheus for: ${missing[*]}"
log "every metric the dashboard and the rules use has series"
n_tandem=$(query 'count by (tandem_job) (count_over_time(tandem_loss{tandem_job="fmnist"}[10m]))')
[ "$n_tandem" -ge 1 ] || die "tandem_loss has no tandem_job label (the scrape relabelling)"

# Training to the end.
deadline=$(($(date +%s) + 900))
while [ "$(date +%s)" -lt "$deadline" ]; do
  s0=$(state "$w0"); s1=$(state "$w1")
  [ "${s0%% *}" = exited ] && [ "${s1%% *}" = exited ] && break
  sleep 2
done
podman logs "$w0" > "$CACHE/worker-0.log" 2>&1
podman logs "$w1" > "$CACHE/worker-1.log" 2>&1
[ "$s0" = "exited 0" ] && [ "$s1" = "exited 0" ] ||
  die "workers ended '$s0' and '$s1'; logs in $CACHE/worker-{0,1}.log"
acc=$(cat "$CACHE"/worker-*.log | grep -o 'epoch [0-9]* test accuracy [0-9.]*' | tail -1)
[ -n "$acc" ] || die "no test accuracy in the workers' output ($CACHE/worker-{0,1}.log)"
steps=$(cat "$CACHE"/worker-*.log | grep -o '^step [0-9]*/[0-9]*' | tail -1)
log "both workers exited 0; $steps; $acc"
echo "compose_smoke: PASS in $(($(date +%s) - start)) s (binaries=$binaries)"
