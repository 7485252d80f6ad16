#!/usr/bin/env bash
# tools/gpu/check.sh — the whole GPU check, built here and run there in one call.
#
#   tools/gpu/check.sh pack      # build machine: Bazel + CUDA toolkit, no GPU
#   tools/gpu/check.sh run       # GPU machine: no Bazel; one command, <= 540 s
#   tools/gpu/check.sh rehearse  # build machine: CPU-only dry run of `run`
#
# pack builds every gpu-tagged test, every test of //common/kernels/cuda and
# //common/comm/nccl, the cuda_* tests of //common/sync, //common/codec and
# //common/optim, kernel_bench and
# gpt_step_bench; gathers the binaries with their ldd closure (minus the
# driver and the CUDA libraries, which the GPU machine's PyTorch wheels
# bring) into tools/gpu/out/pack/, and compresses that to
# tools/gpu/out/out.tar.xz, which must stay under the 64 MiB that may be
# carried to the GPU machine (tools/gpu/out is git-ignored). The device call:
#
#   run(command="tools/gpu/check.sh run", carry=["tools/gpu/out/out.tar.xz"], timeout_s=560)
#
# run unpacks the tarball into a scratch folder and works against one global
# deadline (GPU_CHECK_DEADLINE_S, default 480 s from the start):
#   1. preflight: nvidia-smi, the NVIDIA library folders of the Python venv,
#      ldd of every binary (a missing library is reported before anything
#      runs, and that binary is not run), python + torch (outside the pack's
#      LD_LIBRARY_PATH);
#   2. the test binaries, cheapest first, each under its own timeout cut to
#      what is left of the deadline; on a machine with a GPU a gpu-tagged
#      binary that skips a test fails the check (skips are not passes);
#   3. kernel_bench (each kernel's GB/s against the measured D2D copy);
#   4. the GPT step: gpt_step_bench and gpt_step_torch.py (PyTorch eager,
#      never under the pack's LD_LIBRARY_PATH) with the same model, compared
#      by parameter count and tokens/s; each math's tandem step also writes a
#      measured `tandem plan` profile, $OUT/plan_profile.<math> (use it with
#      tandem plan --profile FILE instead of the datasheet's --gpu).
# Steps the deadline leaves no time for are reported "not run" and count as
# failed. Every finished step appends a row to the summary, which is copied
# to $OUT at once with all logs in one archive ($OUT/gpu-check.tar.gz), so a
# run cut off from outside still tells what passed; a trap on EXIT, INT and
# TERM prints the table. The table ends with "N passed, N failed, N skipped"
# (gtest tests, plus one per preflight check and per benchmark step). NCCL_DEBUG=WARN.
# Exit status: 0 only when nothing failed.
#
# Environment: pack: BAZEL (bazel), BAZEL_STARTUP_FLAGS, BAZEL_FLAGS
# ("--jobs=2"). run: GPU_CHECK_DEADLINE_S (480), GPU_CHECK_WORK (scratch,
# default $TMPDIR/tandem-gpu-check), BENCH_FLAGS (kernel_bench flags),
# GPT_SPEC (gpt:layers=12,heads=12,width=768,context=1024,vocab=50304),
# GPT_BATCH (8), GPT_ITERS (10), GPT_MATH ("fp32 tf32").
# Rehearsal only (never set on the GPU machine): GPU_CHECK_REHEARSAL_SLEEP_S
# (a first step that sleeps, to exercise the deadline),
# GPU_CHECK_REHEARSAL_DROP_LIB (delete this library from the unpacked pack,
# to exercise the ldd preflight), GPU_CHECK_ASSUME_GPU=1 (apply the GPU
# machine's rule that skips fail).
set -o pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT_DIR="$SCRIPT_DIR/out"
STAGE="$OUT_DIR/pack"
TARBALL="$OUT_DIR/out.tar.xz"
LIMIT_BYTES=$((64 * 1024 * 1024))

die() { echo "check.sh: $*" >&2; exit 1; }
now() { date +%s; }

# Run order and per-step timeouts (seconds): cheap first. Binaries not named
# here run after these, with the default timeout.
ORDER=(
  common.kernels.cuda.cuda_status_test:30
  common.kernels.cuda.cuda_backend_factory_test:30
  common.comm.nccl.nccl_communicator_options_test:30
  common.sync.cuda_device_stepper_registry_test:30
  tests.gpu.saxpy_test:30
  common.comm.nccl.nccl_transport_test:60
  common.kernels.cuda.optimizer_kernels_test:60
  common.kernels.cuda.gemm_test:60
  common.kernels.cuda.cuda_backend_test:90
  common.kernels.cuda.cuda_activation_test:60
  common.comm.nccl.nccl_communicator_test:60
  common.sync.cuda_allreduce_sync_test:60
  services.worker.trainer_cuda_test:240
)
DEFAULT_TEST_TIMEOUT_S=60
BENCH_TIMEOUT_S=120
GPT_TIMEOUT_S=120

# ---------------------------------------------------------------- pack ----
pack() {
  local root; root="$(cd "$SCRIPT_DIR/../.." && pwd)"
  cd "$root" || die "cannot cd to $root"
  local bazel="${BAZEL:-bazel}"
  # shellcheck disable=SC2206
  local startup=(${BAZEL_STARTUP_FLAGS:-})
  # shellcheck disable=SC2206
  local flags=(${BAZEL_FLAGS:---jobs=2})
  command -v "$bazel" >/dev/null || die "bazel not found (pack runs on the build machine)"
  [[ -x /usr/local/cuda/bin/nvcc || -n "${TANDEM_CUDA_PATH:-}" ]] ||
    die "no CUDA toolkit: GPU targets are not defined without nvcc"

  local universe="" d
  for d in */; do
    d="${d%/}"
    [[ "$d" == bazel-* || -L "$d" ]] && continue
    find "$d" -name 'BUILD*' -print -quit | grep -q . || continue
    universe="${universe:+$universe + }//$d/..."
  done
  local gpu_query="attr(tags, '(^|[ ,\[])gpu([ ,\]]|\$)', tests($universe))"
  local gpu_tests all_tests
  gpu_tests=$("$bazel" "${startup[@]}" query --keep_going "$gpu_query" 2>/dev/null | sort)
  all_tests=$("$bazel" "${startup[@]}" query --keep_going \
      "$gpu_query + tests(//common/kernels/cuda/... + //common/comm/nccl/...) + attr(name, '^cuda_', tests(//common/sync/... + //common/codec/... + //common/optim/...))" \
      2>/dev/null | sort)
  [[ -n "$gpu_tests" ]] || die "bazel query found no gpu-tagged tests"
  local targets=($all_tests //tools/gpu:kernel_bench //tools/gpu:gpt_step_bench)
  echo "pack: building ${#targets[@]} targets"
  "$bazel" "${startup[@]}" build --keep_going "${flags[@]}" "${targets[@]}" ||
    echo "pack: WARNING: some targets failed to build; packing the rest" >&2
  local bin_root; bin_root="$("$bazel" "${startup[@]}" info "${flags[@]}" bazel-bin 2>/dev/null)"
  [[ -d "$bin_root" ]] || die "cannot locate bazel-bin"

  rm -rf "$STAGE" "$TARBALL"
  mkdir -p "$STAGE/bin/tests" "$STAGE/lib" "$STAGE/glibc"
  local missing=() sources=() t
  : > "$STAGE/TESTS"
  for t in "${targets[@]}"; do
    local pkg="${t#//}"; pkg="${pkg%%:*}"; local name="${t##*:}"
    local src="$bin_root/$pkg/$name"
    if [[ ! -x "$src" ]]; then missing+=("$t"); continue; fi
    sources+=("$src")
    if [[ "$t" == //tools/gpu:* ]]; then
      cp "$src" "$STAGE/bin/$name"
    else
      local dest; dest="$(echo "$pkg/$name" | tr '/' '.')"
      cp "$src" "$STAGE/bin/tests/$dest"
      local kind=cuda
      grep -qxF "$t" <<< "$gpu_tests" && kind=gpu
      printf '%s\t%s\n' "$dest" "$kind" >> "$STAGE/TESTS"
    fi
  done
  chmod -R u+w "$STAGE/bin"

  # The ldd closure of the originals (their RUNPATH finds Bazel's _solib
  # libraries), minus the vDSO, the driver and CUDA's own libraries; glibc
  # apart, used only when the GPU machine's glibc is older.
  local skip_re='^(linux-vdso|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia-|libnvrtc|libnvJitLink)'
  local glibc_re='^(ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so)'
  local f lib path base
  for f in "${sources[@]}"; do
    while read -r lib path; do
      base="$(basename "$lib")"
      [[ "$base" =~ $skip_re ]] && continue
      [[ -f "$path" ]] || { echo "pack: WARNING: $(basename "$f") needs $lib: not found" >&2; continue; }
      if [[ "$base" =~ $glibc_re ]]; then cp -L "$path" "$STAGE/glibc/$base"
      else cp -L "$path" "$STAGE/lib/$base"; fi
    done < <(ldd "$f" | awk '/=>/ {print $1, $3} /ld-linux/ && !/=>/ {print $1, $1}')
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/glibc/" 2>/dev/null || true
  chmod -R u+w "$STAGE/lib" "$STAGE/glibc"
  strip --strip-unneeded "$STAGE"/bin/*_bench "$STAGE"/bin/tests/* "$STAGE"/lib/*.so* 2>/dev/null || true
  getconf GNU_LIBC_VERSION | awk '{print $2}' > "$STAGE/GLIBC_VERSION"
  cp "$SCRIPT_DIR/gpt_step_torch.py" "$STAGE/"
  {
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
    ls -1 "$STAGE/bin" "$STAGE/bin/tests"
  } > "$STAGE/MANIFEST"

  local raw; raw=$(du -sb "$STAGE" | awk '{print $1}')
  echo "pack: $(ls "$STAGE/bin/tests" | wc -l) test binaries + $(ls "$STAGE"/bin/*_bench 2>/dev/null | wc -l) benchmarks, $(ls "$STAGE/lib" | wc -l) libraries, $((raw / 1024 / 1024)) MiB unpacked"
  tar -C "$STAGE" -cf - . | xz -T0 -6 > "$TARBALL" || die "compressing the pack failed"
  local size; size=$(stat -c %s "$TARBALL")
  echo "pack: $TARBALL is $size bytes ($((size / 1024 / 1024)) MiB; limit 64 MiB)"
  if ((${#missing[@]})); then echo "pack: NOT BUILT: ${missing[*]}" >&2; fi
  ((size < LIMIT_BYTES)) || die "pack is $((size / 1024 / 1024)) MiB compressed, over the 64 MiB limit"
  ((${#missing[@]} == 0)) || exit 1
}

# ----------------------------------------------------------------- run ----
nvidia_lib_dirs() {
  local sites=() py d l
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    while IFS= read -r d; do sites+=("$d"); done < <("$py" - <<'PY' 2>/dev/null
import site, sys
paths = list(getattr(site, "getsitepackages", lambda: [])())
paths.append(site.getusersitepackages())
paths += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
print("\n".join(paths))
PY
)
  done
  [[ -n "${VIRTUAL_ENV:-}" ]] && sites+=("$VIRTUAL_ENV"/lib/python3*/site-packages)
  sites+=(/opt/*/lib/python3*/site-packages "$HOME"/*/lib/python3*/site-packages
          /usr/local/lib/python3*/dist-packages /usr/lib/python3/dist-packages)
  local seen=":"
  for d in "${sites[@]}"; do
    for l in "$d"/nvidia/*/lib "$d"/nvidia/cu*/lib; do
      [[ -d "$l" && "$seen" != *":$l:"* ]] || continue
      seen="$seen$l:"
      echo "$l"
    done
  done
}

# xz and gzip may be missing on the GPU machine; Python's lzma / tarfile are not.
unpack_to() {
  if command -v xz >/dev/null; then xz -dc "$TARBALL" | tar -C "$1" -xf -
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$TARBALL" "$1"
  fi
}

version_ge() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" == "$2" ]]; }

# State shared by the run's helpers.
RUN_START=0; RUN_END=0; HAVE_GPU=0; LOGS=""; SUMMARY=""; RESULTS=""
TOTAL_P=0; TOTAL_F=0; TOTAL_S=0; FINISHED=0; TABLE_PRINTED=0; CURRENT_STEP=""

remaining() { echo $((RUN_END - $(now))); }

# Appends one row and publishes the summary and the logs at once.
record() {  # record NAME KIND PASSED FAILED SKIPPED SECONDS STATUS...
  local name=$1 kind=$2 p=$3 f=$4 s=$5 secs=$6; shift 6
  TOTAL_P=$((TOTAL_P + p)); TOTAL_F=$((TOTAL_F + f)); TOTAL_S=$((TOTAL_S + s))
  local status="$*"
  ((${#status} > 240)) && status="${status:0:237}..."  # the full text is in the logs
  printf '%-50s %-5s %6s %6s %7s %5s  %s\n' "$name" "$kind" "$p" "$f" "$s" "$secs" "$status" >> "$SUMMARY"
  publish
}

publish() {
  [[ -n "$RESULTS" ]] || return 0
  cp "$SUMMARY" "$RESULTS/gpu-check-summary.txt" 2>/dev/null
  { tar -C "$LOGS/.." -czf "$RESULTS/gpu-check.tar.gz.tmp" "$(basename "$LOGS")" 2>/dev/null ||
    python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1], "w:gz"); t.add(sys.argv[2], "logs"); t.close()' \
      "$RESULTS/gpu-check.tar.gz.tmp" "$LOGS" 2>/dev/null; } &&
    mv -f "$RESULTS/gpu-check.tar.gz.tmp" "$RESULTS/gpu-check.tar.gz"
}

print_table() {
  ((TABLE_PRINTED)) && return 0
  TABLE_PRINTED=1
  echo
  [[ -f "$LOGS/kernel_bench.log" ]] && {
    echo "==== kernel_bench ===="
    grep -vE '^\s*$' "$LOGS/kernel_bench.log" | tail -40
    echo
  }
  if ls "$LOGS"/gpt_step_*.log >/dev/null 2>&1; then
    echo "==== GPT training step (tandem vs PyTorch eager) ===="
    cat "$LOGS"/gpt_step_*.log | grep -h '^gpt_step ' || echo "(no gpt_step result lines)"
    echo
  fi
  echo "==== GPU check ($( ((HAVE_GPU)) && echo "GPU: skips fail" || echo "no GPU: rehearsal, skips allowed"); deadline ${GPU_CHECK_DEADLINE_S:-480} s; $(( $(now) - RUN_START )) s used) ===="
  printf '%-50s %-5s %6s %6s %7s %5s  %s\n' step kind passed failed skipped secs status
  cat "$SUMMARY"
  [[ -n "$RESULTS" ]] && echo "(summary: $RESULTS/gpu-check-summary.txt, logs: $RESULTS/gpu-check.tar.gz)"
  echo "${TOTAL_P} passed, ${TOTAL_F} failed, ${TOTAL_S} skipped"
}

on_signal() {
  [[ -n "$STEP_PID" ]] && kill -TERM "$STEP_PID" 2>/dev/null
  exit "$1"
}

on_exit() {
  if ((!FINISHED)); then
    [[ -n "$CURRENT_STEP" ]] && record "$CURRENT_STEP" "-" 0 1 0 "-" "INTERRUPTED"
    echo "INTERRUPTED: the run stopped before it finished" >> "$SUMMARY"
    publish
  fi
  print_table
}

# run_step NAME KIND TIMEOUT LOG CMD...: runs CMD under min(TIMEOUT, what is
# left minus a 5 s reserve); sets STEP_RC and STEP_SECS; returns 1 (and sets
# STEP_RC=-1) when there is no time left to start it.
STEP_RC=0; STEP_SECS=0; STEP_PID=""
run_step() {
  local name=$1 timeout_s=$2 log=$3; shift 3
  local left=$(( $(remaining) - 5 ))
  if ((left < 3)); then STEP_RC=-1; STEP_SECS=0; return 1; fi
  ((timeout_s > left)) && timeout_s=$left
  CURRENT_STEP="$name"
  local t0; t0=$(now)
  # In the background and waited for, so a TERM from outside is handled at
  # once (bash defers traps while a foreground child runs).
  timeout -k 5 "$timeout_s" "$@" > "$log" 2>&1 < /dev/null &
  STEP_PID=$!
  wait "$STEP_PID"
  STEP_RC=$?
  STEP_PID=""
  STEP_SECS=$(( $(now) - t0 ))
  CURRENT_STEP=""
  ((STEP_RC == 124 || STEP_RC == 137)) && echo "check.sh: TIMEOUT after ${timeout_s} s" >> "$log"
  return 0
}

run() {
  RUN_START=$(now)
  RUN_END=$((RUN_START + ${GPU_CHECK_DEADLINE_S:-480}))
  local orig_ld="${LD_LIBRARY_PATH:-}"
  local work="${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/tandem-gpu-check}"
  local pack="$work/pack"
  LOGS="$work/logs"
  rm -rf "$work"; mkdir -p "$pack" "$LOGS" || die "cannot create $work"
  SUMMARY="$LOGS/summary.txt"; : > "$SUMMARY"
  if [[ -n "${OUT:-}" ]]; then mkdir -p "$OUT" && RESULTS="$OUT"; fi
  trap on_exit EXIT
  trap 'on_signal 130' INT
  trap 'on_signal 143' TERM
  export NCCL_DEBUG=WARN

  echo "run: unpacking $TARBALL"
  [[ -f "$TARBALL" ]] || { record unpack - 0 1 0 0 "FAIL: no $TARBALL (run 'check.sh pack' on the build machine; carry tools/gpu/out/out.tar.xz)"; exit 1; }
  local t0; t0=$(now)
  if ! unpack_to "$pack" 2> "$LOGS/unpack.log"; then
    record unpack - 0 1 0 $(( $(now) - t0 )) "FAIL: $(tail -1 "$LOGS/unpack.log")"; exit 1
  fi
  record unpack - 0 0 0 $(( $(now) - t0 )) "ok: $(head -1 "$pack/MANIFEST")"
  [[ -n "${GPU_CHECK_REHEARSAL_DROP_LIB:-}" ]] && rm -f "$pack/lib/$GPU_CHECK_REHEARSAL_DROP_LIB"

  # ---- preflight
  {
    echo "== nvidia-smi"
    if command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi -L; then
      timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,mig.mode.current --format=csv
    else
      echo "nvidia-smi: not available or no GPU"
    fi
  } > "$LOGS/preflight.log" 2>&1
  if grep -q '^GPU [0-9]' "$LOGS/preflight.log"; then HAVE_GPU=1; fi
  [[ "${GPU_CHECK_ASSUME_GPU:-}" == 1 ]] && HAVE_GPU=1
  local gpu_name; gpu_name=$(grep -m1 '^GPU 0' "$LOGS/preflight.log" | sed 's/ (UUID.*//')
  if ((HAVE_GPU)); then record preflight:nvidia-smi - 1 0 0 0 "ok: ${gpu_name}"
  else record preflight:nvidia-smi - 0 0 1 0 "no GPU: rehearsal mode (gpu tests may skip)"; fi

  local nv; nv="$(nvidia_lib_dirs | paste -sd: -)"
  export LD_LIBRARY_PATH="$pack/lib${nv:+:$nv}${orig_ld:+:$orig_ld}:/usr/local/cuda/lib64"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$LOGS/preflight.log"
  local loader=()
  local host_glibc built_glibc
  host_glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  built_glibc="$(cat "$pack/GLIBC_VERSION" 2>/dev/null)"
  if [[ -n "$built_glibc" && -n "$host_glibc" ]] && ! version_ge "$host_glibc" "$built_glibc"; then
    echo "host glibc $host_glibc < $built_glibc: using the packed loader" >> "$LOGS/preflight.log"
    loader=("$pack/glibc/ld-linux-x86-64.so.2" --library-path "$LD_LIBRARY_PATH:$pack/glibc")
  fi

  # ldd of every binary, before anything runs.
  declare -A BROKEN=()
  local b missing_all=""
  for b in "$pack"/bin/tests/* "$pack"/bin/*_bench; do
    [[ -f "$b" ]] || continue
    local miss
    if ((${#loader[@]})); then
      miss=$("${loader[@]}" --list "$b" 2>&1 | awk '/not found/ {print $1}' | sort -u | paste -sd' ' -)
    else
      miss=$(ldd "$b" 2>&1 | awk '/not found/ {print $1}' | sort -u | paste -sd' ' -)
    fi
    if [[ -n "$miss" ]]; then
      BROKEN[$(basename "$b")]="$miss"
      missing_all="$missing_all $(basename "$b"): $miss;"
    fi
  done
  echo "== ldd: ${missing_all:-every library found}" >> "$LOGS/preflight.log"
  if [[ -n "$missing_all" ]]; then
    record preflight:ldd - 0 1 0 0 "FAIL: missing libraries:$missing_all"
  else
    record preflight:ldd - 1 0 0 0 "ok: $(ls "$pack"/bin/tests | wc -l) tests + benchmarks resolve"
  fi

  # python + torch, outside the pack's LD_LIBRARY_PATH (the wheels bring
  # their own NVIDIA libraries through their RPATHs).
  # The environment PyTorch runs in: the machine's own, never the pack's.
  local torch_env=(env -u LD_LIBRARY_PATH)
  [[ -n "$orig_ld" ]] && torch_env=(env LD_LIBRARY_PATH="$orig_ld")
  local py=""; py="$(command -v python3 || command -v python || true)"
  local torch_ok=0
  if [[ -n "$py" ]]; then
    "${torch_env[@]}" timeout 90 "$py" -c \
      'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' \
      > "$LOGS/preflight_torch.log" 2>&1
    grep -q 'available True' "$LOGS/preflight_torch.log" && torch_ok=1
  else
    echo "no python3" > "$LOGS/preflight_torch.log"
  fi
  if ((torch_ok)); then record preflight:torch - 1 0 0 0 "ok: $(head -1 "$LOGS/preflight_torch.log")"
  elif ((HAVE_GPU)); then record preflight:torch - 0 1 0 0 "FAIL: $(tail -1 "$LOGS/preflight_torch.log")"
  else record preflight:torch - 0 0 1 0 "no CUDA torch here: $(tail -1 "$LOGS/preflight_torch.log")"; fi

  # ---- rehearsal-only: a slow first step to exercise the deadline.
  if [[ -n "${GPU_CHECK_REHEARSAL_SLEEP_S:-}" ]]; then
    if run_step rehearsal_sleep "$GPU_CHECK_REHEARSAL_SLEEP_S" "$LOGS/rehearsal_sleep.log" sleep "$GPU_CHECK_REHEARSAL_SLEEP_S"; then
      if ((STEP_RC == 0)); then record rehearsal_sleep - 1 0 0 "$STEP_SECS" "ok"
      else record rehearsal_sleep - 0 1 0 "$STEP_SECS" "cut at the deadline (rc $STEP_RC)"; fi
    else
      record rehearsal_sleep - 0 1 0 0 "not run: deadline"
    fi
  fi

  # ---- tests, cheapest first
  declare -A KIND=() TIMEOUT=()
  local line name kind
  while IFS=$'\t' read -r name kind; do [[ -n "$name" ]] && KIND[$name]=$kind; done < "$pack/TESTS"
  local ordered=() entry
  for entry in "${ORDER[@]}"; do
    name=${entry%%:*}; TIMEOUT[$name]=${entry##*:}
    [[ -f "$pack/bin/tests/$name" ]] && ordered+=("$name")
  done
  for b in "$pack"/bin/tests/*; do
    name=$(basename "$b")
    [[ -n "${TIMEOUT[$name]:-}" ]] || ordered+=("$name")
  done
  export TEST_TMPDIR
  for name in "${ordered[@]}"; do
    kind=${KIND[$name]:-cuda}
    if [[ -n "${BROKEN[$name]:-}" ]]; then
      record "$name" "$kind" 0 1 0 0 "not run: missing ${BROKEN[$name]}"; continue
    fi
    TEST_TMPDIR="$(mktemp -d "$work/tmp.XXXXXX")"
    local log="$LOGS/$name.log"
    if ! run_step "$name" "${TIMEOUT[$name]:-$DEFAULT_TEST_TIMEOUT_S}" "$log" \
        "${loader[@]}" "$pack/bin/tests/$name"; then
      record "$name" "$kind" 0 1 0 0 "not run: deadline"; continue
    fi
    local rc=$STEP_RC p f s
    p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
    f=$(grep -oE '^\[  FAILED  \] [0-9]+ tests?,' "$log" | tail -1 | grep -oE '[0-9]+')
    s=$(grep -oE '^\[  SKIPPED \] [0-9]+ tests?,' "$log" | tail -1 | grep -oE '[0-9]+')
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    local status="ok"
    if ((rc == 124 || rc == 137)); then status="TIMEOUT (rc $rc)"; ((f == 0)) && f=1
    elif ((rc != 0)); then status="FAIL (rc $rc)"; ((f == 0)) && f=1
    fi
    if ((HAVE_GPU)) && [[ "$kind" == gpu ]] && ((s > 0)); then
      status="FAIL: $s skipped on a GPU machine: $(grep -E '^\[  SKIPPED \] [A-Za-z]' "$log" | sed 's/.*\] //; s/ (.*//' | awk '!seen[$0]++' | head -2 | paste -sd' ' -)"
      f=$((f + s)); s=0
    fi
    ((f > 0)) && [[ "$status" == ok ]] && status="FAIL"
    record "$name" "$kind" "$p" "$f" "$s" "$STEP_SECS" "$status"
    ((rc != 0)) && { echo "---- $name (rc $rc), last lines:"; tail -15 "$log"; }
    rm -rf "$TEST_TMPDIR"
  done

  # ---- kernel benchmark
  if [[ ! -x "$pack/bin/kernel_bench" ]]; then
    record kernel_bench bench 0 1 0 0 "not in the pack"
  elif [[ -n "${BROKEN[kernel_bench]:-}" ]]; then
    record kernel_bench bench 0 1 0 0 "not run: missing ${BROKEN[kernel_bench]}"
  elif ! ((HAVE_GPU)); then
    record kernel_bench bench 0 0 1 0 "skipped: no GPU"
  else
    # shellcheck disable=SC2086
    if run_step kernel_bench "$BENCH_TIMEOUT_S" "$LOGS/kernel_bench.log" \
        "${loader[@]}" "$pack/bin/kernel_bench" ${BENCH_FLAGS:-}; then
      local kernels; kernels=$(grep -cE '%$' "$LOGS/kernel_bench.log")
      if ((STEP_RC == 0)); then record kernel_bench bench 1 0 0 "$STEP_SECS" "ok: $kernels kernels vs memcpy_d2d"
      else record kernel_bench bench 0 1 0 "$STEP_SECS" "FAIL (rc $STEP_RC): $(tail -1 "$LOGS/kernel_bench.log" | cut -c1-80)"; fi
    else
      record kernel_bench bench 0 1 0 0 "not run: deadline"
    fi
  fi

  # ---- GPT step, tandem vs PyTorch eager, same model and batch
  local gpt_args=(--spec="${GPT_SPEC:-gpt:layers=12,heads=12,width=768,context=1024,vocab=50304}"
                  --batch="${GPT_BATCH:-8}" --iters="${GPT_ITERS:-10}")
  local math
  for math in ${GPT_MATH:-fp32 tf32}; do
    local tl="$LOGS/gpt_step_tandem.$math.log" pl="$LOGS/gpt_step_torch.$math.log"
    if ! ((HAVE_GPU)); then
      record "gpt_step tandem $math" bench 0 0 1 0 "skipped: no GPU"
      record "gpt_step torch $math" bench 0 0 1 0 "skipped: no GPU"
      continue
    fi
    if [[ ! -x "$pack/bin/gpt_step_bench" || -n "${BROKEN[gpt_step_bench]:-}" ]]; then
      record "gpt_step tandem $math" bench 0 1 0 0 "not runnable (not packed or missing libraries)"
    elif run_step "gpt_step tandem $math" "$GPT_TIMEOUT_S" "$tl" \
        "${loader[@]}" "$pack/bin/gpt_step_bench" "${gpt_args[@]}" --math="$math" \
        --profile_out="${RESULTS:-$LOGS}/plan_profile.$math"; then
      if ((STEP_RC == 0)) && grep -q '^gpt_step ' "$tl"; then
        record "gpt_step tandem $math" bench 1 0 0 "$STEP_SECS" "ok: $(grep -m1 '^gpt_step ' "$tl" | grep -oE '[0-9]+ tokens/s')"
      else record "gpt_step tandem $math" bench 0 1 0 "$STEP_SECS" "FAIL (rc $STEP_RC): $(tail -1 "$tl" | cut -c1-80)"; fi
    else
      record "gpt_step tandem $math" bench 0 1 0 0 "not run: deadline"
    fi
    if ((!torch_ok)); then
      record "gpt_step torch $math" bench 0 1 0 0 "not runnable: no CUDA torch"
    elif run_step "gpt_step torch $math" "$GPT_TIMEOUT_S" "$pl" \
        "${torch_env[@]}" "$py" "$pack/gpt_step_torch.py" "${gpt_args[@]}" --math="$math"; then
      local tp pp note=""
      tp=$(grep -m1 '^gpt_step ' "$tl" 2>/dev/null | grep -oE 'params=[0-9]+')
      pp=$(grep -m1 '^gpt_step ' "$pl" 2>/dev/null | grep -oE 'params=[0-9]+')
      if ((STEP_RC == 0)) && [[ -n "$pp" ]]; then
        local tt ptk
        tt=$(grep -m1 '^gpt_step ' "$tl" 2>/dev/null | grep -oE '[0-9]+ tokens/s' | grep -oE '^[0-9]+')
        ptk=$(grep -m1 '^gpt_step ' "$pl" | grep -oE '[0-9]+ tokens/s' | grep -oE '^[0-9]+')
        [[ -n "$tt" && -n "$ptk" ]] && note=", tandem/torch = $(awk -v a="$tt" -v b="$ptk" 'BEGIN{printf "%.2f", a/b}')"
        if [[ -n "$tp" && "$tp" != "$pp" ]]; then
          record "gpt_step torch $math" bench 0 1 0 "$STEP_SECS" "FAIL: not the same model (tandem $tp, torch $pp)"
        else
          record "gpt_step torch $math" bench 1 0 0 "$STEP_SECS" "ok: $ptk tokens/s, $pp$note"
        fi
      else
        record "gpt_step torch $math" bench 0 1 0 "$STEP_SECS" "FAIL (rc $STEP_RC): $(tail -1 "$pl" | cut -c1-80)"
      fi
    else
      record "gpt_step torch $math" bench 0 1 0 0 "not run: deadline"
    fi
  done

  FINISHED=1
  publish
  print_table
  ((TOTAL_F == 0))
}

# ------------------------------------------------------------ rehearse ----
# Here, without a GPU: the size of the pack, the preflight, the deadline, the
# per-step timeout cut to the deadline, and the summary of a run killed from
# outside.
rehearse() {
  [[ -f "$TARBALL" ]] || die "no $TARBALL: run 'check.sh pack' first"
  local size; size=$(stat -c %s "$TARBALL")
  echo "rehearse: pack $TARBALL = $size bytes ($((size / 1024 / 1024)) MiB; limit 64 MiB)"
  ((size < LIMIT_BYTES)) || die "the pack is over the 64 MiB carry limit"
  local base="${TMPDIR:-/tmp}/tandem-gpu-rehearsal"
  rm -rf "$base"; mkdir -p "$base"

  echo; echo "=== rehearsal 1: a full run without a GPU (deadline 480 s) ==="
  local t0; t0=$(now)
  OUT="$base/out1" GPU_CHECK_WORK="$base/w1" "$SCRIPT_DIR/check.sh" run
  echo "rehearse: run 1 exit $? after $(( $(now) - t0 )) s; \$OUT holds: $(ls "$base/out1" | paste -sd' ' -)"

  echo; echo "=== rehearsal 2: deadline 12 s with a 60 s first step (cut at the deadline; the rest not run) ==="
  t0=$(now)
  OUT="$base/out2" GPU_CHECK_WORK="$base/w2" GPU_CHECK_DEADLINE_S=12 GPU_CHECK_REHEARSAL_SLEEP_S=60 \
    "$SCRIPT_DIR/check.sh" run
  local rc=$?
  echo "rehearse: run 2 exit $rc after $(( $(now) - t0 )) s (must be about 12 s or less, non-zero)"

  echo; echo "=== rehearsal 3: killed from outside (SIGTERM at 5 s) ==="
  OUT="$base/out3" GPU_CHECK_WORK="$base/w3" GPU_CHECK_REHEARSAL_SLEEP_S=60 \
    "$SCRIPT_DIR/check.sh" run > "$base/run3.log" 2>&1 &
  local pid=$!
  sleep 5; kill -TERM "$pid"; wait "$pid"; rc=$?
  echo "rehearse: run 3 exit $rc; its last lines:"; tail -6 "$base/run3.log"
  echo "rehearse: \$OUT/gpu-check-summary.txt of run 3:"; cat "$base/out3/gpu-check-summary.txt"
  tar -tzf "$base/out3/gpu-check.tar.gz" | head -5

  echo; echo "=== rehearsal 4: the GPU machine's rules here (skips fail) and a library missing from the pack ==="
  # One of Bazel's own shared libraries: the system cannot supply it.
  local lib; lib=$(tar -tJf "$TARBALL" | grep -m1 -E '^\./lib/libcommon_Skernels_Scuda.*\.so' | xargs basename)
  OUT="$base/out4" GPU_CHECK_WORK="$base/w4" GPU_CHECK_ASSUME_GPU=1 GPU_CHECK_REHEARSAL_DROP_LIB="$lib" \
    "$SCRIPT_DIR/check.sh" run > "$base/run4.log" 2>&1
  echo "rehearse: run 4 exit $? (dropped $lib); its table:"
  sed -n '/^==== GPU check/,$p' "$base/run4.log"
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  rehearse) rehearse ;;
  *) echo "usage: $0 pack|run|rehearse" >&2; exit 2 ;;
esac
