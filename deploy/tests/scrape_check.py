#!/usr/bin/env python3
"""The e2e side of the metric check, without containers: starts a real
coordinator, data server and two workers (ports 0, Fashion-MNIST), scrapes
every process's /metrics once the workers have stepped, and fails if a
metric the dashboard or the alert rules use is in none of the scrapes.

  scrape_check.py --coordinator=BIN --dataserver=BIN --worker=BIN
                  --promql_check=promql_check.py --promtool=PATH
                  --dashboard=JSON --rules=YML --tmp=DIR

Every wait is bounded (a deadline, polled); every process is killed at the
end. Exit 0 when every metric was scraped, 1 naming the missing ones.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

DATA = "/usr/share/datasets/fashion-mnist"


def wait_for(what, fn, timeout, procs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        for name, p in procs.items():
            if p.poll() is not None and p.returncode != 0:
                raise SystemExit(f"scrape_check: {name} exited {p.returncode} while waiting for {what}")
        time.sleep(0.05)
    raise SystemExit(f"scrape_check: timed out after {timeout} s waiting for {what}")


def port_from(path, pattern):
    def f():
        try:
            m = re.search(pattern, open(path).read())
        except FileNotFoundError:
            return None
        return int(m.group(1)) if m else None
    return f


def scrape(port):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except Exception:
        return ""


def main():
    ap = argparse.ArgumentParser()
    for k in ("coordinator", "dataserver", "worker", "promql_check", "promtool", "dashboard",
              "rules", "tmp"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    if not os.path.exists(DATA + "/train-images-idx3-ubyte.gz"):
        raise SystemExit(f"scrape_check: Fashion-MNIST missing under {DATA}: run tools/setup.sh")
    used = subprocess.run(
        [sys.executable, a.promql_check, "--promtool", a.promtool, "--list-metrics",
         "--dashboard", a.dashboard, "--rules", a.rules],
        check=True, capture_output=True, text=True).stdout.split()
    used = [m for m in used if m.startswith("tandem_")]

    procs = {}
    logs = {}

    def start(name, argv):
        logs[name] = os.path.join(a.tmp, name + ".log")
        procs[name] = subprocess.Popen(argv, stdout=open(logs[name], "w"), stderr=subprocess.STDOUT,
                                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))

    try:
        start("coordinator", [a.coordinator, "--job_id=scrape", "--port=0", "--metrics_port=0",
                              "--port_file=" + os.path.join(a.tmp, "coordinator.port"),
                              "--min_workers=2", "--max_workers=2", "--settle_seconds=0.2",
                              "--heartbeat_ms=500", "--state_dir=" + os.path.join(a.tmp, "state")])
        start("dataserver", [a.dataserver, "--port=0", "--metrics_port=0", "--decode_threads=1",
                             "--port_file=" + os.path.join(a.tmp, "dataserver.port"),
                             f"--dataset=fashion-mnist/train={DATA}/train,fashion-mnist/t10k={DATA}/t10k"])
        cport = wait_for("the coordinator's port", port_from(os.path.join(a.tmp, "coordinator.port"), r"(\d+)"), 60, procs)
        dport = wait_for("the data server's port", port_from(os.path.join(a.tmp, "dataserver.port"), r"(\d+)"), 60, procs)
        metrics = {
            "coordinator": wait_for("the coordinator's metrics port",
                                    port_from(logs["coordinator"], r"metrics port (\d+)"), 30, procs),
            "dataserver": wait_for("the data server's metrics port",
                                   port_from(logs["dataserver"], r"metrics_port=(\d+)"), 30, procs),
        }
        for i in range(2):
            name = f"worker-{i}"
            # Far more steps than the scrape needs: the run is killed once
            # every worker has been scraped after stepping.
            start(name, [a.worker, f"--coordinator=127.0.0.1:{cport}",
                         f"--data_servers=127.0.0.1:{dport}", "--job_id=scrape",
                         f"--worker_id={name}", "--metrics_port=0", "--model=mlp:784,64,10",
                         "--epochs=5", "--log_every=0", "--checkpoint_every=0",
                         "--checkpoint_dir=" + os.path.join(a.tmp, "checkpoints")])
        for i in range(2):
            name = f"worker-{i}"
            metrics[name] = wait_for(f"{name}'s metrics port",
                                     port_from(logs[name], r"metrics port (\d+)"), 60, procs)
        scraped = {}
        # Workers first: the coordinator's per-rank series (tandem_straggler)
        # exist once a worker's heartbeat has carried step times.
        order = sorted(metrics, key=lambda n: not n.startswith("worker"))
        for name in order:
            port = metrics[name]
            if name.startswith("worker"):
                # After the first step every worker metric has a sample.
                text = wait_for(f"a step on {name}",
                                lambda: (lambda t: t if re.search(r"^tandem_step_seconds_count\{[^}]*\} [1-9]", t, re.M) else None)(scrape(port)),
                                120, procs)
            elif name == "coordinator":
                text = wait_for("the coordinator's per-rank straggler series",
                                lambda: (lambda t: t if "tandem_straggler{" in t else None)(scrape(port)),
                                30, procs)
            else:
                text = wait_for(f"{name}'s /metrics", lambda: scrape(port) or None, 30, procs)
            scraped[name] = set(re.findall(r"^(tandem_[a-z0-9_]+)", text, re.M))
            print(f"scraped {name} (port {port}): {len(scraped[name])} tandem_ series names")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    names = set().union(*scraped.values())
    missing = [m for m in used if m not in names]
    if missing:
        print("scrape_check: used by the dashboard or the rules but scraped from no process: "
              + ", ".join(missing), file=sys.stderr)
        return 1
    print(f"scrape_check: all {len(used)} tandem_ metrics the dashboard and the rules use were scraped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
