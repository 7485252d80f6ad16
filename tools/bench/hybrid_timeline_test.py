#!/usr/bin/env python3
"""hybrid_timeline.py on a made-up trace whose phases are known: two
workers, one shard server, steps 1-4 of 1000 ms (the middle ones, 2 and 3,
are summarized), and a trace with no steps is refused with a message."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hybrid_timeline  # noqa: E402

MS = 1000  # trace timestamps are in microseconds


def span(pid, name, ts_ms, dur_ms, step=None):
    e = {"ph": "X", "pid": pid, "tid": 1, "name": name, "ts": ts_ms * MS, "dur": dur_ms * MS}
    if step is not None:
        e["args"] = {"step": step}
    return e


def trace():
    ev = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "worker rank 0"}},
          {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "worker rank 1"}},
          {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "shard server shard-0"}}]
    for s in range(1, 5):
        t0 = s * 1000
        for w, late in ((0, 0), (1, 40)):  # worker 1's forward waits 40 ms longer
            ev.append(span(w, "step", t0, 1000, s))
            ev.append(span(w, "forward", t0, 10 + late, s))
            ev.append(span(w, "push", t0 + 20 + late, 100, s))
            ev.append(span(w, "push", t0 + 120 + late, 500, s))  # last write ends at 620 + late
            ev.append(span(w, "finish step", t0 + 20 + late, 700, s))
        ev.append(span(9, "push chunk", t0 + 200, 1))
        ev.append(span(9, "push chunk", t0 + 699, 1))
    return {"traceEvents": ev}


class SummarizeTest(unittest.TestCase):
    def test_phases_of_the_middle_steps(self):
        rows = hybrid_timeline.summarize(*self._load(trace()))
        self.assertEqual(rows["step"], [1000, 1000])  # steps 2 and 3
        self.assertEqual(sorted(rows["forward end (params landed)"]), [10, 10, 50, 50])
        self.assertEqual(sorted(rows["push first start"]), [20, 20, 60, 60])
        self.assertEqual(sorted(rows["push last end (written)"]), [620, 620, 660, 660])
        self.assertEqual(rows["node push start spread"], [40, 40])
        self.assertEqual(rows["server first chunk complete"], [201, 201])
        self.assertEqual(rows["server last chunk complete"], [700, 700])

    def test_prints_and_refuses_a_trace_without_steps(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
            good, empty = os.path.join(d, "t.json"), os.path.join(d, "e.json")
            with open(good, "w") as f:
                json.dump(trace(), f)
            with open(empty, "w") as f:
                json.dump({"traceEvents": []}, f)
            script = os.path.join(HERE, "hybrid_timeline.py")
            out = subprocess.run([sys.executable, script, good], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("over 2 step(s)", out.stdout)
            self.assertRegex(out.stdout, r"node push start spread\s+40")
            bad = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("no two consecutive worker steps", bad.stderr)

    @staticmethod
    def _load(t):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                         dir=os.environ.get("TEST_TMPDIR")) as f:
            json.dump(t, f)
        try:
            return hybrid_timeline.load(f.name)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
