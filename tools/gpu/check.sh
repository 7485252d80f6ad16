#!/usr/bin/env bash
# tools/gpu/check.sh — the whole GPU check in two halves.
#
#   tools/gpu/check.sh pack   # here (Bazel, CUDA toolkit, no GPU needed)
#   tools/gpu/check.sh run    # on the GPU machine (no Bazel there)
#
# pack builds every test tagged "gpu" plus //tools/gpu:kernel_bench, and
# gathers the binaries with the non-CUDA shared libraries they load (their
# ldd closure minus the driver and the CUDA libraries) into tools/gpu/out/
# (kept under 64 MiB; git-ignored). glibc goes to out/glibc/ and is used only
# when the GPU machine's glibc is older than the one we built against.
#
# run sets LD_LIBRARY_PATH to out/lib plus the Python virtualenv's
# site-packages/nvidia/*/lib (cuBLAS, cudart, NCCL from the PyTorch wheels),
# runs each test binary and the benchmark, and prints a short table last,
# ending with the line "N passed, N failed, N skipped" (tests, not binaries).
# Logs go to out/logs/ and, when $OUT is set (the device runner's export
# folder), to $OUT/gpu-check/ as well. Exit status: 0 when every test binary
# passed and the benchmark ran.
#
# Environment (pack): BAZEL (default bazel), BAZEL_STARTUP_FLAGS (e.g.
# "--output_base=/root/.cache/bazel-ob-me"), BAZEL_FLAGS (default "-j 2").
# Environment (run): TEST_TIMEOUT_S (default 600), BENCH_FLAGS (passed to
# kernel_bench).
#
# GPT step: GPT_SPEC (default gpt:layers=12,heads=12,width=768,context=1024,
# vocab=50304), GPT_BATCH (8), GPT_ITERS (10), GPT_MATH ("fp32 tf32") run
# gpt_step_bench and gpt_step_torch.py (PyTorch eager) with the same values.
set -o pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The script also works from inside a copied pack folder.
if [[ -d "$SCRIPT_DIR/bin" ]]; then PACK="$SCRIPT_DIR"; else PACK="$SCRIPT_DIR/out"; fi
LIMIT_BYTES=$((64 * 1024 * 1024))

die() { echo "check.sh: $*" >&2; exit 1; }

