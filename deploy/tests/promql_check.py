#!/usr/bin/env python3
"""Checks every PromQL expression in Grafana dashboards and Prometheus rule
files: each one must parse (promtool, by way of a generated recording-rule
file) and every metric it names must be one the tandem binaries export.

  promql_check.py --promtool=PATH --binary=BIN [--binary=BIN ...]
                  [--dashboard=JSON ...] [--rules=YML ...] [--list-metrics]

The exported names are read from the binaries themselves (the string
literals every `Metrics::Counter/Gauge/Histogram("tandem_...")` call leaves
in them), so a renamed or removed metric fails here, not in a dashboard
that silently shows nothing. `up` is Prometheus's own. Histogram series
(`_bucket`, `_sum`, `_count`) are accepted for an exported stem.
--list-metrics prints the metric names used, one a line (the compose smoke
test asks a running Prometheus for each). Exit 0 when all is well, 1 with
one line per problem otherwise.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Grafana's variables, replaced by something PromQL accepts.
GRAFANA_VARS = [
    (re.compile(r"\$__rate_interval|\$__interval|\$__range"), "1m"),
    (re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?"), ".*"),
]
LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", re.S)
# PromQL words that look like identifiers but are not metric names.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "inf", "nan",
}


def exported_names(binaries):
    names = set()
    for b in binaries:
        data = open(b, "rb").read()
        for m in re.finditer(rb"tandem_[a-z0-9_]+", data):
            names.add(m.group(0).decode())
    return names


def dashboard_exprs(path):
    """(where, expr) for every panel target and query variable."""
    d = json.load(open(path))
    out = []

    def walk_panels(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"{path}: panel '{p.get('title')}' {t.get('refId')}", t["expr"]))
            walk_panels(p.get("panels", []))

    walk_panels(d.get("panels", []))
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = LABEL_VALUES.match(q or "")
        if not m:
            out.append((f"{path}: variable '{v.get('name')}'", q or ""))
            continue
        out.append((f"{path}: variable '{v.get('name')}'", m.group(1)))
    return out


def rule_exprs(path):
    doc = yaml.safe_load(open(path))
    out = []
    for g in doc.get("groups", []):
        for r in g.get("rules", []):
            name = r.get("alert") or r.get("record")
            out.append((f"{path}: rule '{name}'", r["expr"]))
    return out


def to_promql(expr):
    for pat, rep in GRAFANA_VARS:
        expr = pat.sub(rep, expr)
    return expr


def metric_names(expr):
    """Metric names an expression selects: identifiers outside label
    matchers, strings, grouping clauses and function calls."""
    e = re.sub(r'"(\\.|[^"\\])*"', '""', expr)  # strings
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)  # ranges
    names = set()
    for m in re.finditer(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):  # a function or aggregation
            continue
        if word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def known(name, exported):
    if name in exported or name in PROMETHEUS_OWN:
        return True
    for s in HISTOGRAM_SUFFIXES:
        if name.endswith(s) and name[: -len(s)] in exported:
            return True
    return False


def parse_with_promtool(promtool, exprs):
    """Returns promtool's complaint, or '' when every expression parses."""
    rules = {"groups": [{"name": "promql_check", "rules": [
        {"record": f"promql_check:expr_{i}", "expr": to_promql(e)} for i, (_, e) in enumerate(exprs)
    ]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False,
                                     dir=os.environ.get("TEST_TMPDIR")) as f:
        yaml.safe_dump(rules, f)
        path = f.name
    try:
        p = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
        if p.returncode == 0:
            return ""
        # Name the expression promtool rejected: it reports the rule index.
        msg = (p.stdout + p.stderr).strip()
        for i, (where, e) in enumerate(exprs):
            if f"expr_{i}\"" in msg or f"expr_{i}:" in msg or f"expr_{i} " in msg:
                msg += f"\n  (promql_check:expr_{i} is {where}: {e})"
        return msg
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--promtool", required=True)
    ap.add_argument("--binary", action="append", default=[])
    ap.add_argument("--dashboard", action="append", default=[])
    ap.add_argument("--rules", action="append", default=[])
    ap.add_argument("--list-metrics", action="store_true")
    a = ap.parse_args()
    exprs = []
    for d in a.dashboard:
        exprs += dashboard_exprs(d)
    for r in a.rules:
        exprs += rule_exprs(r)
    if not exprs:
        print("promql_check: no expressions found (give --dashboard or --rules)", file=sys.stderr)
        return 1
    used = set()
    for _, e in exprs:
        used |= metric_names(to_promql(e))
    if a.list_metrics:
        print("\n".join(sorted(used)))
        return 0
    problems = []
    if not a.binary:
        problems.append("no --binary given: cannot tell which metric names are exported")
    exported = exported_names(a.binary)
    for where, e in exprs:
        for n in sorted(metric_names(to_promql(e))):
            if not known(n, exported):
                problems.append(f"{where}: metric '{n}' is not exported by any of "
                                f"{', '.join(os.path.basename(b) for b in a.binary)}")
    complaint = parse_with_promtool(a.promtool, exprs)
    if complaint:
        problems.append("promtool rejects an expression:\n" + complaint)
    for p in problems:
        print("promql_check: " + p, file=sys.stderr)
    if not problems:
        print(f"promql_check: {len(exprs)} expressions parse; {len(used)} metric names, all exported")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
