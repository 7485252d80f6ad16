#!/usr/bin/env python3
"""package_cycles.py on small hand-made `bazel query --output=graph` texts."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import package_cycles  # noqa: E402


def graph_text(edges):
    lines = ["digraph mygraph {", "  node [shape=box];"]
    for src, dst in edges:
        lines.append('  "%s"' % src)
        lines.append('  "%s" -> "%s"' % (src, dst))
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_main(edges):
    with tempfile.NamedTemporaryFile("w", suffix=".dot", delete=False) as f:
        f.write(graph_text(edges))
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = package_cycles.main(["--graph", f.name])
    finally:
        os.unlink(f.name)
    return rc, out.getvalue(), err.getvalue()


class PackageCyclesTest(unittest.TestCase):
    def test_layered_packages_have_no_cycle(self):
        rc, out, _ = run_main([
            ("//a:bin", "//a:lib"),        # inside a package: not an edge
            ("//a:lib", "//b:lib"),
            ("//b:lib", "//c/d:lib"),
            ("//a:test", "//c/d:lib"),
            ("//c/d:lib", "@ext//x:y"),    # external: ignored
        ])
        self.assertEqual(rc, 0, out)
        self.assertIn("0 package cycle(s) among 3 packages", out)

    def test_two_packages_through_different_targets_are_a_cycle(self):
        # No target cycle: a test of b uses a, and a's library uses b's.
        rc, out, _ = run_main([
            ("//a:lib", "//b:lib"),
            ("//b:lib_test", "//a:lib"),
            ("//b:lib", "//c:lib"),
        ])
        self.assertEqual(rc, 1)
        self.assertIn("package cycle: //a <-> //b", out)
        self.assertIn("//b -> //a: //b:lib_test -> //a:lib", out)
        self.assertIn("//a -> //b: //a:lib -> //b:lib", out)
        cycles = [l for l in out.splitlines() if l.startswith("package cycle:")]
        self.assertEqual(cycles, ["package cycle: //a <-> //b"], "c only depends")

    def test_a_longer_cycle_and_a_separate_one(self):
        rc, out, _ = run_main([
            ("//p:x", "//q:x"), ("//q:x", "//r:x"), ("//r:x", "//p:y"),
            ("//s:x", "//t:x"), ("//t:x", "//s:z"),
            ("//u:x", "//p:x"),
        ])
        self.assertEqual(rc, 1)
        self.assertIn("package cycle: //p <-> //q <-> //r", out)
        self.assertIn("package cycle: //s <-> //t", out)
        self.assertIn("2 package cycle(s) among 6 packages", out)
        self.assertNotIn("//u <->", out)

    def test_text_without_edges_is_an_error(self):
        rc, _, err = run_main([])
        self.assertEqual(rc, 2)
        self.assertIn("no dependency edges", err)

    def test_deep_chains_do_not_recurse(self):
        edges = [("//p%d:x" % i, "//p%d:x" % (i + 1)) for i in range(5000)]
        graph = package_cycles.package_graph(edges)
        self.assertEqual(package_cycles.cycles(graph), [])
        graph = package_cycles.package_graph(edges + [("//p5000:x", "//p0:y")])
        self.assertEqual(len(package_cycles.cycles(graph)[0]), 5001)


if __name__ == "__main__":
    unittest.main()
