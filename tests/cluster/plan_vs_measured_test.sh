#!/bin/bash
# tools/bench/plan_vs_measured.py --measured without a cluster: a recorded
# strategies.json and a fake `tandem plan --json` that logs its arguments.
# Checks that each run is planned with the share of the cores it could
# expect (its processes over them plus the session's median of others'
# runnable threads), that the calibration jobs' step_cpu_s and
# shard_call_cpu_s follow from their CPU, that each variant is compared
# with the plan row it runs as (wire=fp16 -> compressed:fp16, powersgd rank -> compressed:powersgd=R,
# hier=1 int8 -> none), that the run's own model and batch are planned, that
# a codec whose steps were all in its dense warm-up gets no error, and that
# the recommendation is judged only where the measured best two differ by
# more than 10%.
set -u
helper="$TEST_SRCDIR/tandem/tools/bench/plan_vs_measured.py"
dir="$TEST_TMPDIR"
fake="$dir/fake_tandem"
cat >"$fake" <<FAKE
#!/bin/bash
echo "\$@" >> "$dir/plan_args"
cat <<'JSON'
{"predictions": [
 {"strategy": "allreduce", "step_s": 0.030, "lossy": false},
 {"strategy": "hier", "step_s": 0.020, "lossy": false},
 {"strategy": "zero2", "step_s": 0.025, "lossy": false},
 {"strategy": "compressed:fp16", "step_s": 0.015, "lossy": true},
 {"strategy": "compressed:powersgd=4", "step_s": 0.005, "lossy": true},
 {"strategy": "compressed:topk=0.01", "step_s": 0.002, "lossy": true}]}
JSON
FAKE
chmod +x "$fake"
cat >"$dir/strategies.json" <<'JSON'
{"meta": {"model": "mlp:784,64,10", "batch_per_worker": 32},
 "results": [
  {"variant": "allreduce hier=0", "sync": "allreduce", "sync_opt": "hier=0", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 30.0},
  {"variant": "allreduce hier=1", "sync": "allreduce", "sync_opt": "hier=1", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 15.0},
  {"variant": "zero2", "sync": "zero2", "sync_opt": "", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 25.0},
  {"variant": "allreduce wire=fp16", "sync": "allreduce", "sync_opt": "wire=fp16", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 16.0},
  {"variant": "compressed powersgd r4", "sync": "compressed", "sync_opt": "codec=powersgd,rank=4", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 10.0},
  {"variant": "compressed topk", "sync": "compressed", "sync_opt": "codec=topk,k=0.01", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 28.0},
  {"variant": "compressed int8+EF hier=1", "sync": "compressed", "sync_opt": "codec=int8,hier=1", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 12.0},
  {"variant": "hybrid int8+EF", "sync": "hybrid", "sync_opt": "compress=int8", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 9.0},
  {"variant": "zero3 group_mb=0", "sync": "zero3", "sync_opt": "group_mb=0", "rate": "100mbit", "layout": "2x2", "nodes": 2, "workers_per_node": 2, "steps": 50, "ok": true, "step_ms": 40.0},
  {"variant": "allreduce hier=0", "sync": "allreduce", "sync_opt": "hier=0", "rate": "100mbit", "layout": "4x1", "nodes": 4, "workers_per_node": 1, "steps": 50, "ok": true, "step_ms": 26.0, "others_running": 4.0},
  {"variant": "zero2", "sync": "zero2", "sync_opt": "", "rate": "100mbit", "layout": "4x1", "nodes": 4, "workers_per_node": 1, "steps": 50, "ok": true, "step_ms": 25.0, "others_running": 12.0}]}
JSON
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3
"$PYTHON" "$helper" --tandem "$fake" --strategies /bin/false --measured "$dir/strategies.json" \
  --out "$dir/out" --profile "$dir/profile" --model mlp:1,2 --batch 7 > "$dir/stdout" 2>&1 || {
  cat "$dir/stdout"; echo "FAIL: plan_vs_measured.py exited $?"; exit 1; }
