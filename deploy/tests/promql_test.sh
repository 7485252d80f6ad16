#!/usr/bin/env bash
# Every PromQL expression in the dashboard and the rules parses (promtool)
# and names only metrics the real binaries export; a broken dashboard fails.
set -euo pipefail
source "${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:?}/deploy/tests/lib.sh"
need promtool "$PY"
bins=(--binary="$(runfile services/coordinator/coordinator)"
      --binary="$(runfile services/dataserver/dataserver)"
      --binary="$(runfile services/worker/worker)")
check="$PY $DEPLOY/tests/promql_check.py --promtool=$(command -v promtool)"
$check "${bins[@]}" --dashboard="$DEPLOY/grafana/tandem.json" \
  --rules="$DEPLOY/prometheus/rules/tandem.rules.yml" || fail "promql_check"
# A misspelt metric and an unbalanced expression must both be caught.
sed 's/tandem_loss{/tandem_losss{/' "$DEPLOY/grafana/tandem.json" > "$TMP/misspelt.json"
if $check "${bins[@]}" --dashboard="$TMP/misspelt.json" 2>"$TMP/err"; then
  fail "promql_check accepted tandem_losss"
fi
grep -q "metric 'tandem_losss' is not exported" "$TMP/err" || fail "no message naming tandem_losss"
sed 's/sum by (tandem_job, le) (rate(tandem_step_seconds_bucket/sum by (tandem_job, le (rate(tandem_step_seconds_bucket/' \
  "$DEPLOY/grafana/tandem.json" > "$TMP/unparsable.json"
if $check "${bins[@]}" --dashboard="$TMP/unparsable.json" 2>"$TMP/err"; then
  fail "promql_check accepted an unparsable expression"
fi
grep -q "parse error" "$TMP/err" || fail "no parse error reported"
echo "PASS: dashboard and rule expressions parse; every metric is exported"
