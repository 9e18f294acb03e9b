#!/usr/bin/env python3
"""Summarize benches/scale/run.sh: summary.json, scale.png, RESULTS.md.

Growth is stated as the slope of log(cost) against log(OSDs) between the
two largest sizes (1: linear, 2: quadratic, 0: constant)."""
import csv
import json
import math
import sys
from pathlib import Path

out = Path(sys.argv[1])
reps = int(sys.argv[2])


def read_rows(name):
    """The rows of out/NAME as numbers (none if the file is absent)."""
    if not (out / name).exists():
        return []
    rows = list(csv.DictReader(open(out / name)))
    for r in rows:
        for k, v in r.items():
            r[k] = float(v)
    return rows


def growth(rows, k):
    """Slope of log(k) against log(OSDs) between the two largest sizes."""
    if len(rows) < 2:
        return None
    a, b = rows[-2], rows[-1]
    if a[k] <= 0 or b[k] <= 0:
        return None
    return math.log(b[k] / a[k]) / math.log(b["osds"] / a["osds"])


rows = read_rows("scale.csv")

cols = {
    "map_bytes": "encoded map (bytes)",
    "apply_ms": "OsdMap::apply, one OSD down (ms)",
    "compile_ms": "CRUSH compile (ms)",
    "map_all_ms": "CRUSH over every PG: an OSD's and a client's work per epoch before (ms)",
    "mappings_build_ms": "carried mappings built (ms)",
    "mappings_down_ms": "carried mappings advanced: an OSD's work per epoch now (ms)",
    "client_ms": "a client's new routing table now (ms)",
    "changed_pgs": "PGs the advance names",
    "mappings_mib": "carried mappings' memory: an OSD's (MiB)",
    "client_mib": "a client's routing steps (MiB)",
}




mon_rows = read_rows("monitor.csv")
mon_cols = {
    "down_commit_ms": "monitor: commit of one OSD marked down (ms)",
    "boot_commit_ms": "monitor: commit of one OSD's boot (ms)",
    "mon_rss_mib": "monitor: memory growth of its process (MiB)",
}


peer_rows = read_rows("peering.csv")
peer_cols = {
    "peered_ms": "peering after one OSD down: last PG serving reads (virtual ms)",
    "active_ms": "peering after one OSD down: last PG taking writes (virtual ms)",
    "epochs": "map epochs the failure made",
    "osd_busy_max_ms": "busiest OSD's processing time (ms)",
}


big = rows[-1]
summary = {
    "reps": reps,
    "rows": rows,
    "growth_exponent_top_two_sizes": {k: growth(rows, k) for k in cols},
    "targets": {
        "apply_one_osd_down_under_10ms_at_largest": big["apply_ms"] < 10.0,
        "osd_epoch_under_10ms_at_largest": big["mappings_down_ms"] < 10.0,
        "client_epoch_under_10ms_at_largest": big["client_ms"] < 10.0,
        "advance_names_only_moved_pgs": big["changed_pgs"] < big["pgs"] / 100,
        "largest_osds": big["osds"],
    },
    "speedup_osd_epoch_vs_full_pass_at_largest": big["map_all_ms"] / max(big["mappings_down_ms"], 1e-9),
    "monitor_rows": mon_rows,
    "monitor_growth_exponent_top_two_sizes": {k: growth(mon_rows, k) for k in mon_cols},
    "peering_rows": peer_rows,
    "peering_growth_exponent_top_two_sizes": {k: growth(peer_rows, k) for k in peer_cols},
}
json.dump(summary, open(out / "summary.json", "w"), indent=2)

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(17, 4.5))
    x = [r["osds"] for r in rows]
    for k in ["apply_ms", "compile_ms", "map_all_ms", "mappings_build_ms", "mappings_down_ms", "client_ms"]:
        a.plot(x, [max(r[k], 1e-4) for r in rows], marker="o", label=cols[k])
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("OSDs")
    a.set_ylabel("ms")
    a.axhline(10, color="grey", ls=":", lw=1)
    a.legend(fontsize=6)
    a.set_title("cost of one map epoch (one OSD marked down)")
    b.plot(x, [r["map_bytes"] / 2**20 for r in rows], marker="o", label="encoded map (MiB)")
    b.plot(x, [r["mappings_mib"] for r in rows], marker="o", label="an OSD's carried mappings (MiB)")
    b.plot(x, [r["client_mib"] for r in rows], marker="o", label="a client's routing steps (MiB)")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("OSDs")
    b.set_ylabel("MiB")
    b.legend(fontsize=7)
    if mon_rows:
        mx = [r["osds"] for r in mon_rows]
        a.plot(mx, [max(r["down_commit_ms"], 1e-4) for r in mon_rows], marker="s", ls="--",
               label=mon_cols["down_commit_ms"])
        b.plot(mx, [max(r["mon_rss_mib"], 1e-2) for r in mon_rows], marker="s", ls="--",
               label=mon_cols["mon_rss_mib"])
        a.legend(fontsize=6)
        b.legend(fontsize=7)
    b.set_title("memory")
    if peer_rows:
        px = [r["osds"] for r in peer_rows]
        for k in ["peered_ms", "active_ms", "osd_busy_max_ms"]:
            c.plot(px, [max(r[k], 1e-3) for r in peer_rows], marker="o", label=peer_cols[k])
        c.set_xscale("log")
        c.set_yscale("log")
        c.set_xlabel("OSDs")
        c.set_ylabel("ms")
        c.legend(fontsize=6)
    c.set_title("peering after one OSD is marked down")
    fig.tight_layout()
    fig.savefig(out / "scale.png", dpi=110)
