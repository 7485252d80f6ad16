#!/usr/bin/env bash
# promtool on everything Prometheus reads from deploy/: both compose scrape
# configs, the alert rules (syntax and unit tests), and the chart's copy of
# the rules being the same file.
set -euo pipefail
source "${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:?}/deploy/tests/lib.sh"
need promtool
cd "$DEPLOY"
for c in compose/prometheus/prometheus.yml compose/prometheus/prometheus.loopback.yml; do
  # rule_files point at /etc/prometheus/rules (the container's mount):
  # check each config with that path pointed at the real rules.
  sed "s|/etc/prometheus/rules/|$DEPLOY/prometheus/rules/|" "$c" > "$TMP/$(basename "$c")"
  promtool check config "$TMP/$(basename "$c")" || fail "promtool check config $c"
done
promtool check rules prometheus/rules/tandem.rules.yml || fail "promtool check rules"
promtool test rules prometheus/tests/tandem.rules.test.yml || fail "promtool test rules"
cmp prometheus/rules/tandem.rules.yml helm/tandem/files/tandem.rules.yml ||
  fail "helm/tandem/files/tandem.rules.yml differs from prometheus/rules/tandem.rules.yml: copy it over"
# The unit tests must be able to fail: a rule file whose NaN alert never
# fires has to make `promtool test rules` fail.
mkdir -p "$TMP/broken/rules" "$TMP/broken/tests"
sed 's/tandem_loss{job="tandem-worker"} != tandem_loss{job="tandem-worker"}/tandem_loss{job="tandem-worker"} < -1/' \
  prometheus/rules/tandem.rules.yml > "$TMP/broken/rules/tandem.rules.yml"
cp prometheus/tests/tandem.rules.test.yml "$TMP/broken/tests/"
if promtool test rules "$TMP/broken/tests/tandem.rules.test.yml" >/dev/null 2>&1; then
  fail "promtool test rules passed with a broken TandemLossNaN rule"
fi
# Likewise a TandemStraggler that never fires.
sed 's/(tandem_straggler{job="tandem-coordinator"}) == 1/(tandem_straggler{job="tandem-coordinator"}) == 2/' \
  prometheus/rules/tandem.rules.yml > "$TMP/broken/rules/tandem.rules.yml"
if promtool test rules "$TMP/broken/tests/tandem.rules.test.yml" >/dev/null 2>&1; then
  fail "promtool test rules passed with a broken TandemStraggler rule"
fi
echo "PASS: prometheus configs, rules and rule unit tests"
