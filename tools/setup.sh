#!/usr/bin/env bash
# Installs every Debian package tandem needs. Idempotent: installs only what
# is missing, so re-running is cheap and safe.
#
#   tools/setup.sh              build + test dependencies
#   tools/setup.sh --bench      also what the benchmarks compare against (PyTorch)
#   tools/setup.sh --check      exit 0 if nothing is missing, 1 otherwise; installs nothing
set -uo pipefail

CORE=(
  bazel-bootstrap bazel-platforms
  g++ python3 pkg-config zlib1g-dev
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev prometheus-cpp-dev libgloo-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist prometheus
  fortunes  # text for the GPT runs: /usr/share/games/fortunes (tandem local --dataset=fortunes)
  iproute2  # ip and tc: tandem local --nodes (simulated hosts, shaped links)
)
BENCH=(python3-torch python3-matplotlib)  # matplotlib: tools/bench/strategies.sh's chart

want=("${CORE[@]}")
check_only=0
for arg in "$@"; do
  case "$arg" in
    --bench) want+=("${BENCH[@]}") ;;
    --check) check_only=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (use --bench, --check or --help)" >&2; exit 2 ;;
  esac
done

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -eq 0 ]; then
  [ $check_only -eq 1 ] || echo "setup.sh: all ${#want[@]} packages present"
  exit 0
fi
if [ $check_only -eq 1 ]; then
  echo "setup.sh: missing packages: ${missing[*]}" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "setup.sh: installing ${missing[*]}"
if ! $SUDO apt-get update -q >/tmp/tandem-apt-update.log 2>&1; then
  echo "setup.sh: 'apt-get update' failed; see /tmp/tandem-apt-update.log (is the Debian archive reachable?)" >&2
  exit 1
fi
if ! $SUDO apt-get install -y -q "${missing[@]}" >/tmp/tandem-apt-install.log 2>&1; then
  # Find which package failed, one by one, so the message can name it.
  for p in "${missing[@]}"; do
    if ! $SUDO apt-get install -y -q "$p" >>/tmp/tandem-apt-install.log 2>&1; then
      echo "setup.sh: could not install Debian package '$p'; see /tmp/tandem-apt-install.log" >&2
      exit 1
    fi
  done
fi
for p in "${missing[@]}"; do
  installed "$p" || { echo "setup.sh: package '$p' is still not installed" >&2; exit 1; }
done
echo "setup.sh: installed ${#missing[@]} package(s)"
