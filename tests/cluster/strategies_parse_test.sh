#!/bin/bash
# tools/bench/strategies.py without a cluster: the strategy list read from a
# `tandem local --help` (allreduce split into hier=0/hier=1 only when the
# help lists hier), and the numbers read from a run's output lines.
set -u
helper="$TEST_SRCDIR/tandem/tools/bench/strategies.py"
fake="$TEST_TMPDIR/fake_tandem"
cat >"$fake" <<'HELP'
#!/bin/bash
cat <<'TEXT'
usage: tandem local [--flag=value ...]
  --workers=4                     Worker processes to start (one rank each).

sync strategies (--sync NAME --sync_opt key=value,...):
  allreduce: DDP: bucketed allreduce
      bucket_cap_mb=25  MiB per gradient bucket
      hier=0  1 = hierarchical allreduce
  zero1: sharded optimizer state
  every strategy also takes bucket_cap_mb (MiB per bucket) and max_grad_norm (global clip, 0 = off)
TEXT
HELP
chmod +x "$fake"
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" - "$helper" "$fake" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("strategies", sys.argv[1])
s = importlib.util.module_from_spec(spec)
spec.loader.exec_module(s)
failures = 0
def check(what, got, want):
    global failures
    if got != want:
        print("FAIL: %s: got %r, want %r" % (what, got, want)); failures += 1
reg = s.registered_strategies(sys.argv[2])
check("registered", reg, [("allreduce", ["bucket_cap_mb", "hier"]), ("zero1", [])])
check("variants", [v[0] for v in s.variants(reg)], ["allreduce hier=0", "allreduce hier=1", "zero1"])
check("variants without hier", [v[0] for v in s.variants([("allreduce", ["bucket_cap_mb"])])],
      ["allreduce"])
check("hybrid variants", s.variants([("hybrid", ["chunk_mb", "compress"])]),
      [("hybrid", "hybrid", ""), ("hybrid int8+EF", "hybrid", "compress=int8")])
check("hybrid with apply", [v[0] for v in s.variants([("hybrid", ["apply", "compress"])])],
      ["hybrid", "hybrid int8+EF", "hybrid apply=chunk", "hybrid int8+EF apply=chunk"])
check("zero3 variants", [v[0] for v in s.variants([("zero3", ["bucket_cap_mb", "release"])])],
      ["zero3", "zero3 release=now"])
check("allreduce with wire", [v[0] for v in s.variants([("allreduce", ["hier", "wire"])])],
      ["allreduce hier=0", "allreduce hier=1", "allreduce wire=fp16"])
check("compressed codecs", [v[0] for v in s.variants([("compressed", ["codec"])])],
      ["compressed int8+EF", "compressed int8+EF hier=1", "compressed topk",
       "compressed topk plain-EF", "compressed threshold", "compressed powersgd r4"])
check("replicate=0 rows", [v[0] for v in s.variants([("ps", ["replicate"]), ("hybrid", ["replicate"])])],
      ["ps", "ps replicate=0", "hybrid", "hybrid replicate=0"])
check("replicate=0 option", s.variants([("ps", ["replicate"])])[1], ("ps replicate=0", "ps", "replicate=0"))
check("hybrid without compress", [v[0] for v in s.variants([("hybrid", ["chunk_mb"])])], ["hybrid"])
out = "\n".join([
    "network: 2 node(s) in a private network namespace, each node's link 1gbit (htb on lo)",
    "step 10/40 epoch 1 loss 1.9 lr 0.1 samples/s 2446 ms/step 26.2 data-wait 1.6% world 4 eta 0:00:01",
    "step 20/40 epoch 1 loss 1.2 lr 0.1 samples/s 2560 ms/step 25.0 data-wait 0.1% world 4 eta 0:00:01",
    "epoch 1 test accuracy 0.8401 (10000 samples)",
    "links: bytes sent to other nodes: node-1 12907522, node-2 12504814; total 25412336",
])
steps, links, acc, net = s.parse(out)
check("steps", steps, [(10, 2446.0, 26.2), (20, 2560.0, 25.0)])
check("links", links, 25412336)
check("accuracy", acc, 0.8401)
check("network", net.startswith("2 node(s)"), True)
check("no links line", s.parse("step 1/1 x samples/s 1 ms/step 2 y")[1], None)
runs = [{"ok": True, "step_ms": 30.0}, {"ok": True, "step_ms": 10.0}, {"ok": True, "step_ms": 20.0}]
med = s.median_run(runs)
check("median run", (med["step_ms"], med["step_ms_runs"]), (20.0, [30.0, 10.0, 20.0]))
check("median of two is the lower", s.median_run(runs[:2])["step_ms"], 10.0)
check("a failed run fails the configuration",
      s.median_run(runs + [{"ok": False, "error": "boom"}])["error"], "boom")
