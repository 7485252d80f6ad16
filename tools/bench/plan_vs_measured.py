"""Predicted (tandem plan) vs measured (strategies.sh) step time, side by side.

See plan_vs_measured.sh for usage. The measured runs are strategies.sh's
(--no-accuracy); each (strategy, rate, layout) is then planned with
`tandem plan --json --one_host` and the two are printed with the relative
error. A variant tandem plan does not know (or that failed) is listed as such.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# strategies.sh variant label -> tandem plan strategy name
PLAN_NAME = {
    "allreduce hier=0": "allreduce",
    "allreduce": "allreduce",
    "allreduce hier=1": "hier",
}


def plan_name(variant, sync, opt):
    if variant in PLAN_NAME:
        return PLAN_NAME[variant]
    if sync == "compressed":
        kv = dict(x.split("=", 1) for x in opt.split(",") if "=" in x)
        codec = kv.get("codec", "int8")
        if codec == "topk":
            return "compressed:topk=" + kv.get("k", "0.01")
        return "compressed:" + codec
    return sync


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
    env = dict(os.environ, TANDEM=a.tandem)
    measured_file = a.measured or os.path.join(out, "measured", "strategies.json")
    if not a.measured:
        subprocess.run(cmd, check=True, env=env)
    with open(measured_file) as f:
        measured = json.load(f)["results"]

    rows = []
    plans = {}
    for r in measured:
        key = (r["rate"], r["layout"])
        if key not in plans:
            nodes, per = r["nodes"], r["workers_per_node"]
            p = subprocess.run([a.tandem, "plan", "--json", "--one_host", "--model=" + a.model,
                                "--nodes=%d" % nodes, "--per_node=%d" % per, "--link=" + r["rate"],
                                "--batch_size=%d" % a.batch,
                                # strategies.sh gives ps / hybrid one shard server per node,
                                # each on its own shaped link
                                "--servers=%d" % nodes], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("plan_vs_measured: tandem plan failed: " + p.stderr.strip())
            plans[key] = json.loads(p.stdout)
        plan = plans[key]
        name = plan_name(r["variant"], r["sync"], r.get("sync_opt", ""))
        pred = next((x for x in plan["predictions"] if x["strategy"] == name), None)
        row = {"variant": r["variant"], "plan": name, "rate": r["rate"], "layout": r["layout"],
               "measured_ms": r.get("step_ms") if r["ok"] else None,
               "predicted_ms": pred["step_s"] * 1e3 if pred else None,
               "lossy": pred["lossy"] if pred else None}
        if row["measured_ms"] and row["predicted_ms"]:
            row["error"] = row["predicted_ms"] / row["measured_ms"] - 1
        rows.append(row)

    print("\n%-20s %-8s %-6s %12s %12s %8s" % ("strategy", "link", "layout", "predicted ms",
                                                "measured ms", "error"))
    for r in rows:
        print("%-20s %-8s %-6s %12s %12s %8s" % (
            r["variant"], r["rate"], r["layout"],
            "%.1f" % r["predicted_ms"] if r["predicted_ms"] else "-",
            "%.1f" % r["measured_ms"] if r["measured_ms"] else "FAILED",
            "%+.0f%%" % (100 * r["error"]) if "error" in r else "-"))
    verdicts = []
    for key, plan in sorted(plans.items()):
        ok_rows = [r for r in rows if (r["rate"], r["layout"]) == key and r["measured_ms"]
                   and r["predicted_ms"] and not r["lossy"]]
        if not ok_rows:
            continue
        fastest = min(ok_rows, key=lambda r: r["measured_ms"])
        predicted = min(ok_rows, key=lambda r: r["predicted_ms"])
        verdicts.append({"rate": key[0], "layout": key[1], "measured_fastest": fastest["plan"],
                         "plan_pick": predicted["plan"], "agree": fastest["plan"] == predicted["plan"]})
        print("%s %s: measured fastest %s, plan picks %s%s" % (
            key[0], key[1], fastest["plan"], predicted["plan"],
            "" if fastest["plan"] == predicted["plan"] else "  <-- disagree"))
    errors = sorted(abs(r["error"]) for r in rows if "error" in r)
    if errors:
        print("median |error| %.0f%%, worst %.0f%%, within 15%%: %d of %d" % (
            100 * errors[len(errors) // 2], 100 * errors[-1], sum(e <= 0.15 for e in errors), len(errors)))
    with open(os.path.join(out, "plan_vs_measured.json"), "w") as f:
        json.dump({"rows": rows, "recommendations": verdicts}, f, indent=1)
    print("wrote", os.path.join(out, "plan_vs_measured.json"))


if __name__ == "__main__":
    main()
