#!/usr/bin/env python3
"""Every registered sync strategy x link rate x node layout, side by side.

Driven by strategies.sh (see there for usage). For each variant (a strategy
from `tandem local --help`, and for allreduce hier=0 / hier=1 once the help
lists a `hier` key), each link rate and each layout NODESxWORKERS_PER_NODE,
runs `tandem local --nodes N --workers-per-node K --link RATE` for a fixed
number of steps and reads:
  step ms, samples/s  - rank 0's progress lines (the first one, warm-up, left out)
  link bytes / step   - the run's `links:` line (tc class counters on the
                        simulated node links), divided by the steps
Test accuracy is measured once per variant, after a fixed number of epochs
on the first layout with more than one node at the fastest rate (it does
not depend on the link). Every number is also given as a ratio to plain ring
allreduce (allreduce, hier=0 when hier exists) in the same rate and layout.
ps and hybrid run with --shard_servers = nodes (each server a node of its
own, its link shaped like the workers'; its bytes are in the total). A run
that fails is reported as failed (with its last message) and the rest go on. Writes strategies.json and strategies.png into the output directory.
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_cpu  # noqa: E402 (beside this file)


def registered_strategies(tandem):
    """[(name, [keys])] from `tandem local --help`'s strategy list."""
    text = subprocess.run([tandem, "local", "--help"], capture_output=True, text=True,
                          check=True).stdout
    out, in_list = [], False
    for line in text.splitlines():
        if line.startswith("sync strategies"):
            in_list = True
            continue
        if not in_list:
            continue
        m = re.match(r"^  ([A-Za-z0-9_]+): ", line)
        if m and not line.startswith("  every strategy"):
            out.append((m.group(1), []))
            continue
        k = re.match(r"^      ([A-Za-z0-9_]+)=", line)
        if k and out:
            out[-1][1].append(k.group(1))
    return out


# `compressed` runs as its codecs: int8 with error feedback (also
# hierarchically: fp32 sum inside the node, int8 exchange of node shares);
# top-k 1% and threshold with their defaults (issue 33: warm-up 200 dense
# steps, momentum correction without masking) and top-k 1% as it was before
# those defaults (plain error feedback); PowerSGD rank 4 (its defaults:
# 10 dense steps, error feedback). The fp16 wire is `allreduce wire=fp16`.
COMPRESSED = [("compressed int8+EF", "codec=int8"),
              ("compressed int8+EF hier=1", "codec=int8,hier=1"),
              ("compressed topk", "codec=topk,k=0.01"),
              ("compressed topk plain-EF", "codec=topk,k=0.01,warmup_steps=0,momentum_correction=0"),
              ("compressed threshold", "codec=threshold,density=0.01"),
              ("compressed powersgd r4", "codec=powersgd,rank=4")]
# The two rings every codec is compared with (a column each).
FP32_RING = "allreduce hier=0"
FP16_RING = "allreduce wire=fp16"


