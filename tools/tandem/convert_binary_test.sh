#!/usr/bin/env bash
# The standalone convert binary (the same command as `tandem convert`):
# --mode=text end to end, the two dataset directories it writes, --help,
# and one-line errors for bad flags.
set -u
BIN="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/tandem/convert"
T="${TEST_TMPDIR}"
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$T/texts" "$T/out"  # an empty --out_dir is fine
for i in $(seq 1 200); do echo "line $i of some text"; done > "$T/texts/a"
printf 'index' > "$T/texts/a.dat"
ln -s a "$T/texts/a.u8"

"$BIN" --mode=text --text_dir="$T/texts" --seq_len=32 --eval_fraction=0.1 \
    --out_dir="$T/out" --name=fortunes > "$T/stdout" 2> "$T/stderr" \
  || fail "text mode exited $?: $(cat "$T/stderr")"
bytes=$(stat -c %s "$T/texts/a")
windows=$((bytes / 33))
eval_n=$(( (windows + 5) / 10 ))  # round(windows * 0.1)
grep -q "read $bytes bytes from 1 file(s); wrote $((windows - eval_n)) train records to $T/out/train and $eval_n eval records to $T/out/eval" "$T/stdout" \
  || fail "unexpected summary: $(cat "$T/stdout") (bytes $bytes, windows $windows)"
ls "$T/out/train/"fortunes-00000-of-00001.tshard > /dev/null || fail "no train shard"
ls "$T/out/eval/"fortunes-00000-of-00001.tshard > /dev/null || fail "no eval shard"

# --text with explicit files gives the same train shard bytes.
mkdir -p "$T/out2"
"$BIN" --mode=text --text="$T/texts/a" --seq_len=32 --eval_fraction=0.1 \
    --out_dir="$T/out2" --name=fortunes > /dev/null 2>&1 || fail "--text exited $?"
cmp -s "$T/out/train/fortunes-00000-of-00001.tshard" "$T/out2/train/fortunes-00000-of-00001.tshard" \
  || fail "--text and --text_dir shards differ"

"$BIN" --help > "$T/help" || fail "--help exited $?"
for flag in --mode --text_dir --features --images --num_records; do
  grep -q -- "^  $flag=" "$T/help" || fail "--help lacks $flag: $(cat "$T/help")"
done

expect_error() {  # expect_error NEEDLE ARGS...: exit 2, NEEDLE on stderr, no output
  local needle="$1"; shift
  "$BIN" "$@" --out_dir="$T/never" > /dev/null 2> "$T/err"
  local rc=$?
  [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2"
  grep -q -- "$needle" "$T/err" || fail "'$*': stderr lacks '$needle': $(cat "$T/err")"
  [ ! -e "$T/never" ] || fail "'$*' wrote $T/never"
}
expect_error "exactly one of --text or --text_dir" --mode=text
expect_error "exactly one of --text or --text_dir" --mode=text --text="$T/texts/a" \
    --text_dir="$T/texts"
expect_error "no such directory" --mode=text --text_dir="$T/none"
expect_error "eval_fraction" --mode=text --text="$T/texts/a" --eval_fraction=1
expect_error "shorter seq_len" --mode=text --text="$T/texts/a" --seq_len=100000
expect_error "--mode must be npy, idx, tokens, text or synthetic" --mode=nope
echo PASS
