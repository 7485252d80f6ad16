# Shared by deploy/tests/*.sh (sourced): where the tools are, and how to
# fail. The tools come from tools/setup.sh: Debian's promtool, yamllint and
# docker-compose; Helm 4, kubectl and the Kubernetes schemas from npm under
# $TANDEM_TOOLS (default /opt/tandem-tools).
set -euo pipefail
TANDEM_TOOLS=${TANDEM_TOOLS:-/opt/tandem-tools}
HELM=$TANDEM_TOOLS/bin/helm
NODE_MODULES=$TANDEM_TOOLS/node_modules
PY=/usr/bin/python3
DEPLOY=${TEST_SRCDIR:-$PWD}/${TEST_WORKSPACE:-tandem}/deploy
TMP=${TEST_TMPDIR:-$(mktemp -d)}
export HOME=$TMP HELM_CACHE_HOME=$TMP/helm-cache HELM_CONFIG_HOME=$TMP/helm-config \
  HELM_DATA_HOME=$TMP/helm-data

fail() { echo "FAIL: $*" >&2; exit 1; }
need() {
  for t in "$@"; do
    [ -x "$t" ] || command -v "$t" >/dev/null 2>&1 ||
      fail "$t not found: run tools/setup.sh (it installs the deploy tools)"
  done
}
# The first runfile whose path ends in $1 (a binary from `data`).
runfile() {
  local p=${TEST_SRCDIR}/${TEST_WORKSPACE}/$1
  [ -x "$p" ] || fail "runfile $1 not found"
  echo "$p"
}
