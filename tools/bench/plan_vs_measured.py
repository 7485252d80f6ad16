"""Predicted (tandem plan) vs measured (strategies.sh) step time, side by side.

See plan_vs_measured.sh for usage. The measured runs are strategies.sh's
(--no-accuracy); each (strategy, rate, layout) is then planned with
`tandem plan --json --one_host` and the two are printed with the relative
error. A variant tandem plan does not know (or that failed) is listed as such.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_cpu  # noqa: E402 (beside this file)

def dense_warmup(sync, opt):
    """Steps a compressed codec sends dense before compressing (its default
    unless warmup_steps= is given): plan costs the steady state, so a run
    whose measured steps are all in the warm-up is not compared."""
    if sync != "compressed":
        return 0
    kv = dict(x.split("=", 1) for x in opt.split(",") if "=" in x)
    default = {"topk": 200, "threshold": 200, "powersgd": 10}.get(kv.get("codec", "int8"), 0)
    return int(kv.get("warmup_steps", default))


def plan_name(variant, sync, opt):
    """strategies.sh's variant -> the tandem plan strategy it runs as, or None
    where plan has no row for it (hierarchical int8, threshold, hybrid with
    compressed pushes, zero3 with other than its default groups)."""
    kv = dict(x.split("=", 1) for x in opt.split(",") if "=" in x)
    if sync == "allreduce":
        # wire=fp16|bf16 runs as the compressed strategy's dense codec
        # (allreduce_wire), which is what plan costs as compressed:fp16.
        if kv.get("wire", "fp32") != "fp32":
            return "compressed:" + kv["wire"]
        return "hier" if kv.get("hier") == "1" else "allreduce"
    if sync == "compressed":
        codec = kv.get("codec", "int8")
        if kv.get("hier") == "1" or codec == "threshold":
            return None
        if codec == "topk":
            return "compressed:topk=" + kv.get("k", "0.01")
        if codec == "powersgd":
            return "compressed:powersgd=" + kv.get("rank", "4")
        return "compressed:" + codec
    if sync == "hybrid" and kv.get("compress", "none") != "none":
        return None  # plan has no compressed hybrid (and it is lossy)
    if sync == "zero3" and "group_mb" in kv:
        return None  # plan costs zero3's default groups (4 MiB)
    return sync


def parse_profile(text):
    """A `tandem plan` profile's `key = value` lines, in order (comments dropped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            out.append((k, v))
    return out


def mean_profile(before, after):
    """Two profiles' texts -> one whose numbers are the mean of both (a
    number measured in only one of them, or text such as `source`, taken
    from `before`): the load the runs saw lies between the two calibrations."""
    b, a = parse_profile(before), dict(parse_profile(after))
    lines = []
    for k, v in b:
        try:
            x, y = float(v), float(a[k])
            v = str(int((x + y) / 2)) if k == "cores" else repr((x + y) / 2)
        except (KeyError, ValueError):
            pass
        lines.append("%s = %s" % (k, v))
    return "\n".join(lines) + "\n"


def calibrate(tandem, model, batch, path):
    subprocess.run([tandem, "plan", "--calibrate", "--model=" + model, "--batch_size=%d" % batch,
                    "--profile=" + path], check=True, capture_output=True)
    with open(path) as f:
        return f.read()


