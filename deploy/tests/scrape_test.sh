#!/usr/bin/env bash
# A running cluster (coordinator, data server, 2 workers: the real binaries,
# ports 0) exports every metric the dashboard and the alert rules use,
# scraped from the processes' /metrics; a misspelt metric fails.
set -euo pipefail
source "${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:?}/deploy/tests/lib.sh"
need promtool "$PY"
run() {  # run TMPDIR DASHBOARD
  mkdir -p "$1"
  "$PY" "$DEPLOY/tests/scrape_check.py" \
    --coordinator="$(runfile services/coordinator/coordinator)" \
    --dataserver="$(runfile services/dataserver/dataserver)" \
    --worker="$(runfile services/worker/worker)" \
    --promql_check="$DEPLOY/tests/promql_check.py" --promtool="$(command -v promtool)" \
    --dashboard="$2" --rules="$DEPLOY/prometheus/rules/tandem.rules.yml" --tmp="$1"
}
run "$TMP/ok" "$DEPLOY/grafana/tandem.json" || fail "scrape_check"
sed 's/tandem_loss{/tandem_losss{/' "$DEPLOY/grafana/tandem.json" > "$TMP/misspelt.json"
if run "$TMP/misspelt" "$TMP/misspelt.json" 2>"$TMP/err"; then
  fail "scrape_check accepted tandem_losss"
fi
grep -q "tandem_losss" "$TMP/err" || fail "no message naming tandem_losss"
echo "PASS: every metric the dashboard and the rules use is scraped from a running cluster"
