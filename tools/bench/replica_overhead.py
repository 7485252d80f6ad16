#!/usr/bin/env python3
"""Step time of ps / hybrid with shard-server replicas (the default) against
--sync_opt replicate=0, side by side (issue 34 item 3).

For each (strategy, model) it runs `tandem local --workers 2 --shard-servers 2`
ROUNDS times per side, the two sides interleaved (A B A B ...) so both see
the same load, reads the ms/step of every progress line after the first
(start-up excluded), and prints per configuration the median of the runs'
medians per side, B / A, and each side's spread (max / min over rounds).
Also the CPU time the whole job used (every process: tandem local's
children's user + sys) per step, start-up included: on a loaded machine
the cost that does not depend on how the cores are shared. The load
average (1 min) before and after is printed with the table: on a shared
machine the ratios are the numbers to read, not the absolute times.

  bazel build -c opt //tools/tandem
  tools/bench/replica_overhead.py [--tandem bazel-bin/tools/tandem/tandem]
      [--rounds 3] [--steps 300] [--sync ps,hybrid]
      [--models "mlp:784,256,10;mlp:784,1024,1024,10"] [--before DIR]

--before DIR: a third side in the same rounds, the default settings with the
service binaries of another build (tandem local --bin_dir DIR: coordinator,
dataserver, shardserver, worker copied there), e.g. the commit before a
change to replication.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile

STEP = re.compile(r"^step (\d+)/(\d+) .* ms/step (\d+(?:\.\d+)?) ")


def step_ms(out):
    """Median ms/step over the progress lines after the first."""
    ms = [float(m.group(3)) for m in map(STEP.match, out.splitlines()) if m]
    return statistics.median(ms[1:]) if len(ms) > 1 else None


def one_run(tandem, root, sync, model, steps, replicate, tag, bin_dir=""):
    run_dir = tempfile.mkdtemp(prefix=tag + "-", dir=root)
    args = [tandem, "local", "--workers=2", "--shard-servers=2", "--sync=" + sync,
            "--model=" + model, "--max-steps=%d" % steps, "--log-every=%d" % max(1, steps // 10),
            "--checkpoint-every=100000", "--run-dir=" + run_dir]
    if not replicate:
        args.append("--sync-opt=replicate=0")
    if bin_dir:
        args.append("--bin-dir=" + bin_dir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(args, capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ms = 1000.0 * ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / steps
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (" ".join(args), p.returncode, p.stderr[-2000:]))
    ms = step_ms(p.stdout)
    if ms is None:
        raise RuntimeError("no ms/step lines in:\n" + p.stdout[-2000:])
    return ms, cpu_ms


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", default="bazel-bin/tools/tandem/tandem")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sync", default="ps,hybrid")
    ap.add_argument("--models", default="mlp:784,256,10;mlp:784,1024,1024,10",
                    help="';'-separated model specs")
    ap.add_argument("--before", default="", help="service binaries of another build")
    a = ap.parse_args(argv)
    if not os.access(a.tandem, os.X_OK):
        print("replica_overhead: no tandem binary at %s; run 'bazel build -c opt //tools/tandem'"
              % a.tandem, file=sys.stderr)
        return 1
    load0 = os.getloadavg()[0]
    root = tempfile.mkdtemp(prefix="replica-overhead-")
    rows = []
    for sync in a.sync.split(","):
        for model in a.models.split(";"):
            off, on, before = [], [], []
            for r in range(a.rounds):
                off.append(one_run(a.tandem, root, sync, model, a.steps, False, "off"))
                on.append(one_run(a.tandem, root, sync, model, a.steps, True, "on"))
                line = ("%s %s round %d: replicate=0 %.2f ms/step (%.1f CPU ms/step), default %.2f "
                        "(%.1f)" % (sync, model, r + 1, off[-1][0], off[-1][1], on[-1][0], on[-1][1]))
                if a.before:
                    before.append(one_run(a.tandem, root, sync, model, a.steps, True, "before",
                                          a.before))
                    line += ", before %.2f (%.1f)" % before[-1]
                print(line, flush=True)
            rows.append((sync, model, off, on))
            if before:
                rows.append((sync + "*", model, off, before))
    load1 = os.getloadavg()[0]
    if a.before:
        print("\nSYNC*: the default with --before %s (B) against replicate=0 (A)" % a.before)
    print("\nload average (1 min): %.1f before, %.1f after; %d interleaved rounds, %d steps"
          % (load0, load1, a.rounds, a.steps))
    print("%-7s %-22s %12s %12s %7s %12s %9s %9s %7s" % (
        "sync", "model", "replicate=0", "default", "B/A", "spread A/B", "CPU A", "CPU B", "B/A"))
    for sync, model, off, on in rows:
        ms_a, ms_b = [x[0] for x in off], [x[0] for x in on]
        ma, mb = statistics.median(ms_a), statistics.median(ms_b)
        ca, cb = statistics.median([x[1] for x in off]), statistics.median([x[1] for x in on])
        print("%-7s %-22s %9.2f ms %9.2f ms %7.3f %5.2f/%5.2f %6.1f ms %6.1f ms %7.3f"
              % (sync, model, ma, mb, mb / ma, max(ms_a) / min(ms_a), max(ms_b) / min(ms_b),
                 ca, cb, cb / ca))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
