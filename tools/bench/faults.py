#!/usr/bin/env python3
"""Fault scenarios on `tandem local`, one table (tools/bench/faults.sh).

Each scenario runs a small job (3 workers, Fashion-MNIST, one epoch of a
small MLP at 50 samples per worker, so that 60,000 divides into global
batches at world 3 and 2), injects one fault when a progress line appears,
and reads the console for when the fault was noticed and when training went
on. Samples lost / repeated come from the workers' --sample_log_dir files:
of each optimizer step only the newest generation that ran it counts (steps
rolled back with a failed generation were re-done), then every sample index
of the epoch should be there exactly once.

Columns: scenario, outcome (survived / refused / clean error / FAILED),
detect_s (fault to the first console line naming it), recover_s (fault to
the first training step after it), redone (optimizer steps some rank had
completed that the job trained again: the "(N steps redone)" of rank 0's
"recovered from [peer] memory at step ...", "resumed from ..." or
"restarted from the initial state ..." line; 0 when the
job never rolled back), path (memory / disk / - : where the state came
from), lost, repeated. "-" where a column does not apply.
"""

import argparse
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

TRAIN_SAMPLES = 60000


def read_samples(directory):
    """Per epoch {id: count} over the effective steps (see module doc)."""
    records = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".samples"):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        at = 0
        while at + 32 <= len(data):
            epoch, gen, step, n = struct.unpack_from("<4q", data, at)
            at += 32
            ids = struct.unpack_from("<%dq" % n, data, at)
            at += 8 * n
            records.append((epoch, gen, step, ids))
    newest = {}
    for epoch, gen, step, _ in records:
        newest[step] = max(newest.get(step, 0), gen)
    counts = {}
    for epoch, gen, step, ids in records:
        if gen != newest[step]:
            continue
        c = counts.setdefault(epoch, {})
        for i in ids:
            c[i] = c.get(i, 0) + 1
    return counts


def lost_repeated(directory):
    counts = read_samples(directory)
    if len(counts) != 1:
        return "?", "?"
    c = next(iter(counts.values()))
    lost = sum(1 for i in range(TRAIN_SAMPLES) if i not in c)
    repeated = sum(n - 1 for n in c.values() if n > 1)
    return lost, repeated


