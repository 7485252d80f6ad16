#!/usr/bin/env bash
# The shardserver binary and TANDEM_SHARD_PUSH_WINDOW_KB (docs/user-guide.md):
# a value that is not a size in KiB stops it with exit status 2 and a line
# naming the variable, the value and the range; a valid one starts it and
# it says which window it uses (unset: no such line, the default 64 KiB).
set -uo pipefail
bin=services/shardserver/shardserver
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/push-window.XXXXXX")
fail=0

for bad in abc -1 1048577 64k; do
  out=$(TANDEM_SHARD_PUSH_WINDOW_KB=$bad "$bin" --port=0 2>&1)
  rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL: TANDEM_SHARD_PUSH_WINDOW_KB=$bad exited $rc, want 2"; fail=1; fi
  if ! grep -qF "TANDEM_SHARD_PUSH_WINDOW_KB=$bad is not a size in KiB (0..1048576" <<<"$out"; then
    echo "FAIL: TANDEM_SHARD_PUSH_WINDOW_KB=$bad: no clear message in: $out"; fail=1
  fi
done

# start VALUE WANT: the server comes up (its "listening" line, read from a
# pipe: no polling) and its stderr holds WANT ("" = no window line at all).
start() {
  local value=$1 want=$2 line pid
  rm -f "$tmp/out"; mkfifo "$tmp/out"
  if [ -n "$value" ]; then
    TANDEM_SHARD_PUSH_WINDOW_KB=$value "$bin" --port=0 >"$tmp/out" 2>"$tmp/err" &
  else
    env -u TANDEM_SHARD_PUSH_WINDOW_KB "$bin" --port=0 >"$tmp/out" 2>"$tmp/err" &
  fi
  pid=$!
  exec 3<"$tmp/out"
  if ! read -t 60 -r line <&3 || [[ $line != "shardserver listening on "* ]]; then
    echo "FAIL: '$value': the server did not start: ${line:-} $(cat "$tmp/err")"; fail=1
  fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; exec 3<&-
  if [ -n "$want" ]; then
    grep -qF "$want" "$tmp/err" || { echo "FAIL: '$value': no '$want' in: $(cat "$tmp/err")"; fail=1; }
  elif grep -q "push window" "$tmp/err"; then
    echo "FAIL: unset: a window line: $(cat "$tmp/err")"; fail=1
  fi
}
start 128 "shardserver: push window 128 KiB (TANDEM_SHARD_PUSH_WINDOW_KB)"
start 0 "push window auto-tuned by gRPC"
start "" ""

[ $fail -eq 0 ] && echo "TANDEM_SHARD_PUSH_WINDOW_KB: refused when bad, used when valid"
exit $fail