def variants(strategies):
    """[(label, sync, sync_opt)]: allreduce is split by hier when it has the key,
    compressed into its codecs."""
    out = []
    for name, keys in strategies:
        if name == "allreduce" and "hier" in keys:
            out.append(("allreduce hier=0", name, "hier=0"))
            out.append(("allreduce hier=1", name, "hier=1"))
            if "wire" in keys:
                # The fair baseline (issue 33): fp16 buckets, fp32 sums.
                out.append((FP16_RING, name, "wire=fp16"))
        elif name == "compressed":
            out.extend((label, name, opt) for label, opt in COMPRESSED)
        elif name == "hybrid" and "compress" in keys:
            # Issue 12's row (fp32 pushes) and issue 13 item 5 (int8 pushes);
            # apply=chunk lets each chunk's pull overlap the other chunks'
            # pushes (apply=step: all pushes, then all pulls).
            out.append(("hybrid", name, ""))
            if "replicate" in keys:
                # Replication off: with >= 2 servers each server's range
                # otherwise also crosses its link to the next server.
                out.append(("hybrid replicate=0", name, "replicate=0"))
            if "pull_streams" in keys:
                # Issue 33: small chunks fill and drain the pipeline sooner
                # (pull lanes follow: 8 per server at 0.0625), with and
                # without the servers' replicas.
                out.append(("hybrid chunk_mb=0.0625", name, "chunk_mb=0.0625"))
                if "replicate" in keys:
                    out.append(("hybrid chunk_mb=0.0625 replicate=0", name,
                                "chunk_mb=0.0625,replicate=0"))
            if "ring_share" in keys:
                # Issue 33: a share of the vector by a cross-node ring, the
                # rest through the servers (auto: 0 with a server per node).
                out.append(("hybrid ring_share=auto", name, "ring_share=auto"))
            out.append(("hybrid int8+EF", name, "compress=int8"))
            if "apply" in keys:
                out.append(("hybrid apply=chunk", name, "apply=chunk"))
                out.append(("hybrid int8+EF apply=chunk", name, "compress=int8,apply=chunk"))
        elif name == "zero3" and "release" in keys:
            # release=lazy (MADV_FREE, the default) beside release=now
            # (MADV_DONTNEED: every gather re-faults its pages).
            out.append(("zero3", name, ""))
            out.append(("zero3 release=now", name, "release=now"))
            if "group_mb" in keys:
                # Every layer gathered alone (before issue 33's groups).
                out.append(("zero3 group_mb=0", name, "group_mb=0"))
        else:
            out.append((name, name, ""))
        if name in SHARD_STRATEGIES and "replicate" in keys:
            # Shard-server replicas are on by default; the row without them
            # shows what they cost on the servers' links (issue 34 item 3).
            out.append((name + " replicate=0", name, "replicate=0"))
    # hybrid's own list already has "hybrid replicate=0": each label once
    # (a repeat ran its configuration twice per round).
    return [v for i, v in enumerate(out) if v[0] not in {w[0] for w in out[:i]}]


# Strategies that step on shard servers: run with --shard_servers = nodes.
SHARD_STRATEGIES = ("ps", "hybrid")
STEP = re.compile(r"^step (\d+)/(\d+) .* (samples|tokens)/s (\d+(?:\.\d+)?) ms/step (\d+(?:\.\d+)?) ")
LINKS = re.compile(r"^links: bytes sent to other nodes: .*; total (\d+)")
LINK_NODES = re.compile(r"^links: bytes sent to other nodes: (.*); total \d+")
RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)bit$")