check("two largest layers", s.two_largest_layers_bytes("mlp:784,1024,1024,10"), 4 * (1025 * 1024 + 785 * 1024))
check("two largest layers, gpt", s.two_largest_layers_bytes("gpt:2,64,4"), None)
# zero3's groups at 4 MiB: the 3.1 MiB first layer takes the second, the small last joins.
check("two largest groups", s.two_largest_layers_bytes("mlp:784,1024,1024,10", 4), 4 * (785 * 1024 + 1025 * 1024 + 1025 * 10))
check("two largest groups, small", s.two_largest_layers_bytes("mlp:784,1024,1024,10", 0.001), 4 * (1025 * 1024 + 785 * 1024))
check("zero3 variants with groups", [v[0] for v in s.variants([("zero3", ["release", "group_mb"])])],
      ["zero3", "zero3 release=now", "zero3 group_mb=0"])
import contextlib, io
cbuf = io.StringIO()
crow = lambda v, rate, vs32, vs16, acc: {"variant": v, "ok": True, "rate": rate, "layout": "2x2",
                                        "step_ms_vs_ring": vs32, "step_ms_vs_fp16": vs16,
                                        "test_accuracy": acc}
with contextlib.redirect_stdout(cbuf):
    s.print_compression_checks({"baseline": "allreduce hier=0"},
                               [crow("allreduce hier=0", "100mbit", 1.0, 2.0, 0.85),
                                crow("compressed powersgd r4", "100mbit", 0.25, 0.5, 0.848),
                                crow("compressed topk", "100mbit", 0.1, 0.2, 0.84)])
ctext = cbuf.getvalue()
check("powersgd against both rings", "speed-up 4.00x / 2.00x, accuracy -0.20 points vs fp16 ring ok "
      "(target > 1x); accuracy ok" in ctext, True)
check("topk below", "accuracy -1.00 points accuracy BELOW" in ctext, True)
row = lambda v, ms, p, g, o: {"variant": v, "ok": True, "rate": "1gbit", "layout": "2x2", "nodes": 2,
                             "workers_per_node": 2, "step_ms": ms,
                             "memory_bytes": {"params": p, "grads": g, "optimizer": o}}
M = 2**20
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    s.print_zero_checks({"baseline": "allreduce hier=0", "model": "mlp:784,1024,1024,10"},
                        [row("allreduce hier=0", 100.0, 8 * M, 8 * M, 8 * M),
                         row("zero2", 112.0, 8 * M, 2 * M, 2 * M), row("zero1", 105.0, 8 * M, 8 * M, 2 * M)])
text = buf.getvalue()
check("zero2 line", "zero2              1gbit    2x2   optimizer 2.00 / 2.00, grads 2.00 / 2.00; step 112.0 ms (1.12x); "
      "target within 10% BELOW" in text, True)
check("zero1 line", "zero1              1gbit    2x2   optimizer 2.00 / 2.00; step 105.0 ms (1.05x)\n" in text, True)
if failures:
    print(text)
print("all passed" if failures == 0 else "%d failure(s)" % failures)
sys.exit(1 if failures else 0)
PY
