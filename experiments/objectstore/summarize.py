#!/usr/bin/env python3
"""Summarize experiments/objectstore/out/results.csv: per system, store and
workload the median ops/s, MB/s, latency and device bytes per user byte
over the rounds (with their spread), the BlueStore/FileStore ratio of each
system beside the paper's, out/summary.json, plots and out/RESULTS.md."""
import csv
import json
import os
import statistics
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out")
# The slides (and the paper behind them, Aghayev et al., "File Systems
# Unfit as Distributed Storage Backends", SOSP 2019) report BlueStore at
# about twice FileStore's throughput on small writes.
PAPER_SMALL = 2.0
SMALL = {"write-4K", "write-16K", "randwrite-4K", "ec-randwrite-4K"}


def order(w):
    kind = 0 if w.startswith("write-") else 1 if w.startswith("randwrite") else 2
    size = w.split("-")[-1]
    n = int(size[:-1]) << (10 if size.endswith("K") else 20)
    return (kind, n)


def main():
    rows = list(csv.DictReader(open(os.path.join(OUT, "results.csv"))))
    groups = {}
    for r in rows:
        groups.setdefault((r["system"], r["store"], r["workload"]), []).append(r)
    workloads = sorted({r["workload"] for r in rows}, key=order)
    systems = [s for s in ("loligo", "ceph") if any(r["system"] == s for r in rows)]

    def stat(key, field):
        v = [float(r[field]) for r in groups.get(key, []) if r[field] not in ("", "nan")]
        if not v:
            return None
        return {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": len(v)}

    cases = []
    for w in workloads:
        for s in systems:
            blue, fs = stat((s, "bluestore", w), "ops_s"), stat((s, "filestore", w), "ops_s")
            per_round = []
            for rb in groups.get((s, "bluestore", w), []):
                for rf in groups.get((s, "filestore", w), []):
                    ok = all(r["ops_s"] not in ("", "nan") and float(r["ops_s"]) > 0 for r in (rb, rf))
                    if rb["round"] == rf["round"] and ok:
                        per_round.append(float(rb["ops_s"]) / float(rf["ops_s"]))
            case = {
                "system": s, "workload": w,
                "bluestore_ops_s": blue, "filestore_ops_s": fs,
                "bluestore_mb_s": stat((s, "bluestore", w), "mb_s"),
                "filestore_mb_s": stat((s, "filestore", w), "mb_s"),
                "bluestore_lat_avg_ms": stat((s, "bluestore", w), "lat_avg_ms"),
                "filestore_lat_avg_ms": stat((s, "filestore", w), "lat_avg_ms"),
                "bluestore_disk_per_user": stat((s, "bluestore", w), "disk_per_user"),
                "filestore_disk_per_user": stat((s, "filestore", w), "disk_per_user"),
                "bluestore_proc_per_user": stat((s, "bluestore", w), "dev_per_user"),
                "filestore_proc_per_user": stat((s, "filestore", w), "dev_per_user"),
                "ratio": (blue["median"] / fs["median"]) if blue and fs else None,
                "ratio_per_round": [round(x, 3) for x in per_round],
                "ratio_per_round_median": statistics.median(per_round) if per_round else None,
                "paper_ratio": PAPER_SMALL if w in SMALL else None,
            }
            cases.append(case)
    json.dump({"cases": cases}, open(os.path.join(OUT, "summary.json"), "w"), indent=1)
    plot(cases, workloads, systems)
    report(cases, rows)


def plot(cases, workloads, systems):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: plots skipped", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / (2 * len(systems))
    for i, (s, store) in enumerate((s, st) for s in systems for st in ("bluestore", "filestore")):
        ys, dv = [], []
        for w in workloads:
            c = next((c for c in cases if c["system"] == s and c["workload"] == w), None)
            o = c and c["%s_ops_s" % store]
            d = c and c["%s_disk_per_user" % store]
            ys.append(o["median"] if o else 0)
            dv.append(d["median"] if d else 0)
        xs = [j + i * width for j in range(len(workloads))]
        axes[0].bar(xs, ys, width, label="%s %s" % (s, store))
        axes[1].bar(xs, dv, width, label="%s %s" % (s, store))
    for ax, title in zip(axes, ["ops/s (median)", "device bytes written per user byte"]):
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))])
        ax.set_xticklabels(workloads, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "objectstore.png"), dpi=110)


