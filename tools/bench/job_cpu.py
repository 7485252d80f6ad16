"""CPU seconds per step of a running `tandem local` job, by process role.

`tandem local` writes one pid file per process into its run directory
(worker-0.pid, shard-1.pid, coordinator.pid, dataserver.pid, ...). A
snapshot reads each process's CPU clock (user + system over all its
threads, /proc/PID/stat) while the job runs; two snapshots taken when the
workers log two steps give the job's CPU per step in the steady state,
start-up, evaluation and teardown left out, summed by role (the pid file's
name without its -N): the measure that moves least with the other load of
a shared host. Used by strategies.py (every run) and plan_vs_measured.py.
"""
import glob
import os
import re
import subprocess
import tempfile
import threading
import time

STEP_LINE = re.compile(r"^step (\d+)/")


def proc_cpu_s(pid):
    """CPU seconds (user + system) of process `pid`; None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def host_busy_s():
    """CPU seconds every core of this host has been busy (not idle or
    waiting for I/O) since boot, from /proc/stat; None where unreadable."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def snapshot(run_dir):
    """{process name: CPU seconds} for every live process of the job."""
    cpu = {}
    for pf in glob.glob(os.path.join(run_dir, "*.pid")):
        try:
            with open(pf) as f:
                c = proc_cpu_s(int(f.read().split()[0]))
        except (OSError, ValueError, IndexError):
            c = None
        if c is not None:
            cpu[os.path.basename(pf)[:-4]] = c
    return cpu


def per_step_by_role(first, last, steps):
    """Two snapshots `steps` steps apart -> {role: CPU seconds per step},
    over the processes alive in both."""
    roles = {}
    for name, c in last.items():
        if name in first:
            role = re.sub(r"-\d+$", "", name)
            roles[role] = roles.get(role, 0.0) + (c - first[name]) / steps
    return roles


def run_watching(cmd, run_dir, at_steps, timeout):
    """Runs `cmd` (a `tandem local --run_dir=run_dir ...`), snapshotting
    the job's CPU when its output first logs each step in `at_steps`.
    Returns (returncode or -1 on timeout, stdout, stderr, {step: {"procs":
    snapshot, "t": monotonic seconds, "host_busy_s": host_busy_s()}})."""
    snaps = {}
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        out = []
        for line in p.stdout:
            out.append(line)
            m = STEP_LINE.match(line)
            if m and int(m.group(1)) in at_steps and int(m.group(1)) not in snaps:
                snaps[int(m.group(1))] = {"procs": snapshot(run_dir), "t": time.monotonic(),
                                          "host_busy_s": host_busy_s()}
        p.wait()
        timed_out = not timer.is_alive() and p.returncode < 0
        timer.cancel()
        err.seek(0)
        stderr = err.read()
    if timed_out:
        return -1, "".join(out), "timed out after %d s" % timeout, snaps
    return p.returncode, "".join(out), stderr, snaps
