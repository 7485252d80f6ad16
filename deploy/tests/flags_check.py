#!/usr/bin/env python3
"""No drift between deploy/ and the binaries: every --flag that a rendered
Kubernetes manifest or a resolved compose file passes to a tandem binary
is one that binary accepts (read from its own --helpfull), and every port
and probe matches what the process serves (/metrics on --metrics_port,
gRPC on --port).

  flags_check.py --binary=worker=PATH ... [--known=shardserver=port,coordinator]
                 [--manifests=FILE.yaml ...] [--compose=FILE.yaml ...]

--known names a binary this build does not have yet, with the flags the
deploy files may pass it (checked against that list instead, with a note).
Prints one line per container checked; exits 1 with one line per problem.
"""
import argparse
import os
import re
import subprocess
import sys

import yaml

WORKLOADS = {"StatefulSet", "Job", "Deployment", "DaemonSet", "ReplicaSet"}
FLAG = re.compile(r"^--([A-Za-z][A-Za-z0-9_]*)(=(.*))?$", re.S)


def accepted_flags(path):
    p = subprocess.run([path, "--helpfull"], capture_output=True, text=True, timeout=60)
    flags = set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", p.stdout + p.stderr, re.M))
    if not flags:
        raise SystemExit(f"flags_check: {path} --helpfull listed no flags:\n{p.stdout}{p.stderr}")
    return flags


def parse_flags(argv):
    """{name: value} for every --name[=value] in argv (value None for bare)."""
    out = {}
    for a in argv:
        m = FLAG.match(str(a))
        if m:
            out[m.group(1)] = m.group(3)
    return out


def unwrap(argv):
    """The command line under the image's wrappers: `tandem exec [--] PROG
    ...` and `tandem-with-host PROG ...` both run PROG with the rest."""
    argv = list(argv)
    while argv:
        base = os.path.basename(str(argv[0]))
        if base == "tandem" and len(argv) > 1 and argv[1] == "exec":
            argv = argv[3:] if len(argv) > 2 and argv[2] == "--" else argv[2:]
        elif base == "tandem-with-host":
            argv = argv[1:]
        else:
            break
    return argv


def flags_in_shell(words):
    """--flags inside `sh -c '...'` style strings."""
    out = []
    for w in words:
        out += re.findall(r"(--[A-Za-z][A-Za-z0-9_]*(?:=[^\s\"']*)?)", str(w))
    return out