def rate_bits_per_s(rate):
    """'100mbit' -> 1e8 (tc's units: k/m/g = 1e3/1e6/1e9 bit/s), or None."""
    m = RATE.match(rate)
    return float(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else None


def link_bytes_by_node(out):
    """{'node-1': bytes, ..., 'shard-0': bytes} from the run's `links:` line."""
    found = {}
    for m in map(LINK_NODES.match, out.splitlines()):
        if m:
            found = {k: int(v) for k, v in (x.strip().rsplit(" ", 1) for x in m.group(1).split(","))}
    return found


def busy_fractions(by_node, rate, steps, step_ms):
    """How busy each link was while the job stepped: bytes the node sent /
    (rate x steps x step ms), for the shard servers' links ('server') and
    the workers' nodes ('worker'), each the mean over those links. The
    counters span the whole run (initialisation and the final evaluation
    too: a slight over-count); the time is the steps' (mean step ms x steps)."""
    bps = rate_bits_per_s(rate)
    if not by_node or not bps or not step_ms:
        return None
    window = bps / 8 * steps * step_ms / 1000
    out = {}
    for kind, prefix in (("server", "shard-"), ("worker", "node-")):
        xs = [v for k, v in by_node.items() if k.startswith(prefix)]
        if xs:
            out[kind] = sum(xs) / len(xs) / window
    return out
ACC = re.compile(r"^epoch (\d+) test accuracy (\d+(?:\.\d+)?)")
NETWORK = re.compile(r"^network: (.*)")


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


def others_running(samples=20, every_s=0.01):
    """Threads other processes keep runnable, sampled before a run starts
    (/proc/stat procs_running, this sampler itself left out): the
    competition the run's processes will share the cores with."""
    seen = []
    for _ in range(samples):
        try:
            with open("/proc/stat") as f:
                for line in f:
                    if line.startswith("procs_running"):
                        seen.append(int(line.split()[1]) - 1)
        except (OSError, ValueError):
            return None
        time.sleep(every_s)
    return sum(seen) / len(seen) if seen else None


def run_tandem(tandem, args, run_dir, timeout, window=()):
    """Runs `tandem local` (args) in `run_dir`. `window`: two step numbers
    the job logs; the job's CPU per step between them by process role
    (job_cpu.py: the steady state) is returned in host["cpu_by_role"]."""
    # A run directory keeps the coordinator's state; one left by an earlier
    # run of this bench would be resumed (and refused: its job has finished).
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [tandem, "local", "--run_dir=" + run_dir] + args
    running = others_running()
    t0 = time.time()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = job_cpu.host_busy_s()
    rc, out, err, snaps = job_cpu.run_watching(cmd, run_dir, window, timeout)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    busy1 = job_cpu.host_busy_s()
    # The whole host's busy CPU over the run (this job's and every other
    # process's) and the load average at its end: the load it ran under.
    host = {"cpu_s": busy1 - busy0 if busy0 is not None and busy1 is not None else None,
            "load": load_average(), "others_running": running}
    if window and all(w in snaps for w in window):
        host["cpu_by_role"] = job_cpu.per_step_by_role(
            snaps[window[0]]["procs"], snaps[window[1]]["procs"], window[1] - window[0])
    return rc, out, err, time.time() - t0, cmd, cpu, host


MEMORY = re.compile(r'^tandem_sync_memory_bytes\{[^}]*kind="(\w+)"[^}]*\} (\S+)')


def worker_memory(run_dir):
    """worker-0's tandem_sync_memory_bytes by kind, from the metrics file the
    worker wrote as it exited (RUN_DIR/metrics/worker-0.prom), or None."""
    try:
        with open(os.path.join(run_dir, "metrics", "worker-0.prom")) as f:
            kinds = {m.group(1): float(m.group(2)) for m in map(MEMORY.match, f) if m}
    except OSError:
        return None
    return kinds or None


def parse(out):
    steps = [(int(m.group(1)), float(m.group(4)), float(m.group(5)))
             for m in map(STEP.match, out.splitlines()) if m]
    links = [int(m.group(1)) for m in map(LINKS.match, out.splitlines()) if m]
    acc = [float(m.group(2)) for m in map(ACC.match, out.splitlines()) if m]
    net = [m.group(1) for m in map(NETWORK.match, out.splitlines()) if m]
    return steps, (links[-1] if links else None), (acc[-1] if acc else None), (net[0] if net else "")


def median_run(rs):
    """One configuration's runs -> the run with the median step time (the
    lower middle for an even count), carrying every run's step ms; a
    configuration with a failed run is reported failed (its first error)."""
    failed = [r for r in rs if not r["ok"]]
    if failed:
        return failed[0]
    ordered = sorted(rs, key=lambda r: r["step_ms"])
    r = dict(ordered[(len(ordered) - 1) // 2])
    r["step_ms_runs"] = [x["step_ms"] for x in rs]
    return r


def last_error(rc, out, err):
    lines = [l for l in (err + "\n" + out).splitlines() if l.strip()]
    msg = lines[-1] if lines else "exit %d" % rc
    return msg[:200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="mlp:784,256,10")
    ap.add_argument("--dataset", default="", help="tandem local --dataset (default: its own)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32, help="per worker")
    ap.add_argument("--epochs", type=int, default=1, help="for the accuracy runs")
    ap.add_argument("--rates", default="10gbit,1gbit,100mbit")
    ap.add_argument("--layouts", default="1x4,2x2,4x1")
    ap.add_argument("--only", default="", help="comma-separated variant labels to keep")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration (median shown)")
    ap.add_argument("--servers", default="nodes",
                    help="ps/hybrid shard-server counts, comma-separated: 'nodes' (one per node) "
                         "or a number; a number runs as '<variant> sN'")
    ap.add_argument("--before", default="",
                    help="another tandem binary (e.g. main's, copied with its service binaries "
                         "beside it): every ps / hybrid configuration also runs with it, "
                         "labelled '<variant> before', in the same rounds")
    ap.add_argument("--before_syncs", default=",".join(SHARD_STRATEGIES),
                    help="the strategies --before runs with the other binary (comma-separated; "
                         "default ps,hybrid; e.g. allreduce,zero2,zero3)")
    a = ap.parse_args()
    if a.repeat < 1:
        sys.exit("strategies.sh: --repeat must be at least 1, got %d" % a.repeat)
    os.makedirs(a.out, exist_ok=True)
    rates = [r for r in a.rates.split(",") if r]
    layouts = [tuple(int(x) for x in l.split("x")) for l in a.layouts.split(",") if l]
    vs = variants(registered_strategies(a.tandem))
    if a.only:
        keep = set(a.only.split(","))
        vs = [v for v in vs if v[0] in keep]
    dataset = ["--dataset=" + a.dataset] if a.dataset else []
    common = dataset + ["--model=" + a.model, "--epochs=1", "--batch_size=%d" % a.batch,
              "--lr_scaling=none", "--seed=1", "--checkpoint_every=0"]
    server_specs = [x for x in a.servers.split(",") if x]
    for x in server_specs:
        if x != "nodes" and not x.isdigit():
            sys.exit("strategies.sh: --servers takes 'nodes' or numbers, got '%s'" % x)
    # ps / hybrid once per server count ('nodes': one per node, the label
    # unchanged; a number N: '<label> sN').
    # --before: ps / hybrid also with the other binary, '<label> before'.
    before_syncs = [x for x in a.before_syncs.split(",") if x]
    expanded = []
    for label, sync, opt in vs:
        specs = server_specs if sync in SHARD_STRATEGIES else ["nodes"]
        binaries = [("", a.tandem)] + ([(" before", a.before)] if a.before and sync in before_syncs else [])
        for x in specs:
            for suffix, binary in binaries:
                expanded.append(((label if x == "nodes" else "%s s%s" % (label, x)) + suffix,
                                 sync, opt, x, binary))
    configs = [(label, sync, opt, rate, nodes, per, srv, binary)
               for label, sync, opt, srv, binary in expanded
               for rate in rates for nodes, per in layouts]
    runs, header = {}, ""
    # --repeat R: every configuration runs R times, round-robin (one round of
    # all configurations, then the next), so slow drifts in the machine's
    # load spread over all of them; the table shows the median run.
    for rep in range(a.repeat):
        for label, sync, opt, rate, nodes, per, srv, binary in configs:
            name = "%s_%s_%dx%d" % (label.replace(" ", "_").replace("=", ""), rate, nodes, per)
            sync_args = ["--sync=" + sync] + (["--sync_opt=" + opt] if opt else [])
            # ps / hybrid: one shard server per node, each a node of its own.
            servers = (["--shard_servers=%s" % (nodes if srv == "nodes" else srv)]
                       if sync in SHARD_STRATEGIES else [])
            args = common + sync_args + servers + ["--nodes=%d" % nodes, "--workers_per_node=%d" % per,
                                         "--link=" + rate, "--max_steps=%d" % a.steps,
                                         "--log_every=%d" % max(1, a.steps // 5)]
            every = max(1, a.steps // 5)
            window = (every, a.steps - every) if a.steps - every > every else ()
            rc, out, err, wall, cmd, cpu, host = run_tandem(binary, args,
                                                      os.path.join(a.out, "runs", name), a.timeout,
                                                      window)
            if "cannot create a network namespace" in err:
                sys.exit("strategies.sh: " + err.strip().splitlines()[-1] +
                         "\n(simulated nodes need root: run it as root)")
            steps, link_bytes, _, net = parse(out)
            by_node = link_bytes_by_node(out)
            if nodes > 1 and not header:
                header = re.sub(r"each node's link \S+", "each node's link as listed", net)
            r = {"variant": label, "sync": sync, "sync_opt": opt, "rate": rate,
                 "layout": "%dx%d" % (nodes, per), "nodes": nodes, "workers_per_node": per,
                 "steps": a.steps, "wall_s": round(wall, 2), "ok": rc == 0 and bool(steps),
                 "servers": (nodes if srv == "nodes" else int(srv)) if sync in SHARD_STRATEGIES else 0,
                 "tandem": binary}
            if r["ok"]:
                body = steps[1:] or steps
                r["step_ms"] = sum(s[2] for s in body) / len(body)
                r["samples_per_s"] = sum(s[1] for s in body) / len(body)
                r["link_bytes_per_step"] = (link_bytes / a.steps) if link_bytes is not None else None
                r["link_busy"] = busy_fractions(by_node, rate, a.steps, r["step_ms"])
                # CPU seconds of the whole job (every process tandem local
                # waited for, start-up and evaluation included) per step:
                # the per-CPU-second measure for a loaded machine.
                r["cpu_ms_per_step"] = 1000 * cpu / a.steps
                # The host's busy CPU over the same run (every process's)
                # and its load average: this job's share of the cores.
                if host["cpu_s"] is not None:
                    r["host_cpu_ms_per_step"] = 1000 * host["cpu_s"] / a.steps
                r["load"] = host["load"]
                r["others_running"] = host["others_running"]
                # The steady state's CPU per step by role (worker, shard,
                # coordinator, dataserver), start-up and teardown left out.
                if "cpu_by_role" in host:
                    r["cpu_ms_per_step_by_role"] = {
                        k: 1000 * v for k, v in host["cpu_by_role"].items()}
                    r["cpu_window"] = list(window)
                mem = worker_memory(os.path.join(a.out, "runs", name))
                r["memory_bytes"] = mem
                r["memory_mib"] = sum(mem.values()) / 2**20 if mem else None
            else:
                r["error"] = last_error(rc, out, err)
            runs.setdefault((label, rate, nodes, per), []).append(r)
            print("  %-22s %-8s %-4s %s%s" % (label, rate, r["layout"],
                  "%.1f ms/step" % r["step_ms"] if r["ok"] else "FAILED: " + r["error"],
                  " (run %d/%d)" % (rep + 1, a.repeat) if a.repeat > 1 else ""),
                  file=sys.stderr, flush=True)
    results = [median_run(runs[(c[0], c[3], c[4], c[5])]) for c in configs]
    # Accuracy: once per variant, full epochs, first multi-node layout, fastest rate.
    accuracy = {}
    acc_layout = next((l for l in layouts if l[0] > 1), layouts[0])
    if not a.no_accuracy:
        for label, sync, opt in vs:
            sync_args = ["--sync=" + sync] + (["--sync_opt=" + opt] if opt else [])
            args = dataset + ["--model=" + a.model, "--epochs=%d" % a.epochs, "--batch_size=%d" % a.batch,
                    "--lr_scaling=none", "--seed=1", "--checkpoint_every=0", "--log_every=1000000",
                    "--nodes=%d" % acc_layout[0], "--workers_per_node=%d" % acc_layout[1],
                    "--link=" + rates[0]] + sync_args
            if sync in SHARD_STRATEGIES:
                args.append("--shard_servers=%d" % acc_layout[0])
            name = "accuracy_" + label.replace(" ", "_").replace("=", "")
            rc, out, err, wall, _, _, _ = run_tandem(a.tandem, args, os.path.join(a.out, "runs", name), a.timeout)
            _, _, acc, _ = parse(out)
            accuracy[label] = acc if rc == 0 else None
            print("  accuracy %-22s %s" % (label, acc if rc == 0 else "FAILED: " + last_error(rc, out, err)),
                  file=sys.stderr, flush=True)
    for r in results:
        r["test_accuracy"] = accuracy.get(r["variant"])
    # Ratios to plain ring in the same rate and layout.
    base_label = "allreduce hier=0" if any(v[0] == "allreduce hier=0" for v in vs) else "allreduce"
    base = {(r["rate"], r["layout"]): r for r in results if r["variant"] == base_label and r["ok"]}
    for r in results:
        b = base.get((r["rate"], r["layout"]))
        for k in ("step_ms", "samples_per_s", "link_bytes_per_step", "test_accuracy"):
            v, bv = r.get(k), (b or {}).get(k)
            r[k + "_vs_ring"] = (v / bv) if (v is not None and bv) else None
    # And to the fp16 ring (the fair baseline), when it ran.
    fp16 = {(r["rate"], r["layout"]): r for r in results if r["variant"] == FP16_RING and r["ok"]}
    for r in results:
        b = fp16.get((r["rate"], r["layout"]))
        for k in ("step_ms", "test_accuracy"):
            v, bv = r.get(k), (b or {}).get(k)
            r[k + "_vs_fp16"] = (v / bv) if (v is not None and bv) else None
    meta = {"model": a.model, "steps": a.steps, "batch_per_worker": a.batch, "epochs_for_accuracy": a.epochs,
            "accuracy_layout": "%dx%d" % acc_layout, "accuracy_rate": rates[0], "baseline": base_label,
            "network": header, "variants": list(dict.fromkeys(e[0] for e in expanded))}
    with open(os.path.join(a.out, "strategies.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print_table(meta, results)
    print_compression_checks(meta, results)
    print_hybrid_checks(meta, results)
    print_zero_checks(meta, results)
    chart(a.out, meta, results, rates, ["%dx%d" % l for l in layouts])


def fmt(v, spec):
    return "-" if v is None else spec % v


def memory_cell(mem):
    if not mem:
        return "-"
    mib = lambda k: mem.get(k, 0) / 2**20
    return "%.1f (%.1f/%.1f/%.1f/%.1f)" % (sum(mem.values()) / 2**20, mib("params"), mib("grads"),
                                           mib("optimizer"), mib("staging"))


def print_table(meta, results):
    print("tools/bench/strategies.sh: model %s, %d steps, batch %d per worker; accuracy after %d epoch(s) on %s at %s"
          % (meta["model"], meta["steps"], meta["batch_per_worker"], meta["epochs_for_accuracy"],
             meta["accuracy_layout"], meta["accuracy_rate"]))
    print("network: " + meta["network"])
    print("layout = nodes x workers per node; link bytes = bytes that left all nodes for other nodes "
          "(tc class counters) / steps; (x) = ratio to %s" % meta["baseline"])
    print("x fp16 = ratio of step ms to %s (the fair baseline: fp16 buckets, fp32 sums)" % FP16_RING)
    cols = "%-26s %-8s %-6s %16s %8s %18s %22s %16s %26s"
    print(cols % ("strategy", "link", "layout", "step ms (x)", "x fp16", "samples/s (x)",
                  "link bytes/step (x)", "test acc (x)", "MiB/worker (p/g/opt/stg)"))
    for r in results:
        if not r["ok"]:
            print("%-26s %-8s %-6s FAILED: %s" % (r["variant"], r["rate"], r["layout"], r["error"]))
            continue
        print(cols % (r["variant"], r["rate"], r["layout"],
                      "%s (%s)" % (fmt(r["step_ms"], "%.1f"), fmt(r["step_ms_vs_ring"], "%.2f")),
                      fmt(r.get("step_ms_vs_fp16"), "%.2f"),
                      "%s (%s)" % (fmt(r["samples_per_s"], "%.0f"), fmt(r["samples_per_s_vs_ring"], "%.2f")),
                      "%s (%s)" % (fmt(r["link_bytes_per_step"], "%.0f"), fmt(r["link_bytes_per_step_vs_ring"], "%.2f")),
                      "%s (%s)" % (fmt(r["test_accuracy"], "%.4f"), fmt(r["test_accuracy_vs_ring"], "%.3f")),
                      memory_cell(r.get("memory_bytes"))))


def print_compression_checks(meta, results):
    """The codecs' targets (issues 13 and 33), for the compressed variants
    that ran, each against both rings: speed-up = ring step ms / step ms
    (fp32 ring and fp16 ring), accuracy in points against the fp32 ring.
    int8+EF >= 3x the fp32 ring at 1 Gbit/s; top-k / threshold with their
    defaults and PowerSGD rank 4 within 0.5 points; PowerSGD faster than the
    fp16 ring at 100 Mbit/s."""
    rows = [r for r in results if r["variant"].startswith("compressed") and r["ok"]]
    if not rows:
        return
    print("compression: speed-up vs the fp32 ring / vs the fp16 ring (%s); accuracy in points vs %s"
          % (FP16_RING, meta["baseline"]))
    base_acc = next((r["test_accuracy"] for r in results
                     if r["variant"] == meta["baseline"] and r.get("test_accuracy") is not None), None)
    accurate = ("compressed int8+EF", "compressed topk", "compressed threshold", "compressed powersgd")
    for r in rows:
        speed = (1 / r["step_ms_vs_ring"]) if r.get("step_ms_vs_ring") else None
        speed16 = (1 / r["step_ms_vs_fp16"]) if r.get("step_ms_vs_fp16") else None
        acc = r.get("test_accuracy")
        points = (acc - base_acc) * 100 if (acc is not None and base_acc is not None) else None
        verdict = []
        if r["variant"].startswith("compressed int8+EF") and r["rate"] == "1gbit" and speed is not None:
            verdict.append("speed %s (target >= 3x)" % ("ok" if speed >= 3 else "BELOW"))
        if (r["variant"].startswith("compressed powersgd") and r["rate"] == "100mbit"
                and speed16 is not None):
            verdict.append("vs fp16 ring %s (target > 1x)" % ("ok" if speed16 > 1 else "BELOW"))
        if (r["variant"].startswith(accurate) and "plain" not in r["variant"]
                and points is not None):
            verdict.append("accuracy %s (target within 0.5 points)" % ("ok" if points >= -0.5 else "BELOW"))
        print("  %-26s %-8s %-5s speed-up %s / %s, accuracy %s points %s" % (
            r["variant"], r["rate"], r["layout"], fmt(speed, "%.2fx"), fmt(speed16, "%.2fx"),
            fmt(points, "%+.2f"), "; ".join(verdict)))


def print_hybrid_checks(meta, results):
    """ps and hybrid against the rings: speed-up = ring step ms / step ms,
    against the flat ring (issue 33's targets: >= 0.85x with fewer shard
    servers than nodes, >= 1.3x with as many, at every rate) and the
    hierarchical ring; and how busy the links were while stepping
    (busy_fractions: the servers' links, target >= 85%, and the workers'),
    and the job's CPU ms per step beside the flat ring's."""
    rows = [r for r in results if r["sync"] in SHARD_STRATEGIES and r["ok"]]
    if not rows:
        return
    ring = {(r["rate"], r["layout"]): r for r in results if r["variant"] == "allreduce hier=0" and r["ok"]}
    hier = {(r["rate"], r["layout"]): r for r in results if r["variant"] == "allreduce hier=1" and r["ok"]}
    print("ps / hybrid (issue 33): speed-up = ring step ms / step ms; busy = bytes sent / "
          "(rate x steps x step ms), server links / worker links")
    for r in rows:
        key = (r["rate"], r["layout"])
        vs_flat = ring[key]["step_ms"] / r["step_ms"] if key in ring and r.get("step_ms") else None
        vs_hier = hier[key]["step_ms"] / r["step_ms"] if key in hier and r.get("step_ms") else None
        busy = r.get("link_busy") or {}
        verdict = []
        if vs_flat is not None and r.get("servers"):
            target = 1.3 if r["servers"] >= r["nodes"] else 0.85
            verdict.append("flat-ring target >= %.2fx %s" % (target, "ok" if vs_flat >= target else "BELOW"))
        if busy.get("server") is not None:
            verdict.append("server links %s" % ("ok" if busy["server"] >= 0.85 else "BELOW 85%"))
        print("  %-26s %-8s %-5s vs flat ring %s, vs hierarchical ring %s; busy %s / %s; "
              "CPU ms/step %s (flat ring %s); %s" % (
                  r["variant"], r["rate"], r["layout"], fmt(vs_flat, "%.2fx"), fmt(vs_hier, "%.2fx"),
                  fmt(busy.get("server") and 100 * busy["server"], "%.0f%%"),
                  fmt(busy.get("worker") and 100 * busy["worker"], "%.0f%%"),
                  fmt(r.get("cpu_ms_per_step"), "%.0f"),
                  fmt(ring[key].get("cpu_ms_per_step") if key in ring else None, "%.0f"),
                  "; ".join(verdict)))


def two_largest_layers_bytes(model, group_mb=0):
    """Bytes of the two largest layers (weights + bias) of an "mlp:a,b,c"
    spec, or None for other models. group_mb > 0: of the two largest of
    zero3's gather groups instead (common/sync/zero/layer_groups.h:
    consecutive layers until a group holds group_mb MiB, a short last group
    joining the one before)."""
    if not model.startswith("mlp:"):
        return None
    dims = [int(d) for d in model[4:].split(",")]
    groups = []
    for size in ((i + 1) * o for i, o in zip(dims, dims[1:])):
        if groups and group_mb > 0 and groups[-1] * 4 < group_mb * 2**20:
            groups[-1] += size
        else:
            groups.append(size)
    if len(groups) >= 2 and group_mb > 0 and groups[-1] * 4 < group_mb * 2**20:
        last = groups.pop()
        groups[-1] += last
    return 4 * sum(sorted(groups, reverse=True)[:2])


def print_zero_checks(meta, results):
    """Issue 11's table: each zero stage's per-rank memory (worker-0's
    tandem_sync_memory_bytes) against theory derived from allreduce's row in
    the same rate and layout (N = ranks): optimizer state full/N (plus
    padding); zero2/zero3 reduced gradients full/N; zero3 parameters <= full/N
    plus the two largest gather groups. Step time against allreduce (targets:
    zero2 within 10%, zero3 >= 0.6x allreduce's samples/s)."""
    rows = [r for r in results if r["variant"].startswith("zero") and r["ok"]]
    if not rows:
        return
    ring = {(r["rate"], r["layout"]): r for r in results if r["variant"] == meta["baseline"] and r["ok"]}
    mib = lambda b: "-" if b is None else "%.2f" % (b / 2**20)
    print("zero (issue 11): MiB per rank measured / theory (from %s's full-size bytes), step ms vs %s"
          % (meta["baseline"], meta["baseline"]))
    for r in rows:
        base = ring.get((r["rate"], r["layout"]))
        mem, full = r.get("memory_bytes") or {}, (base or {}).get("memory_bytes") or {}
        n = r["nodes"] * r["workers_per_node"]
        cells = []
        if full:
            opt = full.get("optimizer", 0) / n
            cells.append("optimizer %s / %s" % (mib(mem.get("optimizer")), mib(opt)))
            if r["variant"].startswith(("zero2", "zero3")):
                cells.append("grads %s / %s" % (mib(mem.get("grads")), mib(full.get("grads", 0) / n)))
            # zero3 holds two gather groups (group_mb, default 4; every
            # layer alone on one node).
            group_mb = 0 if r["variant"] == "zero3 group_mb=0" or r["nodes"] == 1 else 4
            extra = two_largest_layers_bytes(meta["model"], group_mb)
            if r["variant"].startswith("zero3") and extra is not None:
                cells.append("params %s / <= %s" % (mib(mem.get("params")),
                                                    mib(full.get("params", 0) / n + extra)))
        ratio = (r["step_ms"] / base["step_ms"]) if base and base.get("step_ms") and r.get("step_ms") else None
        verdict = ""
        if r["variant"] == "zero2" and ratio is not None:
            verdict = "; target within 10%% %s" % ("ok" if ratio <= 1.10 else "BELOW")
        if r["variant"] == "zero3" and ratio is not None:
            # Issue 33: zero3 >= 0.6x allreduce's samples/s.
            verdict = "; target >= 0.6x %s" % ("ok" if ratio <= 1 / 0.6 else "BELOW")
        print("  %-18s %-8s %-5s %s; step %s ms (%s)%s" % (
            r["variant"], r["rate"], r["layout"], ", ".join(cells) or "memory -",
            fmt(r.get("step_ms"), "%.1f"), fmt(ratio, "%.2fx"), verdict))


def chart(out_dir, meta, results, rates, layouts):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no chart: python3-matplotlib is missing (tools/setup.sh --bench)", file=sys.stderr)
        return
    variants = meta["variants"]
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for ax, rate in zip(axes[0], rates):
        for vi, v in enumerate(variants):
            ys = []
            for lay in layouts:
                r = next((r for r in results if r["variant"] == v and r["rate"] == rate and r["layout"] == lay), None)
                ys.append(r["step_ms"] if r and r["ok"] else 0)
            ax.bar([i + vi * width for i in range(len(layouts))], ys, width, label=v)
        ax.set_xticks([i + width * (len(variants) - 1) / 2 for i in range(len(layouts))])
        ax.set_xticklabels(layouts)
        ax.set_title("link %s" % rate)
        ax.set_xlabel("nodes x workers per node")
        ax.set_ylabel("ms per step")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("%s, %d steps, batch %d/worker" % (meta["model"], meta["steps"], meta["batch_per_worker"]))
    fig.tight_layout()
    path = os.path.join(out_dir, "strategies.png")
    fig.savefig(path, dpi=100)
    print("wrote %s and %s" % (os.path.join(out_dir, "strategies.json"), path))


if __name__ == "__main__":
    main()
