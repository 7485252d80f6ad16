#!/usr/bin/env python3
"""Counts test cases from a `bazel test --test_summary=short` log and the
JUnit XML files under bazel-testlogs/, and prints `N passed, N failed, N skipped`.

A target that failed to build, timed out or produced no XML counts as one
failed test; otherwise each gtest case counts once (result="skipped" cases,
i.e. GTEST_SKIP, count as skipped). Usage: test_summary.py BAZEL_LOG TESTLOGS_DIR
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|SKIPPED)\b")


def count_xml(path):
    """Returns (passed, failed, skipped) for one test.xml, or None."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return None
    passed = failed = skipped = 0
    cases = root.iter("testcase")
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped += 1
        elif case.get("status", "run") == "notrun":
            skipped += 1
        else:
            passed += 1
    if passed + failed + skipped == 0:
        return None
    return passed, failed, skipped


def main():
    log_path, testlogs = sys.argv[1], sys.argv[2]
    totals = [0, 0, 0]
    failed_targets = []
    with open(log_path, errors="replace") as f:
        for line in f:
            m = STATUS.match(line.strip())
            if not m:
                continue
            target, status = m.group(1), m.group(2)
            if status == "SKIPPED":  # filtered out by tags; nothing ran
                continue
            xml = os.path.join(testlogs, target[2:].replace(":", "/"), "test.xml")
            counts = count_xml(xml) if status in ("PASSED", "FAILED", "FLAKY") else None
            if counts is None:
                counts = (1, 0, 0) if status == "PASSED" else (0, 1, 0)
            elif status != "PASSED" and counts[1] == 0:
                counts = (counts[0], 1, counts[2])  # crashed after its cases
            if counts[1]:
                failed_targets.append(f"{target} {status}")
            for i in range(3):
                totals[i] += counts[i]
    for t in failed_targets:
        print(f"failed: {t}")
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
