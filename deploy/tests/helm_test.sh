#!/usr/bin/env bash
# The Helm chart: `helm lint --strict` and `helm template` with the default
# values and every example; every rendered object valid against the
# Kubernetes (and Prometheus Operator) schemas and clean under yamllint;
# values.schema.json refusing bad values, each with a message naming it.
set -euo pipefail
source "${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:?}/deploy/tests/lib.sh"
need "$HELM" node yamllint
chart=$DEPLOY/helm/tandem
[ -d "$NODE_MODULES/kubernetes-models" ] ||
  fail "$NODE_MODULES/kubernetes-models missing: run tools/setup.sh"
lint_rendered='{extends: default, rules: {document-start: disable, line-length: {max: 200},
  indentation: {indent-sequences: whatever}}}'
n=0
for values in "" "$chart"/examples/*.yaml; do
  name=${values:+$(basename "$values" .yaml)}
  name=${name:-default}
  args=()
  [ -n "$values" ] && args=(-f "$values")
  "$HELM" lint --strict "$chart" "${args[@]}" || fail "helm lint --strict ($name)"
  out=$TMP/rendered-$name.yaml
  "$HELM" template "test-$name" "$chart" --namespace tandem "${args[@]}" > "$out" ||
    fail "helm template ($name)"
  node "$DEPLOY/tests/validate_k8s.mjs" "$NODE_MODULES" "$out" || fail "schema validation ($name)"
  yamllint -s -d "$lint_rendered" "$out" || fail "yamllint on the rendered $name manifests"
  n=$((n + 1))
done
# The validator must refuse what the API would: a misspelt field (the
# packages' own validators let unknown fields through) and a wrong type.
sed 's/readinessProbe:/readinesProbe:/' "$TMP/rendered-default.yaml" > "$TMP/misspelt.yaml"
if node "$DEPLOY/tests/validate_k8s.mjs" "$NODE_MODULES" "$TMP/misspelt.yaml" >/dev/null 2>"$TMP/err"; then
  fail "validate_k8s.mjs accepted readinesProbe"
fi
grep -q 'unknown field "readinesProbe"' "$TMP/err" || fail "no message naming readinesProbe"
sed 's/containerPort: 9400/containerPort: "9400x"/' "$TMP/rendered-default.yaml" > "$TMP/badtype.yaml"
if node "$DEPLOY/tests/validate_k8s.mjs" "$NODE_MODULES" "$TMP/badtype.yaml" >/dev/null 2>&1; then
  fail "validate_k8s.mjs accepted a string containerPort"
fi
# What the examples promise is in their manifests.
grep -q 'nvidia.com/gpu: 1' "$TMP/rendered-gpu.yaml" || fail "gpu example: no nvidia.com/gpu limit"
grep -q 'medium: Memory' "$TMP/rendered-gpu.yaml" || fail "gpu example: /dev/shm is not a memory emptyDir"
grep -q 'kind: ServiceMonitor' "$TMP/rendered-cpu.yaml" || fail "cpu example: no ServiceMonitor"
grep -q 'kind: PrometheusRule' "$TMP/rendered-cpu.yaml" || fail "cpu example: no PrometheusRule"
grep -q 'alert: TandemLossNaN' "$TMP/rendered-cpu.yaml" || fail "PrometheusRule lacks the rules"
grep -q 'shardserver' "$TMP/rendered-hybrid.yaml" || fail "hybrid example: no shard servers"
grep -q 'mountPath: /var/lib/tandem/models' "$TMP/rendered-torchscript.yaml" ||
  fail "torchscript example: the module is not mounted"
grep -q -- '--model=torchscript:/var/lib/tandem/models/cnn.pt' "$TMP/rendered-torchscript.yaml" ||
  fail "torchscript example: the worker is not given the module"
if grep -q 'shardserver' "$TMP/rendered-default.yaml"; then
  fail "default values render shard servers (they must stay off until the binary exists)"
fi
grep -q 'secretKeyRef' "$TMP/rendered-default.yaml" || fail "no container takes the token from a Secret"
# The token reaches the services under the name common/rpc/auth.cc reads.
grep -q 'name: TANDEM_TOKEN$' "$TMP/rendered-default.yaml" || fail "the token is not in \$TANDEM_TOKEN"
grep -q 'getenv("TANDEM_TOKEN")' "$TEST_SRCDIR/$TEST_WORKSPACE/common/rpc/auth.cc" ||
  fail "common/rpc/auth.cc no longer reads \$TANDEM_TOKEN: change the chart's env name with it"
# TLS: off by default; with job.tls.secretName every workload gets the flags,
# the read-only mount and the Secret volume.
if grep -q -- '--tls_' "$TMP/rendered-default.yaml"; then fail "default values turn TLS on"; fi
workloads=$(grep -c '^kind: \(StatefulSet\|Job\)$' "$TMP/rendered-tls.yaml")
for want in -- '--tls_mutual' '--tls_ca=/etc/tandem/tls/ca.crt' 'mountPath: /etc/tandem/tls' \
    'secretName: tandem-tls'; do
  [ "$want" = -- ] && continue
  got=$(grep -c -- "$want" "$TMP/rendered-tls.yaml" || true)
  [ "$got" -eq "$workloads" ] || fail "tls example: '$want' in $got of $workloads workloads"
done
# --trace: off by default; the trace example gives every worker, data server
# and shard server the flags and the shared traces volume.
if grep -q -- '--trace' "$TMP/rendered-default.yaml"; then fail "default values turn --trace on"; fi
traced=$(grep -c '^kind: \(StatefulSet\|Job\)$' "$TMP/rendered-trace.yaml")
traced=$((traced - 1))  # not the coordinator
for want in -- '--trace_file=/var/lib/tandem/traces/' 'mountPath: /var/lib/tandem/traces' \
    'claimName: tandem-traces'; do
  [ "$want" = -- ] && continue
  got=$(grep -c -- "$want" "$TMP/rendered-trace.yaml" || true)
  [ "$got" -eq "$traced" ] || fail "trace example: '$want' in $got of $traced workloads"
done
# The schema must refuse bad values, naming the field.
refuse() {  # refuse EXPECTED_TEXT --set ...
  local want=$1
  shift
  if "$HELM" template bad "$chart" "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"; then
    fail "helm template accepted $*"
  fi
  grep -q -- "$want" "$TMP/bad.err" || { cat "$TMP/bad.err" >&2; fail "error for $* does not mention '$want'"; }
  echo "refused as expected: $*"
}
refuse "/workers/backend" --set workers.backend=tpu
refuse "/workers/replicas" --set workers.replicas=0
refuse "/coordinator/port" --set coordinator.port=70000
refuse "/job/id" --set job.id=Not_A_DNS_Label
refuse "/workers/extraArgs/0" --set 'workers.extraArgs[0]=no-dashes'
refuse "/securityContext/runAsNonRoot" --set securityContext.runAsNonRoot=false
refuse "typo" --set workers.typo=1
refuse "/trace/steps" --set trace.steps=0
echo "PASS: chart lints, renders $n value sets, all objects valid, bad values refused"