def job_cpu_per_step(tandem, run_dir, args, first=20, last=100):
    """Runs `tandem local` (args) to step last + 5 (within the first epoch
    at 8x2 and batch 32) and reads every process's CPU (job_cpu.py) when
    the workers log step `first` and step `last`: CPU seconds per step by
    role ('worker', 'shard', ...) in the steady state, start-up and
    teardown left out, and under '_step_s' and '_host_busy' the seconds per
    step over that window and the share of the host's cores busy in it (all
    processes'; None where /proc/stat is unreadable)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [tandem, "local", "--run_dir=" + run_dir, "--max_steps=%d" % (last + 5),
           "--log_every=5"] + args
    rc, out, err, snaps = job_cpu.run_watching(cmd, run_dir, (first, last), 600)
    if rc != 0 or len(snaps) != 2:
        sys.exit("plan_vs_measured: the calibration job failed:\n" +
                 "".join((out + err).splitlines(True)[-20:]))
    a, b = snaps[first], snaps[last]
    roles = job_cpu.per_step_by_role(a["procs"], b["procs"], last - first)
    wall = b["t"] - a["t"]
    busy = (None if a["host_busy_s"] is None or b["host_busy_s"] is None or wall <= 0 else
            (b["host_busy_s"] - a["host_busy_s"]) / (wall * os.cpu_count()))
    return roles, {"_step_s": wall / (last - first), "_host_busy": busy}


def job_terms(flat, hier, ps, pred, n):
    """(step_cpu_s, job_round_cpu_s, shard_call_cpu_s) from the calibration
    jobs' CPU per step by role (`flat`, `hier`: the two rings; `ps`) and the
    plan's counts for them (`pred`: worker_work_s, worker_rounds: the
    gradient rings' rounds, worker_calls). The two rings differ in their
    rounds (hier's cross-node rings are over the nodes only): the CPU
    difference per round of difference is a real job's CPU per ring round
    (job_round_cpu_s; where they do not differ, one node per rank, the bare
    calibration's least, round_cpu_s); the flat ring's worker CPU beyond its
    work and its rounds is step_cpu_s (the vote, the data fetch, the loop);
    the ps job's CPU beyond that per worker and its servers' optimizer, per
    chunk call, is shard_call_cpu_s (both ends)."""
    a, h, q = pred["allreduce"], pred.get("hier"), pred["ps"]
    xa = flat.get("worker", 0) / n - a["worker_work_s"]
    per_round = a["round_cpu_s"]
    if h and hier and a["worker_rounds"] > h["worker_rounds"]:
        xh = hier.get("worker", 0) / n - h["worker_work_s"]
        measured = (xa - xh) / (a["worker_rounds"] - h["worker_rounds"])
        if measured > 0:
            per_round = measured
    step = max(0.0, xa - a["worker_rounds"] * per_round)
    ps_cpu = sum(ps.values()) - ps.get("coordinator", 0) - ps.get("dataserver", 0)
    call = (ps_cpu - n * (step + q["worker_work_s"] + q["worker_rounds"] * per_round) -
            q["server_cpu_s"]) / (n * q["worker_calls"])
    return step, per_round, max(call, 0.0)


def plan_json(tandem, model, batch, nodes, per, link, profile_path):
    """tandem plan --json --one_host's predictions by strategy at a layout."""
    plan = subprocess.run([tandem, "plan", "--json", "--one_host", "--model=" + model,
                           "--nodes=%d" % nodes, "--per_node=%d" % per, "--batch_size=%d" % batch,
                           "--servers=%d" % nodes, "--profile=" + profile_path] +
                          (["--link=" + link] if link != "none" else []),
                          capture_output=True, text=True, check=True)
    return {x["strategy"]: x for x in json.loads(plan.stdout)["predictions"]}


def job_ring_round(text, n, step_s, planned, out):
    """The round of a ring of `n` in a real job: the bare calibration's
    ring_round_<n>_s moved until the plan's latency chain for the flat ring
    (the CPU floor left out) is the flat job's measured step `step_s`. The
    chain is linear in the round (its rounds: the gradients' and the step
    vote's), so two plans give it. None where the chain already takes
    longer than the step was (the bare round is kept)."""
    m = re.search(r"(?m)^ring_round_%d_s = (\S+)" % n, text)
    if not m or float(m.group(1)) <= 0:
        return None
    r0 = float(m.group(1))
    chain = re.sub(r"(?m)^(step_cpu_s|job_round_cpu_s|shard_call_cpu_s|ring_round_cpu_\d+_s) = .*$",
                   r"\1 = 0", text)
    path = os.path.join(out, "profile_chain.txt")
    steps = []
    for r in (r0, 2 * r0):
        with open(path, "w") as f:
            f.write(re.sub(r"(?m)^ring_round_%d_s = .*$" % n, "ring_round_%d_s = %r" % (n, r), chain))
        steps.append(planned(path)["allreduce"]["step_s"])
    rounds = (steps[1] - steps[0]) / r0
    if rounds <= 0 or step_s <= steps[0]:
        return None
    return r0 + (step_s - steps[0]) / rounds


def calibrate_jobs(tandem, model, batch, profile_path, out, layout, link):
    """What the bare calibration misses, measured on real jobs: a flat ring
    (allreduce hier=0), a hierarchical one (hier=1) and a ps job (a server
    per node) at `layout`, each node's link shaped at `link` ('none':
    unshaped), 105 steps each, every process's CPU between steps 20 and 100
    (job_terms: step_cpu_s, job_round_cpu_s, shard_call_cpu_s). They go
    into the profile at `profile_path`; returns what was measured."""
    nodes, per = (int(x) for x in layout.split("x"))
    n = nodes * per
    common = ["--model=" + model, "--batch_size=%d" % batch, "--epochs=1", "--lr_scaling=none",
              "--seed=1", "--checkpoint_every=0", "--nodes=%d" % nodes,
              "--workers_per_node=%d" % per] + (["--link=" + link] if link != "none" else [])
    flat, flat_time = job_cpu_per_step(tandem, os.path.join(out, "calibrate_ring"),
                                       common + ["--sync=allreduce", "--sync_opt=hier=0"])
    hier = (job_cpu_per_step(tandem, os.path.join(out, "calibrate_hier"),
                             common + ["--sync=allreduce", "--sync_opt=hier=1"])[0]
            if nodes > 1 and per > 1 else None)
    ps = job_cpu_per_step(tandem, os.path.join(out, "calibrate_ps"),
                          common + ["--sync=ps", "--shard_servers=%d" % nodes])[0]
    planned = lambda path: plan_json(tandem, model, batch, nodes, per, link, path)
    pred = planned(profile_path)
    step, per_round, call = job_terms(flat, hier, ps, pred, n)
    with open(profile_path) as f:
        text = f.read()
    # The flat ring job's step, where it took longer than the plan's chain
    # for it: the round of a ring of its size in a real job
    # (job_ring_round). Where the CPU floor set that step (a busy host),
    # the other rows' floors set theirs too, so the longer chain does not
    # hide them (re-planning this session's loaded runs: 5 -> 7 of 10 at
    # 8x2, and no change); on a quiet host the chain sets it.
    ring_round = None
    if n in (2, 4, 8, 16):
        ring_round = job_ring_round(text, n, flat_time["_step_s"], planned, out)
        if ring_round:
            text = re.sub(r"(?m)^ring_round_%d_s = .*$" % n, "ring_round_%d_s = %r" % (n, ring_round),
                          text)
    # A real call does at least what the bare one (tandem plan --calibrate)
    # did: the difference of two jobs' CPU is noisy (10 ms clock ticks,
    # the ring job's waits) and may come out below it.
    m = re.search(r"(?m)^shard_call_cpu_s = (\S+)", text)
    bare = float(m.group(1)) if m else 0.0
    call = max(call, bare)
    for key, v in (("step_cpu_s", step), ("job_round_cpu_s", per_round),
                   ("shard_call_cpu_s", call)):
        line = "%s = %r" % (key, v)
        text, found = re.subn(r"(?m)^%s = .*$" % key, line, text)
        if not found:
            text += line + "\n"
    with open(profile_path, "w") as f:
        f.write(text)
    return {"layout": layout, "link": link, "ring_cpu_s_per_step": flat,
            "ring_step_s": flat_time["_step_s"], "ring_host_busy": flat_time["_host_busy"],
            "ring_ranks": n,
            "job_ring_round_s": ring_round,
            "hier_cpu_s_per_step": hier, "ps_cpu_s_per_step": ps, "step_cpu_s": step,
            "job_round_cpu_s": per_round, "shard_call_cpu_s": call,
            "bare_shard_call_cpu_s": bare,
            "plan": {k: pred[k] for k in ("allreduce", "hier", "ps") if k in pred}}


def cpu_share(r, others):
    """The share of the host's cores a measured run's job could expect:
    its processes (workers and shard servers, each runnable when the step
    is CPU-bound) over them plus `others`, the threads other processes
    kept runnable (the scheduler's fair share); 1 where not measured."""
    if others is None:
        return 1.0
    mine = r["nodes"] * r["workers_per_node"] + r.get("servers", 0)
    return max(0.05, min(1.0, mine / (mine + max(0.0, others))))


def median_others(results):
    """The median over a session's runs of the threads other processes kept
    runnable just before each (strategies.sh's others_running, sampled
    from /proc/stat): one sample is a moment of the others' bursts, the
    median the load the whole session shared the cores with."""
    xs = sorted(r["others_running"] for r in results if r.get("others_running") is not None)
    return xs[len(xs) // 2] if xs else None


def predicted_cpu_ms(pred, n):
    """The plan's CPU per step of the whole job (host_cpu_s) and its parts,
    ms: the workers' own work (compute, codec, memory passes, ring rounds,
    step_cpu_s), their shard calls (worker and server ends together) and
    the servers' optimizer; None where the plan has no CPU floor."""
    if not pred or not pred.get("host_cpu_s"):
        return None
    own = n * (pred["step_cpu_s"] + pred["worker_work_s"] +
               pred["worker_rounds"] * pred["round_cpu_s"])
    calls = n * pred["worker_calls"] * pred["call_cpu_s"]
    return {"total": 1e3 * pred["host_cpu_s"], "workers": 1e3 * own, "calls": 1e3 * calls,
            "server_optimizer": 1e3 * pred["server_cpu_s"]}


def measured_cpu_ms(r):
    """A run's steady-state CPU per step, ms, by role and in total
    (strategies.sh's cpu_ms_per_step_by_role); None where not recorded."""
    roles = r.get("cpu_ms_per_step_by_role")
    if not roles:
        return None
    return dict(roles, total=sum(roles.values()))


def print_cpu_table(rows):
    """Predicted vs measured CPU per step (ms) of every run's whole job:
    the load-robust check of the CPU floor."""
    print("\nCPU ms per step, whole job (steady state): predicted vs measured")
    print("%-26s %-6s %9s %9s %7s   %s" % ("strategy", "layout", "predicted", "measured", "error",
                                         "predicted workers/calls/servers; measured by role"))
    errors = []
    for r in rows:
        p, m = r.get("predicted_cpu_ms"), r.get("measured_cpu_ms")
        if not p or not m:
            continue
        err = p["total"] / m["total"] - 1 if m["total"] > 0 else None
        if err is not None:
            r["cpu_error"] = err
            errors.append(abs(err))
        print("%-26s %-6s %9.1f %9.1f %7s   %.1f/%.1f/%.1f; %s" % (
            r["variant"], r["layout"], p["total"], m["total"],
            "%+.0f%%" % (100 * err) if err is not None else "-", p["workers"], p["calls"],
            p["server_optimizer"],
            " ".join("%s %.1f" % (k, v) for k, v in sorted(m.items()) if k != "total")))
    if errors:
        errors.sort()
        print("CPU per step: median |error| %.0f%%, worst %.0f%%, within 15%%: %d of %d" % (
            100 * errors[len(errors) // 2], 100 * errors[-1], sum(e <= 0.15 for e in errors),
            len(errors)))


def calibrate_before(a, out):
    """--calibrate before the runs: tandem plan --calibrate, then the real
    jobs (calibrate_jobs) at the layout with the most workers on the first
    rate (or --calibrate_layout, --calibrate_link). Returns the profile's
    text and what the jobs measured."""
    path = os.path.join(out, "profile_before.txt")
    calibrate(a.tandem, a.model, a.batch, path)
    layout = a.calibrate_layout or max(
        (l for l in a.layouts.split(",") if l),
        key=lambda l: (int(l.split("x")[0]) * int(l.split("x")[1]), int(l.split("x")[0])))
    link = a.calibrate_link or next(r for r in a.rates.split(",") if r)
    jobs = calibrate_jobs(a.tandem, a.model, a.batch, path, out, layout, link)
    print("calibration jobs at %s, link %s: step_cpu_s %.3g, job_round_cpu_s %.3g, "
          "shard_call_cpu_s %.3g; the flat ring %.1f ms/step, host %s busy: %s" % (
              layout, link, jobs["step_cpu_s"], jobs["job_round_cpu_s"],
              jobs["shard_call_cpu_s"], 1e3 * jobs["ring_step_s"],
              "%.0f%%" % (100 * jobs["ring_host_busy"]) if jobs["ring_host_busy"] is not None
              else "?",
              "a real ring round %.3g ms" % (1e3 * jobs["job_ring_round_s"])
              if jobs["job_ring_round_s"] else "the bare ring round kept"))
    with open(os.path.join(out, "calibration_jobs.json"), "w") as f:
        json.dump(jobs, f, indent=1)
    with open(path) as f:
        before = f.read()
    return before, jobs


def calibrate_after(a, out, before, jobs):
    """--calibrate after the runs: tandem plan --calibrate again, the jobs'
    terms (measured once, before) copied into it, and OUT/profile.txt the
    mean of the two profiles. Returns its path."""
    after = calibrate(a.tandem, a.model, a.batch, os.path.join(out, "profile_after.txt"))
    # The jobs' terms were measured once (before): the same in both.
    keys = ["step_cpu_s", "job_round_cpu_s", "shard_call_cpu_s"]
    if jobs["job_ring_round_s"]:
        keys.append("ring_round_%d_s" % jobs["ring_ranks"])
    for key in keys:
        m = re.search(r"(?m)^%s = .*$" % key, before)
        after = re.sub(r"(?m)^%s = .*$" % key, m.group(0), after) if m else after
    with open(os.path.join(out, "profile.txt"), "w") as f:
        f.write(mean_profile(before, after))
    return os.path.join(out, "profile.txt")


def plan_rows(tandem, measured, model, batch, profile, share_mode):
    """Every measured run (strategies.json's results) planned with tandem
    plan --json --one_host at its layout, link, servers and share of the
    cores: one row each with the predicted and measured step and CPU."""
    rows = []
    plans = {}
    others = median_others(measured) if share_mode == "measured" else None
    if others is not None:
        print("other processes' runnable threads before the runs: median %.1f" % others)
    for r in measured:
        # strategies.sh gives ps / hybrid one shard server per node, each on
        # its own shaped link, or N ('<variant> sN').
        tail = r["variant"].rsplit(" s", 1)
        servers = int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else r["nodes"]
        share = round(cpu_share(r, others), 2)
        key = (r["rate"], r["layout"], servers, share)
        if key not in plans:
            p = subprocess.run([tandem, "plan", "--json", "--one_host", "--model=" + model,
                                "--nodes=%d" % r["nodes"], "--per_node=%d" % r["workers_per_node"],
                                "--link=" + r["rate"], "--batch_size=%d" % batch,
                                "--servers=%d" % servers, "--cpu_share=%g" % share] + profile,
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("plan_vs_measured: tandem plan failed: " + p.stderr.strip())
            plans[key] = json.loads(p.stdout)
        name = plan_name(r["variant"], r["sync"], r.get("sync_opt", ""))
        pred = next((x for x in plans[key]["predictions"] if name and x["strategy"] == name), None)
        row = {"variant": r["variant"], "plan": name, "rate": r["rate"], "layout": r["layout"],
               "measured_ms": r.get("step_ms") if r["ok"] else None,
               "predicted_ms": pred["step_s"] * 1e3 if pred else None,
               "lossy": pred["lossy"] if pred else None,
               "bound": pred.get("bound") if pred else None,
               "cpu_floor_ms": pred["cpu_floor_s"] * 1e3 if pred and "cpu_floor_s" in pred else None,
               "cpu_share": share, "load": r.get("load"),
               "predicted_cpu_ms": predicted_cpu_ms(pred, r["nodes"] * r["workers_per_node"]),
               "measured_cpu_ms": measured_cpu_ms(r) if r["ok"] else None}
        # strategies.sh averages the steps after its first progress line.
        if dense_warmup(r["sync"], r.get("sync_opt", "")) >= r["steps"] - max(1, r["steps"] // 5):
            row["note"] = "measured steps in the dense warm-up"
        elif row["measured_ms"] and row["predicted_ms"]:
            row["error"] = row["predicted_ms"] / row["measured_ms"] - 1
        rows.append(row)
    return rows


def print_rows(rows):
    """The predicted and measured step of every run, with floor and share."""
    print("\n%-26s %-8s %-6s %12s %12s %8s %9s %5s %5s  %s" % (
        "strategy", "link", "layout", "predicted ms", "measured ms", "error", "floor ms", "share",
        "load", "plan's bound"))
    for r in rows:
        print("%-26s %-8s %-6s %12s %12s %8s %9s %5.2f %5s  %s" % (
            r["variant"], r["rate"], r["layout"],
            "%.1f" % r["predicted_ms"] if r["predicted_ms"] else "-",
            "%.1f" % r["measured_ms"] if r["measured_ms"] else "FAILED",
            "%+.0f%%" % (100 * r["error"]) if "error" in r else r.get("note", "-"),
            "%.1f" % r["cpu_floor_ms"] if r["cpu_floor_ms"] else "-", r["cpu_share"],
            "%.0f" % r["load"] if r["load"] is not None else "-", r["bound"] or "-"))


def recommendations(rows):
    """Per link and layout: the measured fastest lossless strategy against
    the plan's pick, judged where the best two differ by more than 10%."""
    verdicts = []
    for key in sorted({(r["rate"], r["layout"]) for r in rows}):
        ok_rows = sorted((r for r in rows if (r["rate"], r["layout"]) == key and r["measured_ms"]
                          and r["predicted_ms"] and not r["lossy"]), key=lambda r: r["measured_ms"])
        if not ok_rows:
            continue
        fastest = ok_rows[0]
        predicted = min(ok_rows, key=lambda r: r["predicted_ms"])
        # The recommendation is judged where the measured best two differ by
        # more than 10% (closer than that, either is right).
        margin = ok_rows[1]["measured_ms"] / fastest["measured_ms"] - 1 if len(ok_rows) > 1 else None
        judged = margin is None or margin > 0.10
        agree = fastest["variant"] == predicted["variant"] or not judged
        verdicts.append({"rate": key[0], "layout": key[1], "measured_fastest": fastest["variant"],
                         "plan_pick": predicted["variant"], "margin": margin, "judged": judged,
                         "agree": agree})
        print("%s %s: measured fastest %s (next %s), plan picks %s%s" % (
            key[0], key[1], fastest["variant"],
            "+%.0f%%" % (100 * margin) if margin is not None else "-", predicted["variant"],
            "" if agree else "  <-- disagree" if judged else ""))
        if not judged and fastest["variant"] != predicted["variant"]:
            print("  (best two within 10%: not judged)")
    return verdicts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--strategies", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--model", default="mlp:784,1024,1024,10")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rates", default="1gbit,100mbit")
    ap.add_argument("--layouts", default="2x2,4x1")
    ap.add_argument("--only", default="")
    ap.add_argument("--repeat", type=int, default=1, help="strategies.sh --repeat (median run)")
    ap.add_argument("--profile", default="",
                    help="tandem plan --profile (default: its own, ~/.config/tandem/plan_profile)")
    ap.add_argument("--calibrate", action="store_true",
                    help="calibrate (tandem plan --calibrate, the run's model and batch) right "
                         "before and right after the measured runs and plan with the mean of the "
                         "two (OUT/profile.txt): on a loaded host a ring round's cost drifts")
    ap.add_argument("--calibrate_link", default="",
                    help="--calibrate's jobs: each node's link (default: the first of --rates; "
                         "'none': unshaped)")
    ap.add_argument("--calibrate_layout", default="",
                    help="--calibrate's three real jobs (allreduce hier=0 and hier=1, ps) for "
                         "step_cpu_s, job_round_cpu_s and shard_call_cpu_s: this layout (default: "
                         "the one of --layouts with the most workers, where the CPU floor matters)")
    ap.add_argument("--share", choices=("measured", "1"), default="measured",
                    help="plan each run with the share of the cores its job could expect (its "
                         "processes over them plus the median of the threads others kept runnable "
                         "before each run), or 1")
    ap.add_argument("--measured", default="",
                    help="a strategies.json from an earlier run: compare with it, run nothing")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="tandem-plan-vs-measured-")
    os.makedirs(out, exist_ok=True)
    cmd = [a.strategies, "--out", os.path.join(out, "measured"), "--model", a.model,
           "--steps", str(a.steps), "--batch", str(a.batch), "--rates", a.rates,
           "--layouts", a.layouts, "--no-accuracy"]
    if a.only:
        cmd += ["--only", a.only]
    if a.repeat > 1:
        cmd += ["--repeat", str(a.repeat)]
    profile = ["--profile=" + a.profile] if a.profile else []
    env = dict(os.environ, TANDEM=a.tandem)
    measured_file = a.measured or os.path.join(out, "measured", "strategies.json")
    if a.calibrate and (a.measured or a.profile):
        sys.exit("plan_vs_measured: --calibrate measures around the runs: not with --measured or --profile")
    if a.calibrate:
        before, jobs = calibrate_before(a, out)
    if not a.measured:
        subprocess.run(cmd, check=True, env=env)
    if a.calibrate:
        profile = ["--profile=" + calibrate_after(a, out, before, jobs)]
    with open(measured_file) as f:
        doc = json.load(f)
    measured = doc["results"]
    # Plan what was measured: an earlier run's model and batch, not the flags'.
    model = doc.get("meta", {}).get("model", a.model)
    batch = doc.get("meta", {}).get("batch_per_worker", a.batch)

    rows = plan_rows(a.tandem, measured, model, batch, profile, a.share)

    print_rows(rows)
    print_cpu_table(rows)
    verdicts = recommendations(rows)
    errors = sorted(abs(r["error"]) for r in rows if "error" in r)
    judged = [v for v in verdicts if v["judged"]]
    if judged:
        print("recommendation right in %d of %d layouts where the best two differ by > 10%%" % (
            sum(v["agree"] for v in judged), len(judged)))
    if errors:
        print("median |error| %.0f%%, worst %.0f%%, within 15%%: %d of %d" % (
            100 * errors[len(errors) // 2], 100 * errors[-1], sum(e <= 0.15 for e in errors), len(errors)))
    with open(os.path.join(out, "plan_vs_measured.json"), "w") as f:
        json.dump({"rows": rows, "recommendations": verdicts}, f, indent=1)
    print("wrote", os.path.join(out, "plan_vs_measured.json"))


if __name__ == "__main__":
    main()
