#!/usr/bin/env python3
"""Step time with background checkpoints vs none vs synchronous (issue 34).

Runs the same `tandem local` job in three modes, interleaved (A B C A B C
...) so the machine's load drifts over all of them alike, and reports the
median wall time per optimizer step between the "step W/" progress line and
the last one (W = the warm-up steps, excluded), checkpoint pauses included
(the progress lines' own ms/step leave them out):

  none        --checkpoint_every 0 (only the final checkpoint, after timing)
  background  --checkpoint_every E, --background_checkpoint=true (default)
  sync        --checkpoint_every E, --background_checkpoint=false

--sync picks the strategy (one at a time; run the script once per strategy):
  allreduce   one file, written by rank 0
  zero1/2/3   one shard per rank and a manifest (every rank writes its own)
  ps, hybrid  the shard servers write their ranges (--shard-servers, default 2)

Target (issue 34): background <= 5% above none.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = {
    "none": ["--checkpoint-every=0"],
    "background": ["--checkpoint-every={every}", "--worker-arg=--background_checkpoint=true"],
    "sync": ["--checkpoint-every={every}", "--worker-arg=--background_checkpoint=false"],
}


def run_once(a, mode, root, i):
    run_dir = os.path.join(root, "%s-%d" % (mode, i))
    args = [a.tandem, "local", "--workers=%d" % a.workers, "--model=" + a.model,
            "--optimizer=" + a.optimizer, "--batch-size=%d" % a.batch_size,
            "--max-steps=%d" % a.steps, "--log-every=10", "--eval-dataset=",
            "--run-dir=" + run_dir, "--sync=" + a.sync] + strategy_args(a) + \
        [x.format(every=a.every) for x in MODES[mode]]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         bufsize=1)
    first = last = None
    for line in p.stdout:
        if line.startswith("step %d/" % a.warmup):
            first = time.monotonic()
        if line.startswith("step %d/" % a.steps):
            last = time.monotonic()
    err = p.stderr.read()
    if p.wait() != 0 or first is None or last is None:
        sys.exit("checkpoint_overhead: %s run failed:\n%s" % (mode, err[-2000:]))
    return (last - first) / (a.steps - a.warmup)


def strategy_args(a):
    """The extra `tandem local` flags --sync needs."""
    if a.sync in ("ps", "hybrid"):
        return ["--shard-servers=%d" % a.shard_servers]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--model", default="mlp:784,2048,2048,10")
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sync", default="allreduce",
                    choices=["allreduce", "zero1", "zero2", "zero3", "ps", "hybrid"])
    ap.add_argument("--shard-servers", type=int, default=2, help="ps / hybrid only")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tandem-ckpt-bench-")
    times = {m: [] for m in MODES}
    for i in range(a.reps):
        for mode in MODES:
            times[mode].append(run_once(a, mode, root, i))
    base = statistics.median(times["none"])
    print("--sync %s%s, %s, %s, %d workers x batch %d, checkpoint every %d steps, "
          "%d timed steps x %d reps"
          % (a.sync, " (%d shard servers)" % a.shard_servers if strategy_args(a) else "",
             a.model, a.optimizer, a.workers, a.batch_size, a.every, a.steps - a.warmup, a.reps))
    print("%-11s %14s %12s  %s" % ("mode", "median ms/step", "vs none", "runs (ms/step)"))
    for mode in MODES:
        m = statistics.median(times[mode])
        print("%-11s %14.1f %+11.1f%%  %s" % (mode, 1e3 * m, 100 * (m / base - 1),
                                             " ".join("%.1f" % (1e3 * t) for t in times[mode])))
    print("runs in", root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
