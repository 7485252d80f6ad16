#!/usr/bin/env bash
# Runs every tandem test (installing what is missing first) and ends with the
# line `N passed, N failed, N skipped`, counted per test case from Bazel's
# results. Extra arguments go to `bazel test` (e.g. a target pattern:
# tools/test.sh //common/...). GPU tests (tag gpu) run too and report
# skipped without a device.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh --check >/dev/null 2>&1 || tools/setup.sh || exit 1

targets=("//...")
args=()
for a in "$@"; do
  case "$a" in
    //*|-//*) targets=("$a") ;;
    *) args+=("$a") ;;
  esac
done

# A whole-tree run also checks that no two packages depend on each other
# (tools/package_cycles.py: a sandboxed test cannot query the workspace).
cycles_rc=0
if [ "${targets[*]}" = "//..." ]; then
  tools/package_cycles.py || cycles_rc=1
fi

log=$(mktemp /tmp/tandem-test.XXXXXX)
bazel test --keep_going --test_summary=short --test_output=errors \
  --test_tag_filters=-benchmark,-manual "${args[@]}" -- "${targets[@]}" 2>&1 \
  | grep --line-buffered -v 'linux-sandbox' | tee "$log"
bazel_rc=${PIPESTATUS[0]}

tools/test_summary.py "$log" "$(bazel info bazel-testlogs 2>/dev/null)"
summary_rc=$?
rm -f "$log"
# Bazel exit 4 = no test targets; 0 = all passed. Anything else is a failure
# even when every counted case passed (e.g. a non-test target failed to build).
if [ $summary_rc -ne 0 ] || [ $cycles_rc -ne 0 ] ||
   { [ $bazel_rc -ne 0 ] && [ $bazel_rc -ne 4 ]; }; then
  exit 1
fi
exit 0