def read_pid(run_dir, name):
    try:
        with open(os.path.join(run_dir, name + ".pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return -1


class Run:
    """One `tandem local` run; on_line(line, t, run) may inject faults."""

    def __init__(self, tandem, root, name, extra, samples=True, workers=3):
        self.run_dir = os.path.join(root, name)
        self.samples = os.path.join(root, name + "-samples")
        os.makedirs(self.samples, exist_ok=True)
        self.args = [tandem, "local", "--workers=%d" % workers, "--model=mlp:784,128,10", "--epochs=1",
                     "--batch-size=50", "--log-every=10", "--checkpoint-every=10",
                     "--run-dir=" + self.run_dir] + extra
        if samples:
            self.args.append("--worker-arg=--sample_log_dir=" + self.samples)
        self.lines = []
        self.code = None

    def go(self, on_line, timeout=300):
        p = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, bufsize=1)
        start = time.monotonic()
        for line in p.stdout:
            t = time.monotonic()
            line = line.rstrip("\n")
            self.lines.append((t, line))
            on_line(line, t, self)
            if t - start > timeout:
                p.kill()
        self.stderr = p.stderr.read()
        self.code = p.wait()
        self.end = time.monotonic()
        return self

    def first(self, pred, after=0.0):
        for t, line in self.lines:
            if t >= after and pred(line):
                return t
        return None


REDONE = re.compile(
    r"^(recovered from memory|recovered from peer memory|resumed from|"
    r"restarted from the initial state) .*?\((\d+) steps redone\)")


def redone_and_path(run):
    """Steps redone and the path of the first recovery after the fault."""
    for _, line in run.lines:
        m = REDONE.match(line)
        if m:
            return int(m.group(2)), "memory" if m.group(1).startswith("recovered") else "disk"
    return 0, "-"


def fmt(x):
    return "-" if x is None else ("%.1f" % x if isinstance(x, float) else str(x))


def hung_worker(tandem, root):
    state = {}

    def on_line(line, t, run):
        if "t0" not in state and line.startswith("step 20/"):
            os.kill(read_pid(run.run_dir, "worker-2"), signal.SIGSTOP)
            state["t0"] = time.monotonic()

    r = Run(tandem, root, "hung", ["--keep-going", "--min-workers=2", "--settle-seconds=2",
                                   "--worker-arg=--collective_timeout_seconds=600"]).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: "expelled worker-2" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step ") and " world 2 " in l, t0 or 0)
    lost, rep = lost_repeated(r.samples)
    ok = r.code == 0 and detect is not None and recover is not None
    return ("hung worker (SIGSTOP 1 of 3, --keep_going)", "survived" if ok else "FAILED",
            detect - t0 if ok else None, recover - t0 if ok else None) + redone_and_path(r) + (
                lost, rep)


def killed_worker(tandem, root, sync):
    """SIGKILL 1 of 3 at step 25 (between checkpoints every 10): allreduce and
    compressed continue from memory (0 redone), zero1/2/3 from the ring
    neighbours' replicas of step 25 (every --replica_every=5 steps: <= 5
    redone)."""
    state = {}

    def on_line(line, t, run):
        if "t0" not in state and line.startswith("step 25/"):
            os.kill(read_pid(run.run_dir, "worker-2"), signal.SIGKILL)
            state["t0"] = time.monotonic()

    r = Run(tandem, root, "killed-" + sync, ["--keep-going", "--min-workers=2", "--log-every=5",
                                            "--settle-seconds=2", "--sync=" + sync]).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: "re-joining" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step ") and " world 2 " in l, t0 or 0)
    lost, rep = lost_repeated(r.samples)
    ok = r.code == 0 and detect is not None and recover is not None
    return ("killed worker (SIGKILL 1 of 3, --sync %s)" % sync, "survived" if ok else "FAILED",
            detect - t0 if ok else None, recover - t0 if ok else None) + redone_and_path(r) + (
                lost, rep)


def killed_shard_server(tandem, root, sync):
    """SIGKILL shard server 1 of 2 at step 25: tandem local restarts it empty;
    its range is rebuilt from the replica on server 0 (issue 34 item 3)."""
    state = {}

    def on_line(line, t, run):
        if "t0" not in state and line.startswith("step 25/"):
            os.kill(read_pid(run.run_dir, "shard-1"), signal.SIGKILL)
            state["t0"] = time.monotonic()

    r = Run(tandem, root, "shard-" + sync, ["--keep-going", "--log-every=5", "--shard-servers=2",
                                           "--sync=" + sync]).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: "re-joining" in l, t0 or 0)
    rejoined = detect and r.first(lambda l: REDONE.match(l) is not None, detect)
    recover = rejoined and r.first(lambda l: l.startswith("step "), rejoined)
    lost, rep = lost_repeated(r.samples)
    ok = r.code == 0 and detect is not None and recover is not None
    return ("killed shard server (SIGKILL 1 of 2, --sync %s)" % sync, "survived" if ok else "FAILED",
            detect - t0 if ok else None, recover - t0 if ok else None) + redone_and_path(r) + (
                lost, rep)


def service_restart(tandem, root, service):
    state = {}

    def on_line(line, t, run):
        if "t0" not in state and line.startswith("step 100/"):
            os.kill(read_pid(run.run_dir, service), signal.SIGKILL)
            state["t0"] = time.monotonic()

    r = Run(tandem, root, service, []).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: l.startswith("tandem local: " + service) and "restarting" in l,
                     t0 or 0)
    back = r.first(lambda l: service + " is back" in l, t0 or 0)
    stepped = back and r.first(lambda l: l.startswith("step "), back)
    lost, rep = lost_repeated(r.samples)
    rejoined = any("re-joining" in l for _, l in r.lines)
    ok = r.code == 0 and back is not None and not rejoined
    return ("%s restart (SIGKILL)" % service, "survived" if ok else "FAILED",
            detect - t0 if detect else None, (stepped or back) - t0 if back else None) + \
        redone_and_path(r) + (lost, rep)


def restarts_exhausted(tandem, root):
    state = {"kills": 0}

    def on_line(line, t, run):
        if (state["kills"] == 0 and line.startswith("step 20/")) or (
                state["kills"] == 1 and "coordinator is back" in line):
            os.kill(read_pid(run.run_dir, "coordinator"), signal.SIGKILL)
            state["kills"] += 1
            state["t"] = time.monotonic()

    r = Run(tandem, root, "exhausted", ["--max-restarts=1"], samples=False).go(on_line)
    ok = r.code == 1 and "restart(s) of --max_restarts are used up" in r.stderr
    # detect: from the last kill to tandem local's exit with the error.
    return ("--max_restarts used up", "clean error" if ok else "FAILED",
            (r.end - state["t"]) if ok else None, None, "-", "-", "-", "-")


