#!/usr/bin/env python3
"""out/results.csv and out/per_osd.csv -> out/summary.json, out/crush_live.png
and out/RESULTS.md (see run.py)."""
import csv
import json
import os
import statistics
import sys

# The proposal's Table 2 (op/s, current straw2 -> optimized) and its
# stdev of PGs per OSD and spread of disk use% (Figures 4 and 5).
PAPER = {
    ("128K", "read"): (1224.9, 1388.78),
    ("128K", "write"): (1684.9, 1718.05),
    ("10M", "read"): (85.5, 95.58),
    ("10M", "write"): (72.25, 74.07),
}
PAPER_PGS_STDEV = {"128K": (10.09, 6.50), "10M": (12.13, 5.17)}
PAPER_DISK_SPREAD = {"128K": "more than 30% -> about 20%", "10M": "more than 30% -> about 10%"}


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return "%s (%s-%s)" % (fmt(med(xs)), fmt(min(xs)), fmt(max(xs))) if xs else "-"


def fmt(x):
    return "%.0f" % x if abs(x) >= 100 else "%.2f" % x


def used_range(per, layout, case):
    """Per round: (fullest - emptiest) / mean of the OSDs' disk use, in %
    (the proposal's "variation of disk use%")."""
    out = []
    for r in sorted({p["round"] for p in per}):
        u = [float(p["used_bytes"]) for p in per
             if p["layout"] == layout and p["case"] == case and p["round"] == r]
        if u and statistics.mean(u) > 0:
            out.append(100 * (max(u) - min(u)) / statistics.mean(u))
    return out


def main():
    out = sys.argv[1]
    rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
    per = list(csv.DictReader(open(os.path.join(out, "per_osd.csv"))))
    params = json.load(open(os.path.join(out, "params.json")))
    get = lambda layout, case, k: [float(r[k]) for r in rows
                                   if r["layout"] == layout and r["case"] == case]
    cases = []
    for case in ("128K", "10M"):
        for mode in ("read", "write"):
            s = get("straw2", case, "%s_ops_s" % mode)
            l = get("linear", case, "%s_ops_s" % mode)
            if not s or not l:
                continue
            p = PAPER[(case, mode)]
            cases.append(dict(case=case, mode=mode, straw2_ops_s=med(s), linear_ops_s=med(l),
                              straw2_range=[min(s), max(s)], linear_range=[min(l), max(l)],
                              ratio=med(l) / med(s), paper_ratio=p[1] / p[0],
                              runs=len(s)))
    dist = []
    for case in ("128K", "10M"):
        d = dict(case=case)
        for layout in ("straw2", "linear"):
            for k in ("pgs_stdev", "primaries_stdev", "used_cv_pct", "used_max_over_mean",
                      "reads_max_over_mean"):
                d["%s_%s" % (layout, k)] = med(get(layout, case, k))
            d["%s_used_range_pct" % layout] = med(used_range(per, layout, case))
        d["ratio"] = d["linear_pgs_stdev"] / d["straw2_pgs_stdev"]
        d["paper_pgs_stdev"] = PAPER_PGS_STDEV[case]
        dist.append(d)
    json.dump(dict(params=params, throughput=cases, distribution=dist),
              open(os.path.join(out, "summary.json"), "w"), indent=1)

    L = ["# Linear buckets against straw2 on a running cluster (the proposal's Table 2)", "",
         "%d OSD processes on one host bucket (failure domain the OSD), each OSD's reads from "
         "the disk capped at %.0f MB/s (a blkio cgroup each: one disk per OSD, as in the "
         "proposal's cluster); %d round(s) per case, medians with the range in parentheses. "
         "straw2: CRUSH's default buckets; linear: `alg linear` with `balance_param auto`. "
         "128K: a size-2 pool of 512 PGs; 10M: a size-3 pool of 256 PGs. Ratio: linear over "
         "straw2. Paper: 40 OSDs (4 hosts), 2048 PGs, COSBench through RGW."
         % (params["osds"], params["read_mbps"], params["rounds"]), "",
         "| case | mode | straw2 op/s | linear op/s | ratio | paper (current -> optimized) | paper ratio |",
         "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in cases:
        p = PAPER[(c["case"], c["mode"])]
        s = get("straw2", c["case"], "%s_ops_s" % c["mode"])
        l = get("linear", c["case"], "%s_ops_s" % c["mode"])
        L.append("| %s | %s | %s | %s | %.3f | %s -> %s | %.3f |" % (
            c["case"], c["mode"], spread(s), spread(l), c["ratio"], p[0], p[1], c["paper_ratio"]))
    L += ["", "Per OSD, the same runs: standard deviation of PG copies and of primaries per "
          "OSD; disk use (bytes each OSD's use grew by in the writes) as the coefficient of "
          "variation, the fullest over the mean, and the fullest less the emptiest over the "
          "mean (the spread the paper gives); device reads in the read phase, the "
          "busiest OSD over the mean (reads go to primaries: that OSD sets the read speed).",
          "",
          "| case | layout | PGs stdev | paper | primaries stdev | disk use CV % | fullest / mean | disk use spread % | paper disk use% spread | reads busiest / mean |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in dist:
        for i, layout in enumerate(("straw2", "linear")):
            L.append("| %s | %s | %.2f | %.2f | %.2f | %.1f | %.3f | %.1f | %s | %.3f |" % (
                d["case"], layout, d["%s_pgs_stdev" % layout], d["paper_pgs_stdev"][i],
                d["%s_primaries_stdev" % layout], d["%s_used_cv_pct" % layout],
                d["%s_used_max_over_mean" % layout], d["%s_used_range_pct" % layout],
                PAPER_DISK_SPREAD[d["case"]] if i == 0 else "", d["%s_reads_max_over_mean" % layout]))
    L += ["", "![throughput and spread](crush_live.png)", ""]
    open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(L))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    labels = ["%s %s" % (c["case"], c["mode"]) for c in cases]
    x = range(len(cases))
    ax[0].bar([i - 0.2 for i in x], [c["straw2_ops_s"] for c in cases], 0.4, label="straw2")
    ax[0].bar([i + 0.2 for i in x], [c["linear_ops_s"] for c in cases], 0.4, label="linear")
    ax[0].set_xticks(list(x))
    ax[0].set_xticklabels(labels)
    ax[0].set_yscale("log")
    ax[0].set_ylabel("op/s")
    ax[0].legend()
    for k, (case, key) in enumerate((("128K", "used_bytes"), ("128K", "read_bytes"))):
        for layout in ("straw2", "linear"):
            vals = [float(r[key]) for r in per if r["layout"] == layout and r["case"] == case
                    and r["round"] == "0"]
            m = statistics.mean(vals) or 1
            ax[k + 1].plot(range(len(vals)), [v / m for v in vals], "o-", label=layout)
        ax[k + 1].set_title("%s: %s per OSD / mean" % (case, key.replace("_", " ")))
        ax[k + 1].set_xlabel("OSD")
        ax[k + 1].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "crush_live.png"), dpi=90)


if __name__ == "__main__":
    main()
