#!/usr/bin/env python3
"""OUT/summary.json for benches/cluster/compare.sh: per workload (size and
mode), Loligo's figures (ops/s, MB/s, avg/p50/p99 ms), Ceph's (ops/s,
MB/s, avg and max ms from rados bench's log), their ratios, and the raw
disk baseline with the
disk-bound targets: 4 MiB writes >= 0.9 x raw write / 3 replicas, 4 MiB
reads >= 0.9 x raw read; the ratio targets against Ceph as issue 18
sets them.

rados bench prints no percentiles. benches/ceph/latency.py runs each
phase again with every op timed (OUT/ceph/SIZE_MODE_latency.json); where
that file exists, Ceph's p50 and p99 come from it. rados bench's mean and
maximum bound Ceph's p99 in any case: at most 1% of ops lie above the
p99, so mean <= 0.99 p99 + 0.01 max, hence p99 >= (mean - max/100) /
0.99, and p99 <= max. `p99_below_ceph` (see `p99_below`) is true, false,
or null where neither the bounds nor the timed p99 can tell.

Where the phase recorded the disk's byte counts before and after
(benches/disk_bytes.sh), each side gets `disk`: MB the device read and
wrote during the phase, and per byte the client moved (`device_share`):
for a read phase, the share of the bytes read that came from the device
rather than an OSD's memory; for a write phase, the bytes every replica
wrote (all OSDs share the one device), without the write-back that
lands after the phase ends."""
import json
import os
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
REPLICAS = 3
IN_FLIGHT = int(os.environ.get("T") or 16)
TARGET_VS_CEPH = {
    (4096, "write"): 2.5,
    (4096, "rand"): 2.0,
    (4194304, "seq"): 1.5,
    (4194304, "rand"): 1.5,
}

def disk(d, mode, client_bytes, secs):
    """What the device did during one phase, from the byte counts taken
    before and after it; None where they were not taken."""
    a, b = d.get("disk_before") or {}, d.get("disk_after") or {}
    if "read" not in a or "read" not in b:
        return None
    read, written = b["read"] - a["read"], b["written"] - a["written"]
    out = {"device": b.get("device"), "read_mb": read / 1e6, "written_mb": written / 1e6}
    if secs:
        out["read_mb_s"], out["written_mb_s"] = read / secs / 1e6, written / secs / 1e6
    if client_bytes:
        out["device_share"] = (written if mode == "write" else read) / client_bytes
    return out


loligo = {}
for line in (out / "loligo.jsonl").read_text().splitlines() if (out / "loligo.jsonl").exists() else []:
    d = json.loads(line)
    b = d["bench"]
    lat = b.get("latency_ms", {})
    loligo[(d["size"], b["mode"])] = {
        "ops_s": b["ops_per_s"],
        "mb_s": b["mb_per_s"],
        "avg_ms": lat.get("avg"),
        "p50_ms": lat.get("p50"),
        "p99_ms": lat.get("p99"),
        "disk": disk(d, b["mode"], b.get("ops", 0) * d["size"], b.get("seconds")),
    }


def ceph_log(size, mode):
    p = out / "ceph" / f"{size}_{mode}.log"
    if not p.exists():
        return None
    t = p.read_text()

    def num(pat):
        m = re.search(pat + r":\s*([0-9.eE+-]+)", t)
        return float(m.group(1)) if m else None

    iops = num(r"Average IOPS")
    secs = num(r"Total time run")
    ops = num(r"Total (?:reads|writes) made")
    bw = num(r"Bandwidth \(MB/sec\)")
    lat = num(r"Average Latency\(s\)")
    top = num(r"Max latency\(s\)")
    if iops is None:
        return None
    floor = None
    if lat is not None and top is not None:
        floor = max(0.0, (lat - top / 100) / 0.99) * 1000
    row = {
        "ops_s": iops,
        # rados bench's "MB/sec" is MiB/s.
        "mb_s": bw * 1.048576 if bw is not None else None,
        "avg_ms": lat * 1000 if lat is not None else None,
        "max_ms": top * 1000 if top is not None else None,
        "p50_ms": None,
        "p99_ms": None,
        "p99_floor_ms": floor,
        "disk": None,
    }
    dj = out / "ceph" / f"{size}_{mode}_disk.json"
    if dj.exists():
        row["disk"] = disk(json.loads(dj.read_text()), mode, (ops or 0) * size, secs)
    # The same phase timed op by op (benches/ceph/latency.py): Ceph's own
    # percentiles, with that client's mean beside rados bench's.
    timed = out / "ceph" / f"{size}_{mode}_latency.json"
    if timed.exists():
        t = json.loads(timed.read_text())
        row["p50_ms"], row["p99_ms"] = t["p50_ms"], t["p99_ms"]
        row["timed"] = {k: t[k] for k in ("client", "ops", "ops_s", "avg_ms", "max_ms", "concurrency")}
        # Ops that client kept in flight on average (Little's law, over
        # the whole run, its drain at the end included): well under its
        # concurrency it could not keep up, and its latencies understate
        # Ceph's.
        row["timed"]["in_flight"] = t["ops_s"] * t["avg_ms"] / 1000
    return row


