"""Fault scenarios on `tandem local`, one table (tools/bench/faults.sh).

Each scenario runs a small job (3 workers, Fashion-MNIST, one epoch of a
small MLP at 50 samples per worker, so that 60,000 divides into global
batches at world 3 and 2), injects one fault when a progress line appears,
and reads the console for when the fault was noticed and when training went
on. Samples lost / repeated come from the workers' --sample_log_dir files:
of each optimizer step only the newest generation that ran it counts (steps
rolled back with a failed generation were re-done), then every sample index
of the epoch should be there exactly once.

Rows: a worker killed (SIGKILL, 1 of 3) under each strategy family
(allreduce, allreduce over Gloo TCP, hier, compressed, zero1/2/3, ps, hybrid), a worker added
(scale-up 2 -> 3), a shard server killed (ps, 2 servers), a hung worker
(SIGSTOP), a coordinator and a data-server restart, --max_restarts used up,
an RPC without the job's token or without a certificate. Select rows with
--only (numbers or names, comma-separated; --list prints them).

Columns: scenario, outcome (survived / refused / clean error / FAILED),
detect_s (fault to the first console line naming it), recover_s (fault to
the first training step after it), redone (optimizer steps some rank had
completed that the job trained again: the "(N steps redone)" of rank 0's
"recovered from [peer] memory at step ...", "resumed from ..." or
"restarted from the initial state ..." line; 0 when the job never rolled
back), path (memory / peer memory / disk / - : the rank's own memory, the
ring neighbours' replicas of sharded state, a checkpoint), lost, repeated,
once (every sample of the epoch exactly once), acc (final test accuracy), d_acc (acc
minus that of an undisturbed run of the same job, in points; the reference
runs once per configuration, --no-reference skips it). "-" where a column
does not apply.
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
            kind = m.group(1)
            return int(m.group(2)), ("peer memory" if "peer" in kind else
                                     "memory" if kind.startswith("recovered") else "disk")
    return 0, "-"


def signal_at(state, prefix, name, sig):
    """An on_line that sends `sig` to process `name` at the first console
    line starting with `prefix`, and records when in state["t0"]."""

    def on_line(line, t, run):
        if "t0" not in state and line.startswith(prefix):
            os.kill(read_pid(run.run_dir, name), sig)
            state["t0"] = time.monotonic()

    return on_line


def hung_worker(tandem, root):
    state = {}
    on_line = signal_at(state, "step 20/", "worker-2", signal.SIGSTOP)

    extra = ["--keep-going", "--min-workers=2", "--settle-seconds=2",
             "--worker-arg=--collective_timeout_seconds=600"]
    r = Run(tandem, root, "hung", extra).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: "expelled worker-2" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step ") and " world 2 " in l, t0 or 0)
    ok = r.code == 0 and detect is not None and recover is not None
    return row("hung worker (SIGSTOP 1 of 3, --keep_going)", r, ok, t0, detect, recover, extra)


# Strategy families: (label, tandem local flags). hier is allreduce's
# hierarchical form (node-local sum first; one host here, so one node).
FAMILIES = [
    ("allreduce", ["--sync=allreduce"]),
    # Gloo TCP instead of shared memory: what --nodes and multi-host jobs
    # use. No pid to check: the coordinator confirms the death from the
    # dead worker's closed Coordinator.Attach call.
    ("allreduce-gloo", ["--sync=allreduce", "--transport=gloo"]),
    ("hier", ["--sync=allreduce", "--sync-opt=hier=1"]),
    ("compressed", ["--sync=compressed"]),
    ("zero1", ["--sync=zero1"]),
    ("zero2", ["--sync=zero2"]),
    ("zero3", ["--sync=zero3"]),
    ("ps", ["--sync=ps", "--shard-servers=2"]),
    ("hybrid", ["--sync=hybrid", "--shard-servers=2"]),
]


def killed_worker(tandem, root, family, flags):
    """SIGKILL 1 of 3 at step 25 (between checkpoints every 10)."""
    state = {}
    on_line = signal_at(state, "step 25/", "worker-2", signal.SIGKILL)

    extra = ["--keep-going", "--min-workers=2", "--log-every=5", "--settle-seconds=2"] + flags
    r = Run(tandem, root, "killed-" + family, extra).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: "re-joining" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step ") and " world 2 " in l, t0 or 0)
    ok = r.code == 0 and detect is not None and recover is not None
    return row("killed worker (SIGKILL 1 of 3, %s)" % family, r, ok, t0, detect, recover, extra)


def shard_server_lost(tandem, root):
    """ps with 2 shard servers (replicated: the default); shard-1 killed
    (SIGKILL) at step 25."""
    state = {}
    on_line = signal_at(state, "step 25/", "shard-1", signal.SIGKILL)

    extra = ["--keep-going", "--log-every=5", "--sync=ps", "--shard-servers=2"]
    r = Run(tandem, root, "shard-server", extra).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: l.startswith("tandem local: shard-1") or "re-joining" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step "), detect or t0 or 0)
    ok = r.code == 0 and detect is not None and recover is not None
    return row("shard server killed (SIGKILL 1 of 2, ps)", r, ok, t0, detect, recover, extra)


def service_restart(tandem, root, service):
    state = {}
    on_line = signal_at(state, "step 100/", service, signal.SIGKILL)

    r = Run(tandem, root, service, []).go(on_line)
    t0 = state.get("t0")
    detect = r.first(lambda l: l.startswith("tandem local: " + service) and "restarting" in l,
                     t0 or 0)
    back = r.first(lambda l: service + " is back" in l, t0 or 0)
    stepped = back and r.first(lambda l: l.startswith("step "), back)
    rejoined = any("re-joining" in l for _, l in r.lines)
    ok = r.code == 0 and back is not None and not rejoined
    return row("%s restart (SIGKILL)" % service, r, ok, t0, detect, stepped or back, [])


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
    return plain_row("--max_restarts used up", "clean error" if ok else "FAILED",
                     (r.end - state["t"]) if ok else None)


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
    return plain_row(label, "refused" if ok else "FAILED", state.get("dt"))


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
    # 10 ms more per step: the epoch must outlast the new worker's start
    # (seconds on a loaded machine), or the job ends before it grows.
    extra = ["--max-workers=3", "--worker-arg=--debug_extra_compute_ms=10"]
    r = Run(tandem, root, "scale-up", extra, workers=2).go(on_line)
    t0 = state.get("t0")
    added_ok = "adder" in state and state["adder"].wait(timeout=120) == 0
    detect = r.first(lambda l: "growing the job" in l, t0 or 0)
    recover = r.first(lambda l: l.startswith("step ") and " world 3 " in l, t0 or 0)
    ok = r.code == 0 and added_ok and recover is not None
    return row("scale up (tandem add-worker, 2 -> 3)", r, ok, t0, detect, recover, extra, workers=2)


ACCURACY = re.compile(r"^(?:epoch \d+|final \(step \d+\)) test accuracy ([0-9.]+)")


def final_accuracy(run):
    acc = None
    for _, line in run.lines:
        m = ACCURACY.match(line)
        if m:
            acc = float(m.group(1))
    return acc


class References:
    """Undisturbed runs, one per (flags, workers), for the d_acc column."""

    def __init__(self, tandem, root, enabled):
        self.tandem, self.root, self.enabled, self.acc = tandem, root, enabled, {}

    def accuracy(self, flags, workers):
        # Fault-handling flags do not change an undisturbed run's result.
        keep = tuple(f for f in flags if f.startswith(("--sync", "--shard-servers")))
        key = (keep, workers)
        if self.enabled and key not in self.acc:
            name = "reference-%d-%s" % (workers, "-".join(
                re.sub(r"[^a-z0-9]+", "", f) for f in keep) or "allreduce")
            self.acc[key] = final_accuracy(
                Run(self.tandem, self.root, name, list(keep), samples=False,
                    workers=workers).go(lambda *_: None))
        return self.acc.get(key)


REFERENCES = None


def row(label, r, ok, t0, detect, recover, flags, workers=3):
    """A table row for a run that injected a fault at t0 (see module doc)."""
    lost, rep = lost_repeated(r.samples)
    once = "yes" if (lost, rep) == (0, 0) else ("?" if lost == "?" else "no")
    acc = final_accuracy(r)
    ref = REFERENCES.accuracy(flags, workers) if REFERENCES and ok else None
    d_acc = 100.0 * (acc - ref) if acc is not None and ref is not None else None
    return (label, "survived" if ok else "FAILED",
            detect - t0 if ok and detect and t0 else None,
            recover - t0 if ok and recover and t0 else None) + redone_and_path(r) + (
                lost, rep, once, None if acc is None else "%.4f" % acc,
                None if d_acc is None else "%+.2f" % d_acc)


def plain_row(label, outcome, detect):
    return (label, outcome, detect, None) + ("-",) * 7


def fmt(x):
    if x is None:
        return "-"
    return "%.1f" % x if isinstance(x, float) else str(x)


def scenarios(tandem, root):
    """[(name, run)] in table order."""
    out = [("killed-" + f, (lambda f=f, fl=fl: killed_worker(tandem, root, f, fl)))
           for f, fl in FAMILIES]
    out += [
        ("scale-up", lambda: scale_up(tandem, root)),
        ("shard-server", lambda: shard_server_lost(tandem, root)),
        ("hung", lambda: hung_worker(tandem, root)),
        ("coordinator", lambda: service_restart(tandem, root, "coordinator")),
        ("dataserver", lambda: service_restart(tandem, root, "dataserver")),
        ("exhausted", lambda: restarts_exhausted(tandem, root)),
        ("token", lambda: no_token(tandem, root)),
        ("tls", lambda: no_certificate(tandem, root)),
    ]
    return out


def main():
    global REFERENCES
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--only", default="",
                    help="comma-separated scenario numbers or names (see --list)")
    ap.add_argument("--list", action="store_true", help="print the scenarios and exit")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the undisturbed reference runs (d_acc column '-')")
    a = ap.parse_args()
    root = a.out or tempfile.mkdtemp(prefix="tandem-faults-")
    table_of = scenarios(a.tandem, root)
    if a.list:
        for i, (name, _) in enumerate(table_of, 1):
            print(i, name)
        return 0
    names = [name for name, _ in table_of]
    only = set()
    for x in filter(None, a.only.split(",")):
        if x.isdigit() and 1 <= int(x) <= len(names):
            only.add(names[int(x) - 1])
        elif x in names:
            only.add(x)
        else:
            print("faults.sh: unknown scenario '%s'; --list shows them" % x, file=sys.stderr)
            return 2
    REFERENCES = References(a.tandem, root, not a.no_reference)
    rows = []
    for i, (name, s) in enumerate(table_of, 1):
        if only and name not in only:
            continue
        try:
            rows.append(s())
        except Exception as e:  # a broken scenario is a row, not the end of the table
            rows.append(plain_row("%d %s" % (i, name), "FAILED (%s)" % e, None))
        print("  done:", name, "-", rows[-1][1], file=sys.stderr, flush=True)
    head = ("scenario", "outcome", "detect_s", "recover_s", "redone", "path", "lost", "repeated",
            "once", "acc", "d_acc")
    table = [head] + [tuple(fmt(x) for x in r) for r in rows]
    widths = [max(len(r[c]) for r in table) for c in range(len(head))]
    for r in table:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    print("runs in", root)
    return 0 if all(not r[1].startswith("FAILED") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