def refused_status(tandem, root, name, label, extra, status_args, env, refused):
    """A 2-epoch run; at step 100 `tandem status` with `status_args` (run_dir
    substituted) and `env` must be refused: refused(returncode, stderr)."""
    state = {}

    def on_line(line, t, run):
        if "done" in state or not line.startswith("step 100/"):
            return
        state["done"] = True
        coordinator = None
        for _, l in run.lines:
            if l.startswith("coordinator: "):
                coordinator = l.split()[1]
        t0 = time.monotonic()
        p = subprocess.run([tandem, "status", "--coordinator=" + coordinator, "--job_id=local"] +
                           [a.format(run_dir=run.run_dir) for a in status_args],
                           capture_output=True, text=True, env=env)
        state["refused"] = refused(p.returncode, p.stderr)
        state["dt"] = time.monotonic() - t0

    r = Run(tandem, root, name, ["--epochs=2"] + extra, samples=False).go(on_line)
    ok = r.code == 0 and state.get("refused")
    return (label, "refused" if ok else "FAILED", state.get("dt"), None, "-", "-", "-", "-")


def no_token(tandem, root):
    return refused_status(tandem, root, "token", "RPC without the job token", [], [],
                          dict(os.environ, TANDEM_TOKEN=""),
                          lambda code, err: code == 1 and "need its token" in err)


def no_certificate(tandem, root):
    """A --tls run; `tandem status` with the token but in plain text."""
    return refused_status(tandem, root, "tls", "RPC without a certificate (--tls)", ["--tls"],
                          ["--timeout_seconds=5", "--token_file={run_dir}/token"], None,
                          lambda code, err: code == 1)


def scale_up(tandem, root):
    """2 workers with room for 3; `tandem add-worker` at step 20."""
    state = {}

    def on_line(line, t, run):
        if "t0" not in state and line.startswith("step 20/"):
            state["adder"] = subprocess.Popen([tandem, "add-worker", "--run_dir=" + run.run_dir],
                                              stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL)
            state["t0"] = time.monotonic()

    # 60,000 divides into global batches of 100 and 150; the new world
    # continues from the sample position of the step where the job grew.
    r = Run(tandem, root, "scale-up", ["--max-workers=3"], workers=2).go(on_line)
    t0 = state.get("t0")
    added_ok = "adder" in state and state["adder"].wait(timeout=120) == 0
    detect = r.first(lambda l: "growing the job" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step ") and " world 3 " in l, t0 or 0)
    lost, rep = lost_repeated(r.samples)
    ok = r.code == 0 and added_ok and recover is not None
    return ("scale up (tandem add-worker, 2 -> 3)", "survived" if ok else "FAILED",
            detect - t0 if ok and detect else None, recover - t0 if ok else None) + \
        redone_and_path(r) + (lost, rep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--only", default="", help="comma-separated scenario numbers (1-13)")
    a = ap.parse_args()
    root = a.out or tempfile.mkdtemp(prefix="tandem-faults-")
    scenarios = [
        lambda: hung_worker(a.tandem, root),
        lambda: service_restart(a.tandem, root, "coordinator"),
        lambda: service_restart(a.tandem, root, "dataserver"),
        lambda: restarts_exhausted(a.tandem, root),
        lambda: no_token(a.tandem, root),
        lambda: scale_up(a.tandem, root),
        lambda: no_certificate(a.tandem, root),
        lambda: killed_worker(a.tandem, root, "allreduce"),
        lambda: killed_worker(a.tandem, root, "compressed"),
        lambda: killed_worker(a.tandem, root, "zero1"),
        lambda: killed_worker(a.tandem, root, "zero2"),
        lambda: killed_worker(a.tandem, root, "zero3"),
        lambda: killed_shard_server(a.tandem, root, "ps"),
    ]
    only = {int(x) for x in a.only.split(",") if x}
    rows = []
    for i, s in enumerate(scenarios, 1):
        if only and i not in only:
            continue
        try:
            rows.append(s())
        except Exception as e:  # a broken scenario is a row, not the end of the table
            rows.append(("scenario %d" % i, "FAILED (%s)" % e, None, None, "-", "-", "-", "-"))
    head = ("scenario", "outcome", "detect_s", "recover_s", "redone", "path", "lost", "repeated")
    table = [head] + [tuple(fmt(x) for x in r) for r in rows]
    widths = [max(len(r[c]) for r in table) for c in range(len(head))]
    for r in table:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    print("runs in", root)
    return 0 if all(not r[1].startswith("FAILED") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
