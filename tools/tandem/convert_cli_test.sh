#!/bin/bash
# `tandem convert` as a user runs it: --help lists every mode's flags; npy
# arrays become one servable dataset; each bad input exits 2 with one line
# naming the file and the problem, and writes nothing (no --out_dir, no
# temporary directory left beside it).
set -u
tandem="$TEST_SRCDIR/tandem/tools/tandem/tandem"
fixtures="$TEST_SRCDIR/tandem/common/data/testdata"
T="$TEST_TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE PATTERN ARGS...: exit CODE, output matching grep -E PATTERN.
expect() {
  local code="$1" pattern="$2"
  shift 2
  local out rc
  out="$("$tandem" "$@" 2>&1)"
  rc=$?
  if [ "$rc" != "$code" ]; then
    fail "tandem $* exited $rc, want $code: $out"
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    fail "tandem $* output lacks /$pattern/: $out"
  fi
}

# refused PATTERN ARGS...: exit 2, PATTERN on one stderr line, nothing written.
n=0
refused() {
  local pattern="$1"
  shift
  n=$((n + 1))
  local out="$T/refused-$n"
  local err rc
  err="$("$tandem" convert "$@" --out_dir="$out" 2>&1 >/dev/null)"
  rc=$?
  [ "$rc" = 2 ] || fail "convert $* exited $rc, want 2: $err"
  grep -qE -- "$pattern" <<<"$err" || fail "convert $* stderr lacks /$pattern/: $err"
  [ "$(wc -l <<<"$err")" = 1 ] || fail "convert $*: more than one line: $err"
  [ ! -e "$out" ] || fail "convert $* created $out"
  ls -d "$out".tmp-* >/dev/null 2>&1 && fail "convert $* left $(ls -d "$out".tmp-*)"
}

expect 0 '^  convert +Turn \.npy arrays' --help
expect 0 '^usage: tandem convert' convert --help
expect 0 '^  --features=""' convert --help
expect 0 '^  --text_dir=""' convert --help
expect 0 '^  --images=""' convert --help
expect 0 '^  --num_records=1024 ' help convert

# Success: X (2, 3) float32, Y (2,) int64 -> DIR/train; and with an eval pair.
expect 0 'wrote 2 train samples \(features f32 \[3\], 2 classes\) to '"$T"'/ok/train' \
  convert --mode=npy --features="$fixtures/f32_2x3.npy" --labels="$fixtures/y_i64_2.npy" \
  --out_dir="$T/ok"
ls "$T/ok/train/"data-00000-of-00001.tshard >/dev/null || fail "no train shard in $T/ok"
[ -e "$T/ok/eval" ] && fail "an eval set without --eval_features"
mkdir -p "$T/empty"
expect 0 'and 2 eval samples to '"$T"'/empty/eval' \
  convert --mode=npy --features="$fixtures/f32_2x3.npy" --labels="$fixtures/y_i64_2.npy" \
  --eval_features="$fixtures/f32_2x3.npy" --eval_labels="$fixtures/y_i64_2.npy" \
  --out_dir="$T/empty"
ls "$T/empty/eval/"*.tshard >/dev/null || fail "no eval shard in $T/empty"

# Bad input.
head -c 140 "$fixtures/f32_2x3.npy" > "$T/truncated.npy"
refused 'no such file' --mode=npy --features="$T/none.npy" --labels="$fixtures/y_i64_2.npy"
refused 'truncated.npy: truncated' --mode=npy --features="$T/truncated.npy" \
  --labels="$fixtures/y_i64_2.npy"
refused "f64_2.npy: dtype '<f8' is not supported; supported: float32" --mode=npy \
  --features="$fixtures/f64_2.npy" --labels="$fixtures/y_i64_2.npy"
refused 'y_i32_3.npy holds 3 labels but .*f32_2x3.npy holds 2 samples' --mode=npy \
  --features="$fixtures/f32_2x3.npy" --labels="$fixtures/y_i32_3.npy"
refused 'Fortran order' --mode=npy --features="$fixtures/fortran_2x3.npy" \
  --labels="$fixtures/y_i64_2.npy"
refused 'labels must be integer class indices' --mode=npy --features="$fixtures/f32_2x3.npy" \
  --labels="$fixtures/f32_scalar.npy"
refused 'needs --features=X.npy and --labels=Y.npy' --mode=npy --features="$fixtures/f32_2x3.npy"
refused 'both --eval_features and --eval_labels' --mode=npy --features="$fixtures/f32_2x3.npy" \
  --labels="$fixtures/y_i64_2.npy" --eval_features="$fixtures/f32_2x3.npy"
refused '--images is not a flag of --mode=npy' --mode=npy --images=x.gz
refused '--mode must be npy, idx, tokens, text or synthetic' --mode=csv
refused 'no such directory' --mode=text --text_dir="$T/none"
expect 2 'exists and is not empty' convert --mode=npy --features="$fixtures/f32_2x3.npy" \
  --labels="$fixtures/y_i64_2.npy" --out_dir="$T/ok"
expect 2 'unknown flag --feature ' convert --mode=npy --feature=x

if [ "$failures" != 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo PASS