# ---------------------------------------------------------------- pack ----
pack() {
  local root; root="$(cd "$SCRIPT_DIR/../.." && pwd)"
  cd "$root" || die "cannot cd to $root"
  local bazel="${BAZEL:-bazel}"
  # shellcheck disable=SC2206
  local startup=(${BAZEL_STARTUP_FLAGS:-})
  # shellcheck disable=SC2206
  local flags=(${BAZEL_FLAGS:--j 2})
  command -v "$bazel" >/dev/null || die "bazel not found (pack runs on the build machine)"
  [[ -x /usr/local/cuda/bin/nvcc || -n "${TANDEM_CUDA_PATH:-}" ]] ||
    die "no CUDA toolkit: GPU targets are not defined without nvcc"

  # Every top-level package tree except Bazel's convenience symlinks.
  local universe="" d
  for d in */; do
    d="${d%/}"
    [[ "$d" == bazel-* || -L "$d" ]] && continue
    find "$d" -name 'BUILD*' -print -quit | grep -q . || continue
    universe="${universe:+$universe + }//$d/..."
  done
  local tests
  tests=$("$bazel" "${startup[@]}" query --keep_going \
      "attr(tags, '(^|[ ,\[])gpu([ ,\]]|\$)', tests($universe)) + tests(//common/kernels/cuda/...)" \
      2>/dev/null | sort)
  [[ -n "$tests" ]] || die "bazel query found no gpu-tagged tests"
  local targets=($tests //tools/gpu:kernel_bench //tools/gpu:gpt_step_bench)
  echo "pack: building ${#targets[@]} targets"
  "$bazel" "${startup[@]}" build --keep_going "${flags[@]}" "${targets[@]}" ||
    echo "pack: WARNING: some targets failed to build; packing the rest" >&2
  local bin_root; bin_root="$("$bazel" "${startup[@]}" info "${flags[@]}" bazel-bin 2>/dev/null)"
  [[ -d "$bin_root" ]] || die "cannot locate bazel-bin"

  rm -rf "$PACK"
  mkdir -p "$PACK/bin/tests" "$PACK/lib" "$PACK/glibc"
  local missing=() sources=()
  for t in "${targets[@]}"; do
    local pkg="${t#//}"; pkg="${pkg%%:*}"; local name="${t##*:}"
    local src="$bin_root/$pkg/$name"
    if [[ ! -x "$src" ]]; then
      # The GPT step needs common/nn; its absence only skips that row.
      [[ "$t" == //tools/gpu:gpt_step_bench ]] ||  missing+=("$t")
      [[ "$t" == //tools/gpu:gpt_step_bench ]] && echo "pack: WARNING: gpt_step_bench did not build; run will skip the GPT step" >&2
      continue
    fi
    sources+=("$src")
    local dest_name; dest_name="$(echo "$pkg/$name" | tr '/' '.')"
    if [[ "$t" == //tools/gpu:kernel_bench || "$t" == //tools/gpu:gpt_step_bench ]]; then
      cp "$src" "$PACK/bin/$name"
    else
      cp "$src" "$PACK/bin/tests/$dest_name"
    fi
  done
  chmod -R u+w "$PACK/bin"

  # The ldd closure: everything except the vDSO, the driver and CUDA's own
  # libraries (the GPU machine brings those); glibc kept apart.
  local skip_re='^(linux-vdso|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia-|libnvrtc|libnvJitLink)'
  local glibc_re='^(ld-linux-x86-64\.so|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so)'
  local f lib path base
  # ldd the originals: their RUNPATH ($ORIGIN/../_solib_k8) finds Bazel's
  # per-target shared libraries, which the copies could not.
  for f in "${sources[@]}"; do
    while read -r lib path; do
      base="$(basename "$lib")"
      [[ "$base" =~ $skip_re ]] && continue
      [[ -f "$path" ]] || { echo "pack: WARNING: $(basename "$f") needs $lib: not found" >&2; continue; }
      if [[ "$base" =~ $glibc_re ]]; then
        cp -L "$path" "$PACK/glibc/$base"
      else
        cp -L "$path" "$PACK/lib/$base"
      fi
    done < <(ldd "$f" | awk '/=>/ {print $1, $3} /ld-linux/ && !/=>/ {print $1, $1}')
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$PACK/glibc/" 2>/dev/null || true
  chmod -R u+w "$PACK/lib" "$PACK/glibc"
  strip --strip-unneeded "$PACK"/bin/*_bench "$PACK"/bin/tests/* "$PACK"/lib/*.so* 2>/dev/null || true
  getconf GNU_LIBC_VERSION | awk '{print $2}' > "$PACK/GLIBC_VERSION"
  cp "$SCRIPT_DIR/check.sh" "$SCRIPT_DIR/gpt_step_torch.py" "$PACK/"
  {
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    ls -1 "$PACK/bin/tests"
  } > "$PACK/MANIFEST"

  local size; size=$(du -sb "$PACK" | awk '{print $1}')
  echo "pack: $(ls "$PACK/bin/tests" | wc -l) test binaries + kernel_bench, $(ls "$PACK/lib" | wc -l) libraries, $((size / 1024 / 1024)) MiB in $PACK"
  if ((${#missing[@]})); then echo "pack: NOT BUILT: ${missing[*]}" >&2; fi
  ((size < LIMIT_BYTES)) || die "pack is $((size / 1024 / 1024)) MiB, over the 64 MiB limit"
  ((${#missing[@]} == 0)) || exit 1
}

# ----------------------------------------------------------------- run ----
nvidia_lib_dirs() {
  local sites=() py d
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
    for l in "$d"/nvidia/*/lib; do
      [[ -d "$l" && "$seen" != *":$l:"* ]] || continue
      seen="$seen$l:"
      echo "$l"
    done
  done
}

version_ge() {  # version_ge A B: A >= B
  [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" == "$2" ]]
}

run() {
  [[ -d "$PACK/bin" ]] || die "no pack at $PACK; run 'check.sh pack' on the build machine first"
  local logs="$PACK/logs"
  mkdir -p "$logs" 2>/dev/null || logs="$(mktemp -d)"
  local nv; nv="$(nvidia_lib_dirs | paste -sd: -)"
  [[ -n "$nv" ]] || echo "run: WARNING: no site-packages/nvidia/*/lib found; relying on /usr/local/cuda/lib64" >&2
  export LD_LIBRARY_PATH="$PACK/lib${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:/usr/local/cuda/lib64"
  local loader=()
  local host_glibc; host_glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  local built_glibc; built_glibc="$(cat "$PACK/GLIBC_VERSION" 2>/dev/null)"
  if [[ -n "$built_glibc" && -n "$host_glibc" ]] && ! version_ge "$host_glibc" "$built_glibc"; then
    echo "run: host glibc $host_glibc < $built_glibc: using the packed loader"
    loader=("$PACK/glibc/ld-linux-x86-64.so.2" --library-path "$LD_LIBRARY_PATH:$PACK/glibc")
  fi
  command -v nvidia-smi >/dev/null && nvidia-smi -L
  echo "run: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  export TEST_TMPDIR="${TEST_TMPDIR:-$(mktemp -d)}"
  local timeout_cmd=()
  command -v timeout >/dev/null && timeout_cmd=(timeout "${TEST_TIMEOUT_S:-600}")

  local rows=() total_p=0 total_f=0 total_s=0 bad=0 t name rc p f s
  for t in "$PACK"/bin/tests/*; do
    name="$(basename "$t")"
    "${timeout_cmd[@]}" "${loader[@]}" "$t" > "$logs/$name.log" 2>&1
    rc=$?
    p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$logs/$name.log" | tail -1 | grep -oE '[0-9]+$')
    f=$(grep -oE '^\[  FAILED  \] [0-9]+ tests?,' "$logs/$name.log" | tail -1 | grep -oE '[0-9]+')
    s=$(grep -oE '^\[  SKIPPED \] [0-9]+ tests?,' "$logs/$name.log" | tail -1 | grep -oE '[0-9]+')
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    if ((rc != 0 && f == 0)); then f=1; fi   # crashed or timed out
    ((rc != 0)) && bad=1
    total_p=$((total_p + p)); total_f=$((total_f + f)); total_s=$((total_s + s))
    rows+=("$(printf '%-58s %6s %6s %7s %4s' "$name" "$p" "$f" "$s" "$rc")")
    ((rc != 0)) && { echo "---- $name (rc $rc), last lines:"; tail -25 "$logs/$name.log"; }
  done

  # shellcheck disable=SC2086
  "${loader[@]}" "$PACK/bin/kernel_bench" ${BENCH_FLAGS:-} > "$logs/kernel_bench.log" 2>&1
  local bench_rc=$?
  ((bench_rc != 0)) && bad=1

  # GPT training step, tandem vs PyTorch eager on the same model and batch.
  local gpt_rows=() gpt_args=(--spec="${GPT_SPEC:-gpt:layers=12,heads=12,width=768,context=1024,vocab=50304}"
                              --batch="${GPT_BATCH:-8}" --iters="${GPT_ITERS:-10}")
  local math
  for math in ${GPT_MATH:-fp32 tf32}; do
    if [[ -x "$PACK/bin/gpt_step_bench" ]]; then
      "${timeout_cmd[@]}" "${loader[@]}" "$PACK/bin/gpt_step_bench" "${gpt_args[@]}" --math="$math" \
          > "$logs/gpt_step_bench.$math.log" 2>&1 || bad=1
      gpt_rows+=("$(grep '^gpt_step ' "$logs/gpt_step_bench.$math.log" || echo "gpt_step tandem math=$math FAILED: $(tail -1 "$logs/gpt_step_bench.$math.log")")")
    fi
    local py; py="$(command -v python3 || command -v python)"
    if [[ -n "$py" ]] && "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
      # The venv's own NVIDIA libraries, not our pack, for PyTorch.
      env LD_LIBRARY_PATH="$nv" "${timeout_cmd[@]}" "$py" "$PACK/gpt_step_torch.py" "${gpt_args[@]}" --math="$math" \
          > "$logs/gpt_step_torch.$math.log" 2>&1
      gpt_rows+=("$(grep '^gpt_step ' "$logs/gpt_step_torch.$math.log" || echo "gpt_step torch math=$math FAILED: $(tail -1 "$logs/gpt_step_torch.$math.log")")")
    else
      gpt_rows+=("gpt_step torch: skipped (no python with CUDA torch)")
    fi
  done

  [[ -n "${OUT:-}" && -d "${OUT:-}" ]] && { mkdir -p "$OUT/gpu-check"; cp "$logs"/*.log "$OUT/gpu-check/" 2>/dev/null; }

  echo
  echo "==== kernel_bench (rc $bench_rc) ===="
  if ((bench_rc == 0)); then grep -vE '^\s*$' "$logs/kernel_bench.log"; else tail -20 "$logs/kernel_bench.log"; fi
  echo
  if ((${#gpt_rows[@]})); then
    echo "==== GPT training step ===="
    printf '%s\n' "${gpt_rows[@]}"
    echo
  fi
  echo "==== gpu tests ===="
  printf '%-58s %6s %6s %7s %4s\n' "binary" "passed" "failed" "skipped" "rc"
  printf '%s\n' "${rows[@]}"
  echo "${total_p} passed, ${total_f} failed, ${total_s} skipped"
  return $bad
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac
