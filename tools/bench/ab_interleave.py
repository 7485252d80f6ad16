#!/usr/bin/env python3
"""Runs two builds of a benchmark interleaved (A B A B ...) and compares them.

For a before/after on a loaded machine: both sides see the same load
because their runs alternate, and medians over rounds drop the outliers.
Reads the `RESULT name k=v k=v ...` lines the benchmarks here print
(mlp_breakdown_bench, mlp_step_bench, gpt_breakdown_bench); every numeric
field gets its median per side and the ratio B / A.

  bazel build //tools/bench:mlp_breakdown_bench   # at commit A, copy it to /tmp/A
  bazel build //tools/bench:mlp_breakdown_bench   # at commit B, copy it to /tmp/B
  tools/bench/ab_interleave.py --a /tmp/A --b /tmp/B --rounds 6 -- --world=2 --limit=false

Prints one row per RESULT field: median A, median B, B/A, and the spread
(max/min over rounds) of each side, a rough noise gauge. Exit status 1 when
a run fails or prints no RESULT line.
"""

import argparse
import statistics
import subprocess
import sys
from collections import defaultdict


def parse_results(text):
    """{(result name, key): value} from every RESULT line of `text`."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("RESULT "):
            continue
        words = line.split()
        name = words[1] if len(words) > 1 and "=" not in words[1] else ""
        for w in words[1:]:
            if "=" not in w:
                continue
            k, v = w.split("=", 1)
            try:
                out[(name, k)] = float(v)
            except ValueError:
                pass  # a label such as transport=shm
    return out


def run(binary, args):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (binary, p.returncode, p.stderr[-2000:]))
    r = parse_results(p.stdout)
    if not r:
        raise RuntimeError("%s printed no RESULT line" % binary)
    return r


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the baseline binary")
    ap.add_argument("--b", required=True, help="the binary compared with it")
    ap.add_argument("--rounds", type=int, default=5, help="A B pairs (default 5)")
    ap.add_argument("args", nargs="*", help="arguments for both (after --)")
    o = ap.parse_args(argv)
    samples = {"A": defaultdict(list), "B": defaultdict(list)}
    try:
        for i in range(o.rounds):
            for side, binary in (("A", o.a), ("B", o.b)):
                for key, v in run(binary, o.args).items():
                    samples[side][key].append(v)
            print("round %d of %d done" % (i + 1, o.rounds), file=sys.stderr)
    except RuntimeError as e:
        print("ab_interleave: %s" % e, file=sys.stderr)
        return 1
    print("%-28s %12s %12s %8s %10s %10s" % ("field", "median A", "median B", "B/A",
                                            "spread A", "spread B"))
    for key in sorted(samples["A"]):
        a, b = samples["A"][key], samples["B"].get(key, [])
        if not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)

        def spread(v):
            return "%.2f" % (max(v) / min(v)) if min(v) > 0 else "-"

        ratio = "%.3f" % (mb / ma) if ma else "-"
        label = "%s.%s" % key if key[0] else key[1]
        print("%-28s %12.4g %12.4g %8s %10s %10s" % (label, ma, mb, ratio, spread(a), spread(b)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