class Checker:
    def __init__(self, binaries, known):
        self.accepted = {}
        for name, path in binaries.items():
            self.accepted[name] = accepted_flags(path)
        self.known = known
        self.problems = []
        self.checked = 0

    def flags_ok(self, where, binary, flags):
        if binary in self.accepted:
            valid = self.accepted[binary]
            note = ""
        elif binary in self.known:
            valid = self.known[binary]
            note = " (checked against --known: the binary is not in this build)"
        else:
            self.problems.append(f"{where}: runs '{binary}', which is not a tandem binary this "
                                 f"check knows ({', '.join(sorted(self.accepted))})")
            return
        for f in flags:
            bare = f[2:] if f.startswith("no") and f[2:] in valid else f
            if bare not in valid:
                close = [v for v in valid if v.replace("_", "") == f.replace("_", "")]
                hint = f"; did you mean --{close[0]}?" if close else ""
                self.problems.append(f"{where}: {binary} has no flag --{f}{hint}")
        self.checked += 1
        print(f"ok   {where}: {binary} {len(flags)} flags{note}")

    def port_of(self, ports, ref):
        if isinstance(ref, int):
            return ref
        for p in ports:
            if p.get("name") == ref:
                return p.get("containerPort")
        return None

    def container(self, where, c):
        cmd = c.get("command") or []
        if not cmd:
            self.problems.append(f"{where}: no command (the chart must name the binary)")
            return
        cmd = unwrap(cmd)
        binary = os.path.basename(cmd[0])
        args = list(cmd[1:]) + list(c.get("args") or [])
        flags = parse_flags(args)
        self.flags_ok(where, binary, list(flags))
        ports = c.get("ports") or []
        want = {"metrics": flags.get("metrics_port"), "grpc": flags.get("port")}
        for p in ports:
            w = want.get(p.get("name"))
            if w is not None and str(p.get("containerPort")) != str(w):
                self.problems.append(f"{where}: port '{p['name']}' is {p.get('containerPort')} "
                                     f"but the binary is given {w}")
        for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
            probe = c.get(kind)
            if not probe:
                continue
            if "httpGet" in probe:
                h = probe["httpGet"]
                port = self.port_of(ports, h.get("port"))
                if h.get("path") != "/metrics":
                    self.problems.append(f"{where}: {kind} GETs {h.get('path')}, but the "
                                         "services serve only /metrics over HTTP")
                if str(port) != str(flags.get("metrics_port")):
                    self.problems.append(f"{where}: {kind} GETs port {port}, but --metrics_port "
                                         f"is {flags.get('metrics_port')}")
            elif "tcpSocket" in probe:
                port = self.port_of(ports, probe["tcpSocket"].get("port"))
                if str(port) not in (str(flags.get("port")), str(flags.get("metrics_port"))):
                    self.problems.append(f"{where}: {kind} connects to port {port}, which the "
                                         f"binary does not listen on (--port={flags.get('port')}, "
                                         f"--metrics_port={flags.get('metrics_port')})")
        return flags

    def manifests(self, path):
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
        pods = []  # (labels, named ports)
        for d in docs:
            if d.get("kind") not in WORKLOADS:
                continue
            tpl = d["spec"]["template"]
            named = set()
            for c in tpl["spec"].get("containers", []):
                where = f"{os.path.basename(path)}: {d['kind']}/{d['metadata']['name']}/{c['name']}"
                self.container(where, c)
                named |= {p.get("name") for p in c.get("ports") or []}
            pods.append((tpl["metadata"].get("labels", {}), named))
        for d in docs:
            if d.get("kind") != "Service":
                continue
            sel = d["spec"].get("selector") or {}
            match = [n for labels, n in pods if all(labels.get(k) == v for k, v in sel.items())]
            where = f"{os.path.basename(path)}: Service/{d['metadata']['name']}"
            if not match:
                self.problems.append(f"{where}: selects no pod template")
                continue
            for p in d["spec"].get("ports", []):
                t = p.get("targetPort")
                if isinstance(t, str) and not any(t in n for n in match):
                    self.problems.append(f"{where}: targetPort '{t}' is not a port of its pods")

    def compose(self, path):
        doc = yaml.safe_load(open(path))
        for name, s in (doc.get("services") or {}).items():
            target = (s.get("build") or {}).get("target")
            image = str(s.get("image", ""))
            m = re.match(r"^(?:localhost/)?tandem-([a-z]+):", image)
            binary = target or (m.group(1) if m else None)
            if binary is None or binary == "prometheus":
                continue
            where = f"{os.path.basename(path)}: service {name}"
            argv = list(s.get("entrypoint") or []) + list(s.get("command") or [])
            flags = parse_flags(argv)
            shell = [f for f in flags_in_shell(argv) if FLAG.match(f)]
            names = set(flags) | set(parse_flags(shell))
            self.flags_ok(where, binary, sorted(names))
            test = (s.get("healthcheck") or {}).get("test") or []
            if "tandem-healthcheck" in test:
                port = test[test.index("tandem-healthcheck") + 1]
                if str(port) != str(flags.get("metrics_port")):
                    self.problems.append(f"{where}: healthcheck probes port {port}, but "
                                         f"--metrics_port is {flags.get('metrics_port')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", action="append", default=[])
    ap.add_argument("--known", action="append", default=[])
    ap.add_argument("--manifests", action="append", default=[])
    ap.add_argument("--compose", action="append", default=[])
    a = ap.parse_args()
    binaries = dict(b.split("=", 1) for b in a.binary)
    known = {k: set(v.split(",")) for k, v in (x.split("=", 1) for x in a.known)}
    c = Checker(binaries, known)
    for m in a.manifests:
        c.manifests(m)
    for f in a.compose:
        c.compose(f)
    for p in c.problems:
        print("flags_check: " + p, file=sys.stderr)
    if c.checked == 0:
        print("flags_check: no container checked", file=sys.stderr)
        return 1
    print(f"flags_check: {c.checked} containers checked, {len(c.problems)} problems")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
