#!/usr/bin/env python3
"""Turn the recovery experiment's results.csv into summary.json, RESULTS.md
and recovery.png (in the same folder)."""
import csv
import json
import os
import sys

TARGET = 0.3


def main():
    out = sys.argv[1]
    rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
    cases = {}
    for r in rows:
        key = (r["mode"], r["pct"])
        c = cases.setdefault(key, {"mode": r["mode"], "stale_pct": float(r["pct"]),
                                   "objects": int(r["objects"])})
        c[r["system"] + "_up_s"] = float(r["up_s"])
        c[r["system"] + "_clean_s"] = float(r["clean_s"])
    summary = []
    for c in cases.values():
        if "loligo_clean_s" in c and "ceph_clean_s" in c and c["ceph_clean_s"] > 0:
            c["ratio"] = round(c["loligo_clean_s"] / c["ceph_clean_s"], 3)
            c["meets_target"] = c["ratio"] <= TARGET
        summary.append(c)
    summary.sort(key=lambda c: (c["mode"], c["stale_pct"]))
    json.dump({"target_ratio": TARGET, "cases": summary},
              open(os.path.join(out, "summary.json"), "w"), indent=2)

    lines = ["# Recovery after an OSD restart: Loligo vs Ceph", "",
             "Seconds from starting the stopped OSD until every PG is active+clean "
             "(boot included); 4 OSDs, size-3 pool of 32 PGs, 4 KiB objects; "
             "`log`: default PG log, `backfill`: a two-entry PG log.", "",
             "| mode | stale | objects | Loligo up s | Loligo clean s | Ceph up s | Ceph clean s | Loligo / Ceph |",
             "|---|---|---|---|---|---|---|---|"]
    for c in summary:
        f = lambda k: ("%.2f" % c[k]) if k in c else "-"
        lines.append("| %s | %g%% | %d | %s | %s | %s | %s | %s |" % (
            c["mode"], c["stale_pct"], c["objects"], f("loligo_up_s"), f("loligo_clean_s"),
            f("ceph_up_s"), f("ceph_clean_s"), ("%.2fx" % c["ratio"]) if "ratio" in c else "-"))
    lines += ["", "Target: Loligo / Ceph <= %.1f in every case." % TARGET, ""]
    open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(lines))
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = ["%s %g%%" % (c["mode"], c["stale_pct"]) for c in summary]
    xs = range(len(summary))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [c.get("loligo_clean_s", 0) for c in summary], w, label="Loligo")
    ax.bar([x + w / 2 for x in xs], [c.get("ceph_clean_s", 0) for c in summary], w, label="Ceph 16.2")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels)
    ax.set_ylabel("seconds from OSD start to all PGs clean")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "recovery.png"), dpi=120)


if __name__ == "__main__":
    main()
