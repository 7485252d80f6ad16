#!/usr/bin/env bash
# Every --flag the rendered Helm manifests and the resolved compose files
# pass to a tandem binary is one it accepts (its own --helpfull), and every
# port and probe matches what it serves. The shard server is not in this
# build yet: its flags are checked against the two the chart may pass.
set -euo pipefail
source "${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:?}/deploy/tests/lib.sh"
need "$HELM" docker-compose "$PY"
chart=$DEPLOY/helm/tandem
files=()
for values in "" "$chart"/examples/*.yaml; do
  name=${values:+$(basename "$values" .yaml)}
  name=${name:-default}
  args=()
  [ -n "$values" ] && args=(-f "$values")
  "$HELM" template "t-$name" "$chart" "${args[@]}" > "$TMP/$name.yaml" || fail "helm template ($name)"
  files+=(--manifests="$TMP/$name.yaml")
done
cd "$DEPLOY/compose"
docker-compose -f docker-compose.yml config > "$TMP/compose.yml" || fail "docker-compose config"
docker-compose -f docker-compose.yml -f docker-compose.loopback.yml config > "$TMP/compose-loopback.yml" ||
  fail "docker-compose config (loopback)"
files+=(--compose="$TMP/compose.yml" --compose="$TMP/compose-loopback.yml")
bins=(--binary=coordinator="$(runfile services/coordinator/coordinator)"
      --binary=dataserver="$(runfile services/dataserver/dataserver)"
      --binary=worker="$(runfile services/worker/worker)"
      --binary=shardserver="$(runfile services/shardserver/shardserver)")
"$PY" "$DEPLOY/tests/flags_check.py" "${bins[@]}" "${files[@]}" || fail "flags_check"
# And it must notice a flag the binary does not have, and a probe on the
# wrong port.
sed 's/--heartbeat_ms=/--heartbeat_millis=/' "$TMP/default.yaml" > "$TMP/typo.yaml"
if "$PY" "$DEPLOY/tests/flags_check.py" "${bins[@]}" --manifests="$TMP/typo.yaml" 2>"$TMP/err"; then
  fail "flags_check accepted --heartbeat_millis"
fi
grep -q "coordinator has no flag --heartbeat_millis" "$TMP/err" || fail "no message naming --heartbeat_millis"
sed "s/- '19401'/- '19402'/" \
  "$TMP/compose-loopback.yml" > "$TMP/badport.yml"
if "$PY" "$DEPLOY/tests/flags_check.py" "${bins[@]}" --compose="$TMP/badport.yml" 2>"$TMP/err"; then
  fail "flags_check accepted a healthcheck on the wrong port"
fi
echo "PASS: every flag, port and probe in deploy/ matches the binaries"