except ImportError:
    print("matplotlib missing: no plot", file=sys.stderr)

with open(out / "RESULTS.md", "w") as f:
    f.write("# How the map's costs grow with the cluster\n\n")
    f.write(f"`bash benches/scale/run.sh` ({reps} repetition(s) per size, medians).\n\n")
    f.write("| OSDs | PGs | map bytes | apply ms | compile ms | CRUSH over all PGs ms | carried build ms | OSD epoch ms | client epoch ms | PGs named | OSD MiB | client MiB |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write(
            f"| {r['osds']:.0f} | {r['pgs']:.0f} | {r['map_bytes']:.0f} | {r['apply_ms']:.3f} | {r['compile_ms']:.3f} "
            f"| {r['map_all_ms']:.1f} | {r['mappings_build_ms']:.1f} | {r['mappings_down_ms']:.4f} | {r['client_ms']:.4f} "
            f"| {r['changed_pgs']:.0f} | {r['mappings_mib']:.2f} | {r['client_mib']:.2f} |\n"
        )
    if mon_rows:
        f.write("\nA real monitor (one member, store on this disk; one process per size):\n\n")
        f.write("| OSDs | PGs | boot all s | epochs | commit osd down ms | commit boot ms | monitor MiB "
                "| monitor KiB per OSD added |\n")
        f.write("|---|---|---|---|---|---|---|---|\n")
        base = mon_rows[0]
        for r in mon_rows:
            # The process's growth past the smallest size, per OSD added
            # (the smallest size's own figure is mostly the empty process).
            added = r["osds"] - base["osds"]
            per_osd = f"{(r['mon_rss_mib'] - base['mon_rss_mib']) * 1024 / added:.2f}" if added > 0 else "-"
            f.write(
                f"| {r['osds']:.0f} | {r['pgs']:.0f} | {r['boot_s']:.2f} | {r['epochs']:.0f} "
                f"| {r['down_commit_ms']:.3f} | {r['boot_commit_ms']:.3f} | {r['mon_rss_mib']:.1f} "
                f"| {per_osd} |\n"
            )
        for k, v in summary["monitor_growth_exponent_top_two_sizes"].items():
            f.write(f"- growth of {mon_cols[k]}: {'n/a' if v is None else f'{v:.2f}'}\n")
    if peer_rows:
        f.write("\nPeering after one OSD is marked down (simulated OSDs running the real PG state machines, "
                "a real monitor; virtual time charged with each step's measured cost, 100 us a message, "
                "100 us a store commit):\n\n")
        f.write("| OSDs | PGs | PGs affected | peered ms | active ms (median run) | active ms range | epochs | messages | monitor requests | monitor busy ms | busiest OSD ms | all OSDs ms |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in peer_rows:
            f.write(
                f"| {r['osds']:.0f} | {r['pgs']:.0f} | {r['affected_pgs']:.0f} | {r['peered_ms']:.2f} | {r['active_ms']:.2f} "
                f"| {r.get('active_min_ms', r['active_ms']):.2f}-{r.get('active_max_ms', r['active_ms']):.2f} "
                f"| {r['epochs']:.0f} | {r['messages']:.0f} | {r['mon_requests']:.0f} | {r['mon_busy_ms']:.2f} "
                f"| {r['osd_busy_max_ms']:.2f} | {r['osd_busy_total_ms']:.1f} |\n"
            )
        for k, v in summary["peering_growth_exponent_top_two_sizes"].items():
            f.write(f"- growth of {peer_cols[k]}: {'n/a' if v is None else f'{v:.2f}'}\n")
    f.write("\nGrowth between the two largest sizes (exponent of OSDs):\n\n")
    for k, v in summary["growth_exponent_top_two_sizes"].items():
        f.write(f"- {cols[k]}: {'n/a' if v is None else f'{v:.2f}'}\n")
    f.write("\nTargets at the largest size: " + json.dumps(summary["targets"]) + "\n")
    f.write("\n![scale](scale.png)\n")
print(json.dumps(summary["targets"]))
