#!/usr/bin/env python3
"""CPU per 4 KiB op, end to end, Loligo and Ceph 16.2 side by side.

On two cores the 4 KiB ops are CPU-bound across the client, the OSDs and
the monitor. This runs the same workload against each system (4 OSDs, a
size-3 pool of 64 PGs, 4 KiB objects written then read at random, 16 in
flight by default) and charges every process its CPU time over each
phase (user + system, from /proc/PID/stat for the daemons and from the
bench's own rusage for the client). It prints, per phase and system:
ops/s, CPU microseconds per op for the client, the OSDs, the monitor (and
Ceph's manager), their sum, and the bound that sum sets on this machine
(cores / CPU per op): how far each system is from its own ceiling, and
where a Loligo op spends its CPU against a Ceph op.

    python3 benches/cluster/cpu_per_op.py                  # both systems, Loligo second
    python3 benches/cluster/cpu_per_op.py --loligo-first   # the other order
    python3 benches/cluster/cpu_per_op.py --skip-ceph      # Loligo alone

Ceph needs `apt-get install -y ceph` (benches/ceph/lab.sh starts it).
Both wires are encrypted (Loligo's TLS, Ceph's msgr2 secure mode) unless
--insecure. Writes OUT/summary.json and OUT/RESULTS.md.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """User + system CPU seconds of `pid` so far (None if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces: fields count from after ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def child_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(daemons, cmd, env=None):
    """Run `cmd`; the CPU seconds each daemon (name -> pid) and the
    command itself spent meanwhile, its wall time and its stdout."""
    before = {n: cpu_s(p) for n, p in daemons.items()}
    c0, t0 = child_cpu_s(), time.monotonic()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - t0
    cpu = {"client": child_cpu_s() - c0}
    for n, p in daemons.items():
        a = cpu_s(p)
        if a is not None and before[n] is not None:
            cpu[n] = a - before[n]
    return cpu, wall, out


def roles(cpu):
    """Group per-process CPU into roles (the OSDs summed)."""
    out = {}
    for n, s in cpu.items():
        role = "osd" if n.startswith("osd") else n.split(".")[0]
        out[role] = out.get(role, 0.0) + s
    return out


def row(system, phase, ops, wall, cpu, cores):
    by = roles(cpu)
    total = sum(by.values())
    us = {r: s / ops * 1e6 for r, s in by.items()} if ops else {}
    per_op = total / ops * 1e6 if ops else 0.0
    return {
        "system": system,
        "phase": phase,
        "ops": ops,
        "secs": wall,
        "ops_per_s": ops / wall if wall else 0.0,
        "cpu_s": by,
        "cpu_us_per_op": us,
        "total_us_per_op": per_op,
        "cpu_busy": total / wall / cores if wall else 0.0,
        "bound_ops_per_s": cores / (per_op / 1e6) if per_op else 0.0,
    }


def run_loligo(args, out):
    b = ROOT / "target" / "release" / "loligo"
    d = Path(tempfile.mkdtemp(prefix="loligo-cpu-"))
    up = [str(b), "up", "--detach", "--osds", "4", "--pg-num", "64", "--data-dir", str(d)]
    up += ["--osd-size", str(args.osd_size)]
    if args.insecure:
        up.append("--insecure")
    subprocess.run(up, check=True, stdout=sys.stderr)
    env = dict(os.environ, LOLIGO_CONF=str(d / "loligo.conf"))
    rows = []
    try:
        daemons = {}
        for f in d.glob("*.pid"):
            daemons[f.stem] = int(f.read_text().split()[0])
        print(f"loligo daemons: {sorted(daemons)}", file=sys.stderr)
        for mode in ["write", "rand"]:
            cmd = [str(b), "bench", str(args.secs), mode, "-t", str(args.threads), "--json"]
            if mode == "write":
                cmd += ["-b", "4096", "--no-cleanup"]
            cpu, wall, text = measure(daemons, cmd, env)
            j = json.loads(text)
            rows.append(row("loligo", mode, j["ops"], wall, cpu, args.cores))
            rows[-1]["p99_ms"] = j["latency_ms"]["p99"]
            if mode == "write":
                time.sleep(args.settle)
    finally:
        subprocess.run([str(b), "down", "--data-dir", str(d)], stdout=sys.stderr)
        shutil.rmtree(d, ignore_errors=True)
    return rows


def run_ceph(args, out):
    lab = ROOT / "benches" / "ceph" / "lab.sh"
    env = dict(os.environ)
    if not args.insecure:
        env["SECURE"] = "1"
    data = Path(env.get("CEPHLAB_DATA", "/tmp/loligo-cephlab"))
    env["CEPH_CONF"] = str(data / "ceph.conf")
    subprocess.run(["bash", str(lab), "up", "4"], check=True, env=env, stdout=sys.stderr)
    rows = []
    try:
        c = ["timeout", "120", "ceph"]
        pool = "bench"
        for a in (["osd", "pool", "create", pool, "64", "64", "replicated"],
                  ["osd", "pool", "set", pool, "size", "3"],
                  ["osd", "pool", "application", "enable", pool, "rados"]):
            subprocess.run(c + a, check=True, env=env, capture_output=True)
        subprocess.run(["bash", str(lab), "wait-clean", "300"], check=True, env=env, stdout=sys.stderr)
        daemons = {}
        for f in (data / "run").glob("*.pid"):
            daemons[f.stem] = int(f.read_text().split()[0])
        print(f"ceph daemons: {sorted(daemons)}", file=sys.stderr)
        for mode in ["write", "rand"]:
            cmd = ["rados", "-p", pool, "bench", str(args.secs), mode, "-t", str(args.threads),
                   "--run-name", "b"]
            if mode == "write":
                cmd += ["-b", "4096", "--no-cleanup"]
            cpu, wall, text = measure(daemons, cmd, env)
            made = re.search(r"Total (?:writes|reads) made:\s+(\d+)", text)
            ops = int(made.group(1)) if made else 0
            rows.append(row("ceph", mode, ops, wall, cpu, args.cores))
            if mode == "write":
                time.sleep(args.settle)
    finally:
        subprocess.run(["bash", str(lab), "down"], env=env, stdout=sys.stderr)
    return rows


def results_md(rows, args):
    lines = [
        f"# CPU per 4 KiB op ({args.threads} in flight, {args.secs} s a phase, "
        f"{'plain' if args.insecure else 'encrypted'} wires, {args.cores} cores)",
        "",
        "| system | phase | ops/s | client us/op | OSDs us/op | monitor us/op | other us/op "
        "| total us/op | CPU busy | bound ops/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        u = r["cpu_us_per_op"]
        other = sum(v for k, v in u.items() if k not in ("client", "osd", "mon"))
        lines.append(
            f"| {r['system']} | {r['phase']} | {r['ops_per_s']:,.0f} | {u.get('client', 0):.0f} "
            f"| {u.get('osd', 0):.0f} | {u.get('mon', 0):.1f} | {other:.1f} "
            f"| {r['total_us_per_op']:.0f} | {r['cpu_busy']:.0%} | {r['bound_ops_per_s']:,.0f} |"
        )
    by = {(r["system"], r["phase"]): r for r in rows}
    for phase in ["write", "rand"]:
        lo, ce = by.get(("loligo", phase)), by.get(("ceph", phase))
        if lo and ce and lo["total_us_per_op"]:
            lines.append("")
            lines.append(
                f"{phase}: Ceph's CPU per op / Loligo's = "
                f"{ce['total_us_per_op'] / lo['total_us_per_op']:.2f}x; "
                f"ops/s Loligo / Ceph = {lo['ops_per_s'] / ce['ops_per_s']:.2f}x"
            )
    lines += [
        "",
        "CPU busy: the processes' CPU over the phase's wall time, as a share of all cores; "
        "bound: cores / total CPU per op, the rate at which this machine's cores would be "
        "full.",
    ]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secs", type=int, default=20)
    ap.add_argument("-t", "--threads", type=int, default=16)
    ap.add_argument("--settle", type=int, default=10, help="seconds between write and reads")
    ap.add_argument("--osd-size", type=int, default=2 << 30)
    ap.add_argument("--out", default=str(HERE / "results" / "cpu-per-op"))
    ap.add_argument("--skip-ceph", action="store_true")
    ap.add_argument("--loligo-first", action="store_true")
    ap.add_argument("--insecure", action="store_true")
    args = ap.parse_args()
    args.cores = os.cpu_count() or 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "-p", "loligo-cli", "--manifest-path",
                    str(ROOT / "Cargo.toml")], check=True, stdout=sys.stderr)
    ceph = not args.skip_ceph and shutil.which("ceph-osd") is not None
    if not args.skip_ceph and not ceph:
        print("no ceph-osd here (apt-get install -y ceph): Loligo alone", file=sys.stderr)
    order = [run_loligo, run_ceph] if args.loligo_first else [run_ceph, run_loligo]
    rows = []
    for f in order:
        if f is run_ceph and not ceph:
            continue
        rows += f(args, out)
        time.sleep(args.settle)
    summary = {"threads": args.threads, "secs": args.secs, "cores": args.cores,
               "encrypted": not args.insecure, "loligo_first": args.loligo_first, "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    md = results_md(rows, args)
    (out / "RESULTS.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
