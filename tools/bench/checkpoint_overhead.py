#!/usr/bin/env python3
"""Step time with background checkpoints vs none vs synchronous (issue 34).

Runs the same `tandem local` job in three modes, interleaved (A B C A B C
...) so the machine's load drifts over all of them alike, and reports the
median wall time per optimizer step between the "step W/" progress line and
the last one (W = the warm-up steps, excluded), checkpoint pauses included
(the progress lines' own ms/step leave them out), and the CPU time per
step the workers used over the same steps (user + system of every worker
process, the checkpoint writer thread included; read from /proc, Linux):
on a shared, loaded machine the wall time follows the machine's load, the
CPU per step much less. What the kernel spends on the job's behalf in its
own threads (page-cache writeback) is not in the CPU column.

  none        --checkpoint_every 0 (only the final checkpoint, after timing)
  background  --checkpoint_every E, --background_checkpoint=true (default)
  sync        --checkpoint_every E, --background_checkpoint=false

--sync picks the strategy (one at a time; run the script once per strategy):
  allreduce   one file, written by rank 0
  zero1/2/3   one shard per rank and a manifest (every rank writes its own)
  ps, hybrid  the shard servers write their ranges (--shard-servers, default 2)

--baseline PATH adds a fourth mode, "bg-baseline": background checkpoints
with another tandem binary (an earlier build), interleaved with the rest,
so a change to the writer is measured side by side with what it replaced.

Target (issue 34): background <= 5% above none.
"""

import argparse
import os
import shutil
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


def worker_cpu_seconds(run_dir):
    """User + system CPU seconds of the run's worker processes so far."""
    total = 0
    for name in os.listdir(run_dir):
        if not (name.startswith("worker-") and name.endswith(".pid")):
            continue
        try:
            with open(os.path.join(run_dir, name)) as f:
                pid = int(f.read().split()[0])
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            continue  # not started yet, or already gone
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def run_once(a, mode, root, i):
    run_dir = os.path.join(root, "%s-%d" % (mode, i))
    tandem = a.baseline if mode == "bg-baseline" else a.tandem
    args = [tandem, "local", "--workers=%d" % a.workers, "--model=" + a.model,
            "--optimizer=" + a.optimizer, "--batch-size=%d" % a.batch_size,
            "--max-steps=%d" % a.steps, "--log-every=10", "--eval-dataset=",
            "--run-dir=" + run_dir, "--sync=" + a.sync,
            # A loaded machine can starve a heartbeat for seconds: no false losses.
            "--heartbeat-misses=20"] + strategy_args(a) + \
        [x.format(every=a.every) for x in MODES[mode if mode != "bg-baseline" else "background"]]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         bufsize=1)
    first = last = None
    cpu0 = cpu1 = 0.0
    for line in p.stdout:
        if line.startswith("step %d/" % a.warmup):
            first = time.monotonic()
            cpu0 = worker_cpu_seconds(run_dir)
        if line.startswith("step %d/" % a.steps):
            last = time.monotonic()
            cpu1 = worker_cpu_seconds(run_dir)
    err = p.stderr.read()
    if p.wait() != 0 or first is None or last is None:
        sys.exit("checkpoint_overhead: %s run failed:\n%s" % (mode, err[-2000:]))
    # The logs stay; the checkpoints (tens of MB each) go.
    shutil.rmtree(os.path.join(run_dir, "checkpoints"), ignore_errors=True)
    steps = a.steps - a.warmup
    return (last - first) / steps, (cpu1 - cpu0) / steps


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
    ap.add_argument("--baseline", help="another tandem binary: adds mode bg-baseline")
    ap.add_argument("--modes", default="none,background,sync",
                    help="comma-separated subset of none,background,sync (none always runs)")
    a = ap.parse_args()
    modes = ["none"] + [m for m in a.modes.split(",") if m in MODES and m != "none"]
    unknown = [m for m in a.modes.split(",") if m not in MODES]
    if unknown:
        ap.error("unknown mode(s) %s: pick from none, background, sync" % ", ".join(unknown))
    modes += ["bg-baseline"] if a.baseline else []
    root = tempfile.mkdtemp(prefix="tandem-ckpt-bench-")
    times = {m: [] for m in modes}
    cpus = {m: [] for m in modes}
    load = [os.getloadavg()[0]]
    for i in range(a.reps):
        for mode in modes:
            wall, cpu = run_once(a, mode, root, i)
            times[mode].append(wall)
            cpus[mode].append(cpu)
            load.append(os.getloadavg()[0])
    base = statistics.median(times["none"])
    cpu_base = statistics.median(cpus["none"])
    print("--sync %s%s, %s, %s, %d workers x batch %d, checkpoint every %d steps, "
          "%d timed steps x %d reps"
          % (a.sync, " (%d shard servers)" % a.shard_servers if strategy_args(a) else "",
             a.model, a.optimizer, a.workers, a.batch_size, a.every, a.steps - a.warmup, a.reps))
    print("load average (1 min) over the runs: %.1f-%.1f" % (min(load), max(load)))
    print("%-11s %14s %8s %13s %8s  %s" % ("mode", "median ms/step", "vs none", "cpu ms/step",
                                           "vs none", "runs (ms/step wall/cpu)"))
    for mode in modes:
        m = statistics.median(times[mode])
        c = statistics.median(cpus[mode])
        print("%-11s %14.1f %+7.1f%% %13.1f %+7.1f%%  %s"
              % (mode, 1e3 * m, 100 * (m / base - 1), 1e3 * c, 100 * (c / cpu_base - 1),
                 " ".join("%.0f/%.0f" % (1e3 * t, 1e3 * u)
                          for t, u in zip(times[mode], cpus[mode]))))
    print("runs in", root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
