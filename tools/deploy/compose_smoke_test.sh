#!/usr/bin/env bash
# Bazel's face of compose_smoke.sh: runs it from the source tree (it needs
# the whole repository as the image build context) and reports a skip —
# "SKIP: reason" and a JUnit <skipped/> case, counted by tools/test.sh —
# where containers cannot run (exit 77).
set -uo pipefail
script=$(readlink -f "$TEST_SRCDIR/$TEST_WORKSPACE/tools/deploy/compose_smoke.sh")
[ -x "$script" ] || { echo "FAIL: compose_smoke.sh not found"; exit 1; }
out=$("$script" 2>&1 | tee /dev/stderr)
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 77 ]; then
  reason=$(printf '%s\n' "$out" | sed -n 's/^SKIP: //p' | tail -1)
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    reason_xml=$(printf '%s' "$reason" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g; s/"/\&quot;/g')
    cat > "$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="compose_smoke" tests="1" skipped="1">
<testcase name="compose_smoke" classname="tools.deploy"><skipped message="$reason_xml"/></testcase>
</testsuite></testsuites>
XML
  fi
  echo "compose_smoke_test: skipped: $reason"
  exit 0
fi
exit "$rc"
