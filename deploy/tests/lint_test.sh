#!/usr/bin/env bash
# yamllint on deploy/ (its .yamllint), `docker-compose config -q` on the
# compose file alone and with the loopback override, and the dashboard is
# well-formed Grafana JSON (unique panel ids, every panel on the grid, a
# datasource on every query).
set -euo pipefail
source "${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:?}/deploy/tests/lib.sh"
need yamllint docker-compose "$PY"
cd "$DEPLOY"
yamllint -s -c .yamllint . || fail "yamllint deploy/"
(cd compose && docker-compose -f docker-compose.yml config -q) || fail "docker-compose config -q"
# As `docker-compose up` reads it: .env's COMPOSE_FILE adds the published ports.
(cd compose && docker-compose config -q) || fail "docker-compose config -q (.env's COMPOSE_FILE)"
resolved=$(cd compose && docker-compose config) || fail "docker-compose config"
case "$resolved" in *127.0.0.1:3000:3000*) ;; *) fail "Grafana is not published on 127.0.0.1:3000" ;; esac
(cd compose && docker-compose -f docker-compose.yml -f docker-compose.loopback.yml config -q) ||
  fail "docker-compose config -q with the loopback override"
"$PY" - grafana/tandem.json <<'PY' || fail "grafana/tandem.json"
import json, sys
d = json.load(open(sys.argv[1]))
ids = [p["id"] for p in d["panels"]]
assert len(ids) == len(set(ids)), f"duplicate panel ids: {ids}"
names = {v["name"] for v in d["templating"]["list"]}
assert {"datasource", "job", "rank"} <= names, f"variables: {names}"
for p in d["panels"]:
    g = p["gridPos"]
    assert g["x"] + g["w"] <= 24, f"panel {p['title']} off the grid"
    for t in p.get("targets", []):
        assert t["datasource"]["uid"] == "${datasource}", f"panel {p['title']}: fixed datasource"
        assert "$job" in t["expr"] or "job=" in t["expr"] or "instance" in t["expr"], \
            f"panel {p['title']}: query ignores the job variable: {t['expr']}"
print(f"dashboard: {len(ids)} panels")
PY
echo "PASS: yamllint, docker-compose config and the dashboard JSON"