def p99_below(p99, c):
    """Whether Loligo's p99 is below Ceph's: True, False, or None where it
    cannot be told. rados bench's maximum bounds Ceph's p99 above and its
    mean and maximum bound it below: those decide first. Then Ceph's p99
    timed op by op, less that client's own cost per op (taken as how far
    its mean exceeds rados bench's): below it decides; above it decides
    only if that client kept the phase's ops in flight (else its
    latencies are those of a lighter load)."""
    if p99 is None:
        return None
    timed, top, floor = c.get("p99_ms"), c.get("max_ms"), c.get("p99_floor_ms")
    if top is not None and p99 > top:
        return False
    if floor and p99 < floor:
        return True
    if timed is None:
        return None
    t = c["timed"]
    own = max(0.0, t["avg_ms"] - c["avg_ms"]) if c.get("avg_ms") is not None else 0.0
    if p99 < timed - own:
        return True
    if p99 >= timed and t["in_flight"] >= 0.9 * t["concurrency"]:
        return False
    return None


raw = json.loads((out / "raw.json").read_text()) if (out / "raw.json").exists() else None
rows = []
for size in (4096, 4194304):
    for mode in ("write", "seq", "rand"):
        l = loligo.get((size, mode))
        c = ceph_log(size, mode)
        row = {"size": size, "mode": mode, "loligo": l, "ceph": c}
        if l and c and c["ops_s"]:
            row["ratio_ops"] = l["ops_s"] / c["ops_s"]
            t = TARGET_VS_CEPH.get((size, mode))
            if t is not None:
                row["target_vs_ceph"] = t
                row["met_vs_ceph"] = row["ratio_ops"] >= t
        if l and c:
            row["p99_below_ceph"] = p99_below(l["p99_ms"], c)
        if raw and l and size == 4194304:
            base = raw["write_mb_s"] / REPLICAS if mode == "write" else raw["read_mb_s"]
            row["raw_baseline_mb_s"] = base
            row["ratio_to_raw"] = l["mb_s"] / base
            row["target_to_raw"] = 0.9
            row["met_to_raw"] = row["ratio_to_raw"] >= row["target_to_raw"]
        rows.append(row)
encrypted = not os.environ.get("INSECURE")
summary = {
    "raw_disk": raw,
    "replicas": REPLICAS,
    "in_flight": IN_FLIGHT,
    # Both wires the same: Loligo's mutual TLS and Ceph's msgr2 secure
    # mode, or Loligo --insecure and Ceph's msgr v1.
    "wire": "encrypted (Loligo TLS 1.3, Ceph msgr2 secure)" if encrypted
    else "plain (Loligo --insecure, Ceph msgr v1)",
    "workloads": rows,
}
(out / "summary.json").write_text(json.dumps(summary, indent=2))
for r in rows:
    l, c = r["loligo"], r["ceph"]
    print(
        f"{r['size']:>8} {r['mode']:<5} loligo {l['ops_s'] if l else float('nan'):>9.1f} ops/s"
        f"  ceph {c['ops_s'] if c else float('nan'):>9.1f} ops/s"
        f"  ratio {r.get('ratio_ops', float('nan')):.2f}"
        + (f"  of raw {r['ratio_to_raw']:.2f} (target {r['target_to_raw']})" if "ratio_to_raw" in r else "")
        + (f"  p99 {l['p99_ms']:.2f} ms vs Ceph's {c['p99_ms']:.2f} (timed op by op; that client's mean"
           f" {c['timed']['avg_ms']:.2f} ms against rados bench's {c['avg_ms']:.2f},"
           f" {c['timed']['in_flight']:.0f} in flight; below: {r.get('p99_below_ceph')})"
           if l and c and c.get("p99_ms") is not None
           else f"  p99 {l['p99_ms']:.2f} ms < Ceph's p99 (>= {c['p99_floor_ms']:.2f})"
           if r.get("p99_below_ceph") else "")
        + "".join(
            f"  {who} disk r/w {x['disk']['read_mb_s']:.0f}/{x['disk']['written_mb_s']:.0f} MB/s"
            for who, x in (("loligo", l), ("ceph", c))
            if x and x.get("disk") and "read_mb_s" in x["disk"]
        ),
        file=sys.stderr,
    )
print(f"summary in {out / 'summary.json'}", file=sys.stderr)