exec "$PYTHON" - "$dir" "$helper" <<'PY'
import json, sys
d = sys.argv[1]
out = json.load(open(d + "/out/plan_vs_measured.json"))
rows = {(r["variant"], r["layout"]): r for r in out["rows"]}
failures = 0
def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
check(rows[("allreduce wire=fp16", "2x2")]["plan"] == "compressed:fp16", "wire=fp16 is compressed:fp16")
check(abs(rows[("allreduce wire=fp16", "2x2")]["error"] - (15 / 16 - 1)) < 1e-9, "fp16 error")
check(rows[("compressed powersgd r4", "2x2")]["plan"] == "compressed:powersgd=4", "powersgd rank")
check(rows[("allreduce hier=1", "2x2")]["plan"] == "hier", "hier=1 is hier")
check(rows[("compressed int8+EF hier=1", "2x2")]["plan"] is None, "hier int8 has no plan row")
check("error" not in rows[("compressed int8+EF hier=1", "2x2")], "no error without a plan row")
check(rows[("hybrid int8+EF", "2x2")]["plan"] is None, "hybrid with int8 pushes has no plan row")
check(rows[("zero3 group_mb=0", "2x2")]["plan"] is None, "zero3 with other groups has no plan row")
# --calibrate's mean of two profiles: numbers averaged, text kept.
import importlib.util
spec = importlib.util.spec_from_file_location("pvm", sys.argv[2])
pvm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pvm)
mean = dict(pvm.parse_profile(pvm.mean_profile(
    "# c\nsource = x\ncores = 2\nring_round_4_s = 0.001\nonly_before = 5\n",
    "source = y\ncores = 2\nring_round_4_s = 0.003\n")))
check(mean["source"] == "x" and mean["cores"] == "2", "text and whole numbers: " + str(mean))
check(abs(float(mean["ring_round_4_s"]) - 0.002) < 1e-12, "rounds averaged: " + str(mean))
check(mean["only_before"] == "5", "a key in one profile only is kept")
topk = rows[("compressed topk", "2x2")]
check("error" not in topk and "warm-up" in topk.get("note", ""), "top-k's 50 steps are its warm-up")
check("error" in rows[("compressed powersgd r4", "2x2")], "powersgd's 10 dense steps are before step 11")
args = open(d + "/plan_args").read()
check("--model=mlp:784,64,10" in args and "--batch_size=32" in args, "the run's model and batch: " + args)
check("--profile=" + d + "/profile" in args, "the profile is passed")
# The share: 4 workers over them plus the median (of 4 and 12: 12, the
# upper one) of the threads others kept runnable: 4 / 16; rows without
# others_running are planned with the same session median.
check("--nodes=4 --per_node=1 --link=100mbit --batch_size=32 --servers=4 --cpu_share=0.25" in args,
      "4x1 planned with share 0.25: " + args)
check("--nodes=2 --per_node=2 --link=100mbit --batch_size=32 --servers=2 --cpu_share=0.25" in args,
      "2x2 planned with the session's share: " + args)
check(rows[("zero2", "4x1")]["cpu_share"] == 0.25, "the share is in the row")
# The calibration jobs' terms: a ring job of 8 workers at 4 ms each, the
# plan charging 0.25 ms of work and 60 rounds of 30 us: step_cpu_s 1.95
# ms; a ps job of 60 ms (workers 40, shards 20) beyond 8 x (1.95 + 0.1 +
# 32 x 0.03 ms) and the servers' 0.2 ms, over 8 x 9 calls.
ring = {"worker": 0.032, "coordinator": 0.001}
ps = {"worker": 0.040, "shard": 0.020, "dataserver": 0.002}
pred = {"allreduce": {"worker_work_s": 0.25e-3, "worker_rounds": 60, "round_cpu_s": 30e-6},
        "ps": {"worker_work_s": 0.1e-3, "worker_rounds": 32, "round_cpu_s": 30e-6,
               "worker_calls": 9, "server_cpu_s": 0.2e-3}}
step, per_round, call = pvm.job_terms(ring, None, ps, pred, 8)
check(per_round == 30e-6, "no hier job: the bare round: %r" % per_round)
check(abs(step - 1.95e-3) < 1e-12, "step_cpu_s: %r" % step)
check(abs(call - (0.060 - 8 * (1.95e-3 + 0.1e-3 + 32 * 30e-6) - 0.2e-3) / 72) < 1e-12,
      "shard_call_cpu_s: %r" % call)
check(pvm.cpu_share({"nodes": 8, "workers_per_node": 2, "servers": 8}, None) == 1.0,
      "no measurement: share 1")
rec = {(v["rate"], v["layout"]): v for v in out["recommendations"]}
# 2x2: hier 15 ms, then zero2 25 ms (+67%): judged, and the plan picks hier.
check(rec[("100mbit", "2x2")]["judged"] and rec[("100mbit", "2x2")]["agree"], "2x2 judged, right")
# 4x1: zero2 25 ms, allreduce 26 ms (+4%): not judged, whichever the plan picks.
check(not rec[("100mbit", "4x1")]["judged"], "4x1 within 10%: not judged")
print("plan_vs_measured_test: %d failure(s)" % failures)
sys.exit(1 if failures else 0)
PY
