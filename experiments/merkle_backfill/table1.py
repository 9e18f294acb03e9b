#!/usr/bin/env python3
"""Summarize table1.sh's table1.csv: the paper's Table 1 beside ours.

Writes OUT/table1.json (per cluster: its leaf count, the mean and standard
deviation of the seconds to write the objects, as the paper gives them,
the median, and the ratio of the bases' median to its own), OUT/table1.md
(the table, which summarize.py puts in RESULTS.md) and OUT/table1.png.

The base is every run of the clusters without trees, pooled: table1.sh
makes one first and one last by default (LEAVES may interleave more), so
the advantage of being made first falls on one base and on none of the
trees, and the bases' own ratios show how far apart identical clusters
run.
"""
import csv
import json
import os
import statistics
import sys

# "Merkle-tree backfill" for Ceph, Table 1: seconds to write 1,000 new
# objects, mean and standard deviation of 25 runs (its "8196 ranges" row
# is 8,192 leaves).
PAPER = {0: (17.665, 1.137), 1024: (17.353, 1.134), 2048: (17.347, 1.261),
         4096: (17.476, 1.368), 8192: (17.59, 1.339), 16384: (17.449, 1.24),
         32768: (17.35, 1.272), 65536: (17.25, 1.257)}


def summarize(rows):
    by = {}
    leaves_of = {}
    for r in rows:
        k = int(r["cluster"])
        leaves_of[k] = int(r["leaves"])
        by.setdefault(k, []).append(float(r["seconds"]))
    bases = [k for k in sorted(by) if leaves_of[k] == 0]
    pooled = [s for k in bases for s in by[k]]
    base = statistics.median(pooled) if pooled else None
    out = []
    for k in sorted(by, key=lambda k: (leaves_of[k], k)):
        s, leaves = by[k], leaves_of[k]
        row = {"cluster": k, "leaves": leaves, "runs": len(s),
               "mean_s": round(statistics.mean(s), 4),
               "stdev_s": round(statistics.stdev(s), 4) if len(s) > 1 else 0.0,
               "median_s": round(statistics.median(s), 4),
               "min_s": round(min(s), 4), "max_s": round(max(s), 4)}
        if leaves == 0:
            row["made"] = "first" if k == min(by) else "last" if k == max(by) else "%s of %d" % (ordinal(k + 1), len(by))
        if base:
            # The ratio: the bases' time over this one's (above 1: faster
            # than without trees), as the other experiments' ratios read.
            row["ratio"] = round(base / row["median_s"], 4)
        p = PAPER.get(leaves)
        if p:
            row["paper_mean_s"], row["paper_stdev_s"] = p
            row["paper_ratio"] = round(PAPER[0][0] / p[0], 4)
        out.append(row)
    return out


def ordinal(n):
    return "%d%s" % (n, {1: "st", 2: "nd", 3: "rd"}.get(n % 10 if n % 100 not in (11, 12, 13) else 0, "th"))


def main():
    out = sys.argv[1]
    rows = list(csv.DictReader(open(os.path.join(out, "table1.csv"))))
    if not rows:
        sys.exit("table1.csv has no runs")
    table = summarize(rows)
    objects, size = rows[0]["objects"], int(rows[0]["obj_size"])
    trees = [t["ratio"] for t in table if t["leaves"] and "ratio" in t]
    aa = [t["ratio"] for t in table if not t["leaves"] and "ratio" in t]
    worst = min(trees, default=None)
    doc = {"objects": int(objects), "obj_size": size, "rows": table,
           "worst_ratio": worst,
           "overhead_pct_worst": round((1 / worst - 1) * 100, 2) if worst else None,
           "median_tree_ratio": round(statistics.median(trees), 4) if trees else None,
           "base_ratios": aa}
    json.dump(doc, open(os.path.join(out, "table1.json"), "w"), indent=1)
    made = [t["made"] for t in table if not t["leaves"]]
    L = ["## Table 1: time to write %s new objects of %g KiB" % (objects, size / 1024), "",
         ("One 3-OSD cluster of 32 PGs per row: %d without trees (made %s) and one per leaf "
          "count, all up at once, each round loading each in turn in a shuffled order (16 in "
          "flight). Ratio: the bases' pooled median time over the row's (1 = no cost; below 1: "
          "slower with trees); the bases' own ratios show how far identical clusters differ. "
          "The paper's times are for its Ceph cluster and workload: compare the ratios, not the "
          "seconds." % (len(made), ", ".join(made))), "",
         "| leaves per PG | runs | mean s | stdev s | median s | ratio | paper mean s | paper stdev s | paper ratio |",
         "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        L.append("| %s | %d | %.3f | %.3f | %.3f | %s | %s | %s | %s |" % (
            t["leaves"] or "base (no trees, made %s)" % t["made"], t["runs"], t["mean_s"], t["stdev_s"],
            t["median_s"], "%.3f" % t["ratio"] if "ratio" in t else "-",
            t.get("paper_mean_s", "-"), t.get("paper_stdev_s", "-"),
            "%.3f" % t["paper_ratio"] if "paper_ratio" in t else "-"))
    if worst:
        pct = doc["overhead_pct_worst"]
        L += ["", "Trees' ratios: median %.3f, slowest %.3f (%.1f%% %s than the bases); the "
              "bases against their pool: %s. The paper: every tree within one standard "
              "deviation of its base." % (doc["median_tree_ratio"], worst, abs(pct),
                                           "slower" if pct >= 0 else "faster",
                                           ", ".join("%.3f" % x for x in aa))]
    open(os.path.join(out, "table1.md"), "w").write("\n".join(L) + "\n")
    if not os.path.exists(os.path.join(out, "results.csv")):
        # Run alone (not from run.sh): this folder's own summary.
        json.dump(doc, open(os.path.join(out, "summary.json"), "w"), indent=1)
        open(os.path.join(out, "RESULTS.md"), "w").write(
            "# Merkle-tree backfill: the write cost of keeping trees\n\n`bash "
            "experiments/merkle_backfill/table1.sh`\n\n" + "\n".join(L)
            + "\n\n![Table 1](table1.png)\n")
    print("\n".join(L))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = list(range(len(table)))
    ax.errorbar(xs, [t["mean_s"] for t in table], yerr=[t["stdev_s"] for t in table],
                fmt="o", capsize=4, label="Loligo (mean, stdev)")
    ax.set_xticks(xs)
    ax.set_xticklabels(["base, %s" % t["made"] if not t["leaves"] else str(t["leaves"])
                        for t in table], rotation=30)
    ax.set_xlabel("leaves per PG")
    ax.set_ylabel("seconds to write %s objects" % objects)
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    paper = [(x, t) for x, t in zip(xs, table) if "paper_mean_s" in t]
    ax2.errorbar([x for x, _ in paper], [t["paper_mean_s"] for _, t in paper],
                 yerr=[t["paper_stdev_s"] for _, t in paper], fmt="s", color="tab:gray",
                 capsize=4, label="paper (its Ceph, right axis)")
    ax2.set_ylim(bottom=0)
    ax2.set_ylabel("paper: seconds")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="lower right")
    ax.set_title("Table 1: write time with Merkle trees kept")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "table1.png"), dpi=110)


if __name__ == "__main__":
    main()
