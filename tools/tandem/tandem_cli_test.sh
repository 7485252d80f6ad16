#!/bin/bash
# The tandem binary's help, exit codes and usage errors, as a user sees them.
# Nothing here starts a process beyond tandem itself: every case exits
# before the cluster would start (bad input is checked first).
set -u
tandem="$TEST_SRCDIR/tandem/tools/tandem/tandem"
failures=0

# expect CODE PATTERN ARGS...: tandem ARGS exits CODE and its output
# (stdout + stderr) matches the grep -E PATTERN.
expect() {
  local code="$1" pattern="$2"
  shift 2
  local out rc
  out="$(cd "$TEST_TMPDIR" && "$tandem" "$@" 2>&1)"
  rc=$?
  if [ "$rc" != "$code" ]; then
    echo "FAIL: tandem $* exited $rc, want $code; output:"; echo "$out"
    failures=$((failures + 1))
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: tandem $* output lacks /$pattern/:"; echo "$out"
    failures=$((failures + 1))
  fi
}

expect 0 '^  local +Train' --help
expect 0 '^  exec +Run a program' --help
# exec: a value the environment set passes through; the exit status is the
# program's; no program or a missing one is a clear error.
expect 0 '^OPENBLAS_CORETYPE=Nehalem$' exec -- env OPENBLAS_CORETYPE=Nehalem sh -c 'echo OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE'
out="$(OPENBLAS_CORETYPE=Sandybridge "$tandem" exec -- sh -c 'echo $OPENBLAS_CORETYPE')"
[ "$out" = Sandybridge ] || { echo "FAIL: exec changed a user-set OPENBLAS_CORETYPE: $out"; failures=$((failures + 1)); }
expect 3 '' exec -- sh -c 'exit 3'
expect 2 'give the program to run' exec
expect 0 'usage: tandem exec' exec --help
expect 0 'usage: tandem exec' help exec
expect 127 'cannot run /nonexistent/prog' exec -- /nonexistent/prog
expect 0 '^  status +Show' --help
expect 0 '^  --workers=4 +Worker processes' local --help
expect 0 '^  --sync=allreduce ' local --help
expect 0 '^  --sync_opt="" ' local --help
expect 0 '^  --profile=false ' local --help
expect 0 '^  --bucket_cap_mb=-1 ' local --help
expect 0 '^  --coordinator="" ' status --help
expect 0 '^usage: tandem local' help local
expect 2 'unknown flag --wrokers for `tandem local` \(did you mean --workers\?\); run `tandem local --help`' local --wrokers 2
expect 2 'unknown flag --workers for `tandem status`' status --workers 2
expect 2 "unknown command 'train'" train
expect 2 'no command given' 
expect 2 'pass --coordinator' status
expect 2 '--workers must be at least 1' local --workers 0
# Sync strategy and options are checked against the registry before any
# process starts: no run directory is created.
run_dir="$TEST_TMPDIR/never-created"
expect 2 "--sync 'bogus' is unknown: registered strategies are .*allreduce" \
  local --sync bogus --run_dir "$run_dir"
expect 2 "--sync_opt key 'nope' is not an option of strategy 'allreduce': valid keys are .*bucket_cap_mb" \
  local --sync_opt nope=1 --run_dir "$run_dir"
expect 2 "--sync_opt item 'x' has no '='" local --sync_opt x --run_dir "$run_dir"
expect 0 '^  allreduce: ' local --help
# Simulated nodes: bad layouts and rates are refused before anything starts.
expect 0 '^  --nodes=0 +Simulated hosts' local --help
expect 0 '^  --link="" +Each node' local --help
expect 2 '--nodes must not be negative \(got -1\)' local --nodes=-1 --run_dir "$run_dir"
expect 2 "--link 'fast' is not a link rate .*e.g. 10gbit, 1gbit, 100mbit" \
  local --nodes 2 --link fast --run_dir "$run_dir"
expect 2 "--link '100' is not a link rate \(no unit\)" local --nodes 2 --link 100 --run_dir "$run_dir"
expect 2 '--workers=3 disagrees with --nodes=2 x --workers_per_node=2 = 4; drop --workers or make it 4' \
  local --workers 3 --nodes 2 --workers_per_node 2 --run_dir "$run_dir"
expect 2 '--workers=4 disagrees with --nodes=2 x --workers_per_node=1 = 2' \
  local --nodes 2 --workers_per_node 1 --workers 4 --run_dir "$run_dir"
expect 2 '--workers=3 does not split evenly over --nodes=2' local --workers 3 --nodes 2 --run_dir "$run_dir"
expect 2 '--link needs --nodes' local --link 1gbit --run_dir "$run_dir"
expect 2 '--workers_per_node needs --nodes' local --workers_per_node 2 --run_dir "$run_dir"
# Without the privilege for a network namespace: one clear line, exit 1.
if command -v setpriv >/dev/null; then
  out="$(cd "$TEST_TMPDIR" && setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin \
         "$tandem" local --nodes 2 --model mlp:784,64,10 --max_steps 1 \
         --run_dir "$TEST_TMPDIR/nopriv" 2>&1)"
  rc=$?
  if [ "$rc" != 1 ] || ! grep -q 'cannot create a network namespace (unshare(CLONE_NEWNET): Operation not permitted); simulated nodes need root or CAP_SYS_ADMIN' <<<"$out"; then
    echo "FAIL: --nodes without CAP_SYS_ADMIN exited $rc:"; echo "$out"
    failures=$((failures + 1))
  fi
  if ls "$TEST_TMPDIR/nopriv"/*.pid >/dev/null 2>&1; then
    echo "FAIL: --nodes without CAP_SYS_ADMIN started processes"; failures=$((failures + 1))
  fi
else
  echo "SKIP (one case): no setpriv to drop CAP_SYS_ADMIN"
fi
if [ -e "$run_dir" ]; then
  echo "FAIL: a bad --sync created $run_dir (something started)"
  failures=$((failures + 1))
fi

# tandem plan for GPU clusters, through the binary's own flag parsing: the
# datasheet profile is named in the output, the H100's memory is checked,
# and bad GPU choices exit 2 with what is known.
gpt2='gpt:layers=12,heads=12,width=768,context=1024,vocab=50304'
expect 0 'profile: datasheet-derived, not measured: NVIDIA H100 SXM5 80GB, bf16' \
  plan --gpu h100 --model "$gpt2" --nodes 2 --workers_per_node 8 --batch_size 8
expect 0 '80 GB per worker' plan --gpu=h100 --model "$gpt2" --workers_per_node 8
expect 0 '"tied": \[' plan --gpu a100 --gpu_math tf32 --model "$gpt2" --json
expect 2 "unknown GPU 'v100' \(known: h200, h100, a100\)" plan --gpu v100
expect 2 'known: bf16, tf32, fp32' plan --gpu h100 --gpu_math fp8
expect 2 'give --gpu or those, not both' plan --gpu h100 --calibrate
expect 2 'tie_fraction must be in \[0, 1\)' plan --tie_fraction 1.5

if [ "$failures" != 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
