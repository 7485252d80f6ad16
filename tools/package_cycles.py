#!/usr/bin/env python3
"""Finds dependency cycles between Bazel packages.

A package cycle (a target of package A depends, directly or not, on a target
of package B, and one of B on one of A) means the two folders are one unit
that cannot be built, tested or understood alone: break it by moving the
shared piece into the lower package.

  tools/package_cycles.py                  # runs `bazel query //...` itself
  tools/package_cycles.py --graph FILE     # or reads its --output=graph text
  bazel query //... --output=graph --nograph:factored | tools/package_cycles.py --graph -

Prints each cycle as its packages and, for each package edge inside it, one
target-level edge that makes it; exits 1 when there is a cycle, 0 when
there is none, 2 when the graph cannot be read. The package test
//tools:package_cycles_test checks the algorithm on small graphs; the lead
runs this script on the whole tree (a query needs the workspace, which a
sandboxed test does not have).
"""

import argparse
import re
import subprocess
import sys
from collections import defaultdict

EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')


def package_of(label):
    """'//a/b:c' -> 'a/b'; '@x//a:b' -> '' (external: not ours)."""
    if not label.startswith("//"):
        return ""
    return label[2:].split(":", 1)[0]


def read_edges(lines):
    """Target edges (from, to) of `bazel query --output=graph` text."""
    edges = []
    for line in lines:
        m = EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2)))
    return edges


def package_graph(edges):
    """Package -> {package: an example target edge}, without self-loops."""
    graph = defaultdict(dict)
    for src, dst in edges:
        a, b = package_of(src), package_of(dst)
        if a and b and a != b and b not in graph[a]:
            graph[a][b] = (src, dst)
    return graph


def cycles(graph):
    """Strongly connected components of more than one package, sorted."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    nodes = set(graph) | {b for a in graph for b in graph[a]}

    def visit(root):
        # Iterative Tarjan: (node, iterator over its successors).
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, succ = work[-1]
            advanced = False
            for nxt in succ:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return sorted(out)


def describe(component, graph):
    lines = ["package cycle: " + " <-> ".join("//" + p for p in component)]
    members = set(component)
    for a in component:
        for b, (src, dst) in sorted(graph.get(a, {}).items()):
            if b in members:
                lines.append("  //%s -> //%s: %s -> %s" % (a, b, src, dst))
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", help="query --output=graph text ('-' = stdin)")
    parser.add_argument("--scope", default="//...", help="targets to query (default //...)")
    args = parser.parse_args(argv)
    try:
        if args.graph == "-":
            text = sys.stdin.read().splitlines()
        elif args.graph:
            with open(args.graph) as f:
                text = f.read().splitlines()
        else:
            text = subprocess.run(
                ["bazel", "query", args.scope, "--output=graph", "--nograph:factored"],
                check=True, capture_output=True, text=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as e:
        print("package_cycles: cannot read the graph: %s" % e, file=sys.stderr)
        return 2
    edges = read_edges(text)
    if not edges:
        print("package_cycles: no dependency edges in the graph (is it "
              "`bazel query ... --output=graph` text?)", file=sys.stderr)
        return 2
    graph = package_graph(edges)
    found = cycles(graph)
    for c in found:
        print(describe(c, graph))
    packages = len(set(graph) | {b for a in graph for b in graph[a]})
    print("%d package cycle(s) among %d packages" % (len(found), packages))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
