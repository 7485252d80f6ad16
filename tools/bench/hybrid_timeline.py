#!/usr/bin/env python3
"""Where a ps / hybrid step goes, from a `tandem local --trace` run (issue 33).

Reads RUN_DIR/trace.json (the merged timeline) and prints, for the steps
in the middle of the run (the first steps warm up, the last one has no next
forward), the median over steps and workers of each phase's end in ms from
the step's start (the earliest worker's `step` span: the step vote after
every step lines the workers up), the spread of the nodes' push starts, and
the servers' first and last complete chunk:

  tandem local --nodes 4 --shard_servers 4 --link 100mbit --sync hybrid \\
      --model mlp:784,1024,1024,10 --max_steps 12 --trace --run_dir /tmp/run
  tools/bench/hybrid_timeline.py /tmp/run/trace.json

  forward end (params landed)   44  (3-75)
  ...

A node's link is idle before `push first start` and after `push last end`;
a server's outgoing link (the pulls) until its first chunk is complete
(every node's push of it in) and after the last pull was answered.
"""

import argparse
import json
import statistics
import sys

PHASES = [
    ("forward end (params landed)", "forward", "end"),
    ("push first start", "push", "start"),
    ("push last end (written)", "push", "end"),
    ("FinishStep end (acks)", "finish step", "end"),
]


def load(path):
    with open(path) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    return names, spans


def summarize(names, spans):
    """{row label: [ms values]} over the middle steps, or {} without steps."""
    workers = sorted(p for p, n in names.items() if n.startswith("worker"))
    servers = sorted(p for p, n in names.items() if n.startswith("shard server"))
    by = {}
    for e in spans:
        by.setdefault((e["pid"], e["name"], e.get("args", {}).get("step")), []).append(e)
    starts = {}
    for (pid, name, step), es in by.items():
        if name == "step" and pid in workers and step is not None:
            starts[step] = min(starts.get(step, es[0]["ts"]), min(x["ts"] for x in es))
    steps = sorted(s for s in starts if s + 1 in starts)
    steps = steps[len(steps) // 2:] if len(steps) > 2 else steps
    rows = {label: [] for label, _, _ in PHASES}
    rows.update({"node push start spread": [], "server first chunk complete": [],
                 "server last chunk complete": [], "step": []})
    for s in steps:
        t0, t1 = starts[s], starts[s + 1]
        push_starts = []
        for w in workers:
            for label, name, which in PHASES:
                es = by.get((w, name, s))
                if not es:
                    continue
                v = (min(x["ts"] for x in es) if which == "start"
                     else max(x["ts"] + x["dur"] for x in es))
                rows[label].append((v - t0) / 1e3)
                if name == "push" and which == "start":
                    push_starts.append(v)
        if push_starts:
            rows["node push start spread"].append((max(push_starts) - min(push_starts)) / 1e3)
        for sv in servers:
            # The servers' spans carry no step: the push chunks that ended
            # within this step's interval.
            done = sorted(x["ts"] + x["dur"] for (pid, name, _), es in by.items()
                          if pid == sv and name == "push chunk" for x in es
                          if t0 <= x["ts"] + x["dur"] < t1)
            if done:
                rows["server first chunk complete"].append((done[0] - t0) / 1e3)
                rows["server last chunk complete"].append((done[-1] - t0) / 1e3)
        rows["step"].append((t1 - t0) / 1e3)
    return {k: v for k, v in rows.items() if v}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a merged trace.json (tandem local --trace)")
    a = ap.parse_args(argv)
    try:
        names, spans = load(a.trace)
    except (OSError, ValueError, KeyError) as e:
        sys.exit("hybrid_timeline.py: cannot read %s as a tandem trace: %s" % (a.trace, e))
    rows = summarize(names, spans)
    if "step" not in rows:
        sys.exit("hybrid_timeline.py: %s has no two consecutive worker steps; run "
                 "tandem local with --trace and --max_steps of 4 or more" % a.trace)
    print("ms from the step start, median (min-max) over %d step(s) and the workers"
          % len(rows["step"]))
    for label, values in rows.items():
        print("  %-30s %6.0f  (%.0f-%.0f)" % (label, statistics.median(values),
                                               min(values), max(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