def fmt(s, key="median", digits=0):
    if not s:
        return "-"
    if s["runs"] > 1:
        return "%.*f (%.*f-%.*f)" % (digits, s[key], digits, s["min"], digits, s["max"])
    return "%.*f" % (digits, s[key])


def report(cases, rows):
    rounds = len({r["round"] for r in rows})
    lines = [
        "# BlueStore-like vs FileStore-like, beside Ceph's own",
        "",
        "3 OSD processes on this machine, size-3 replicated pools of 32 PGs (the EC rows: "
        "k=2 m=1), %d round(s); medians with the range over rounds in parentheses. "
        "Ratio: BlueStore's ops/s over FileStore's, of the same system in the same run "
        "(of the medians; and per round, where the two stores ran back to back: the median "
        "and range of those paired ratios). "
        "Paper: the slides (Aghayev et al., SOSP 2019) report about 2x on small writes." % rounds,
        "",
        "| system | workload | BlueStore ops/s | FileStore ops/s | ratio | per round | paper | "
        "BlueStore disk B/user B | FileStore disk B/user B | BlueStore proc | FileStore proc |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cases:
        pr = c["ratio_per_round"]
        paired = {"median": statistics.median(pr), "min": min(pr), "max": max(pr),
                  "runs": len(pr)} if pr else None
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c["system"], c["workload"], fmt(c["bluestore_ops_s"]), fmt(c["filestore_ops_s"]),
            "%.2f" % c["ratio"] if c["ratio"] else "-", fmt(paired, digits=2),
            "~%.0fx" % c["paper_ratio"] if c["paper_ratio"] else "-",
            fmt(c["bluestore_disk_per_user"], digits=2), fmt(c["filestore_disk_per_user"], digits=2),
            fmt(c["bluestore_proc_per_user"], digits=2), fmt(c["filestore_proc_per_user"], digits=2)))
    by = {(c["system"], c["workload"]): c for c in cases}
    if any(c["system"] == "ceph" for c in cases):
        lines += [
            "",
            "Each Loligo store against Ceph's of the same design (Loligo's ops/s over Ceph's, "
            "medians): where the FileStore-like baseline is slower than Ceph's FileStore, "
            "Loligo's ratio above flatters the block store.",
            "",
            "| workload | Loligo BlueStore-like / Ceph BlueStore | "
            "Loligo FileStore-like / Ceph FileStore |",
            "| --- | --- | --- |",
        ]
    for w in sorted({c["workload"] for c in cases}, key=order):
        lo, ce = by.get(("loligo", w)), by.get(("ceph", w))
        if not lo or not ce:
            continue
        cells = []
        for store in ("bluestore", "filestore"):
            a, b = lo["%s_ops_s" % store], ce["%s_ops_s" % store]
            cells.append("%.2f" % (a["median"] / b["median"]) if a and b else "-")
        lines.append("| %s | %s | %s |" % (w, cells[0], cells[1]))
    lines += [
        "",
        "Device bytes per user byte: disk, the sectors written to the block device from a "
        "`sync` before the workload to a `sync` 6 s after it; proc, the OSD processes' "
        "/proc/PID/io write_bytes less cancelled_write_bytes over the same time (a page "
        "re-dirtied after writeback counts again: small appends count high). A size-3 pool "
        "stores each byte three times, a 2+1 EC pool 1.5 times.",
        "",
        "![ops/s and device bytes](objectstore.png)",
        "",
    ]
    open(os.path.join(OUT, "RESULTS.md"), "w").write("\n".join(lines))


if __name__ == "__main__":
    main()
