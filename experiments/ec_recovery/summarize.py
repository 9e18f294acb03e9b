#!/usr/bin/env python3
"""Turn OUT/results.csv (and OUT/scale.csv, OUT/plans.json) into
OUT/summary.json, plots and OUT/RESULTS.md, the paper's numbers beside
Loligo's. Every figure of a case is the median of its runs, with the
spread (min-max) beside it."""
import csv
import json
import os
import statistics
import sys

out = sys.argv[1]
TEXT = ("code", "lost", "layout", "plugin")


def load(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        for k, v in r.items():
            if k not in TEXT:
                r[k] = float(v)
    return rows


rows = load("results.csv")
plans = json.load(open(os.path.join(out, "plans.json"))) if os.path.exists(os.path.join(out, "plans.json")) else []

# The paper (Zigzag codes in Ceph), where its text or tables state a number.
PAPER = {
    # Fig. 5.1, data read Zigzag / RS per GB recovered, conservative
    # (text of 5.2.1): (k, r, object MiB) -> ratio.
    "read": {(10, 3, 64): 0.63, (10, 4, 64): 0.61, (8, 2, 16): 0.57, (8, 3, 16): 0.66,
             (8, 4, 16): 0.65, (8, 2, 4): 0.68, (8, 3, 4): 0.81, (8, 4, 4): 0.64},
    # Fig. 5.4, recovery time Zigzag / RS, 64 MB objects (text of 5.2.5).
    "time": {(6, 2, 64): 0.72, (6, 3, 64): 0.76},
    # Table 5.2(a), conservative: % more data the optimal construction
    # reads than the basic one: (k, r, object MiB) -> percent.
    "table_5_2": {(8, 2, 4): 22, (6, 3, 4): 10, (8, 3, 4): -1, (10, 3, 4): -6, (8, 4, 4): 1, (10, 4, 4): -3,
                  (8, 2, 16): -1, (6, 3, 16): -8, (8, 3, 16): -2, (10, 3, 16): -8, (8, 4, 16): 4, (10, 4, 16): 7,
                  (8, 2, 64): -2, (6, 3, 64): -6, (8, 3, 64): -5, (10, 3, 64): 1, (8, 4, 64): 0, (10, 4, 64): -4},
    "table_5_2_aggressive": {(8, 2, 4): -8, (6, 3, 4): -10, (8, 3, 4): -8, (10, 3, 4): -9, (8, 4, 4): -7,
                             (10, 4, 4): -11, (8, 2, 16): -5, (6, 3, 16): -9, (8, 3, 16): -6, (10, 3, 16): -10,
                             (8, 4, 16): -7, (10, 4, 16): -11, (8, 2, 64): 6, (6, 3, 64): -3, (8, 3, 64): -5,
                             (10, 3, 64): -1, (8, 4, 64): -1, (10, 4, 64): 0},
    "table_5_3": {  # n, k, s -> RS, Zigzag, Pyramid, normalized Pyramid
        (8, 6, 1): (6, 4.12, 3.33, 3.75), (9, 6, 1): (6, 3.78, 3.6, 4),
        (10, 8, 1): (8, 5.2, 4.36, 4.8), (11, 8, 2): (8, 5.09, 4.67, 5.09),
        (12, 8, 2): (8, 5, 4.92, 5.33), (13, 10, 2): (10, 5.9, 5.71, 6.15),
        (14, 10, 3): (10, 6.04, 6, 6.43),
    },
    # Table 5.1: the rebuilding ratio of data disks (RR: bytes read to
    # rebuild a data node over RS's, averaged over data nodes) per k, r, s.
    "table_5_1_rr": {(6, 2, 1): 0.5, (6, 2, 2): 0.57, (6, 2, 3): 0.64, (6, 3, 1): 0.33,
                     (6, 3, 2): 0.42, (6, 3, 3): 0.5, (8, 2, 1): 0.5, (8, 2, 2): 0.55,
                     (8, 2, 3): 0.6, (8, 3, 2): 0.4, (8, 3, 3): 0.45, (8, 3, 4): 0.53,
                     (8, 4, 2): 0.32, (8, 4, 3): 0.37, (8, 4, 4): 0.45, (10, 3, 2): 0.39,
                     (10, 3, 3): 0.42, (10, 3, 4): 0.47, (10, 3, 5): 0.56, (10, 4, 3): 0.34,
                     (10, 4, 4): 0.39, (10, 4, 5): 0.48},
    "writes": "measured writes 7%-30% above expected at 64 MB (Fig. 5.2; expected counts the "
              "primary's local write of every rebuilt block), 60%-227% above at 4 MB",
}


def med(xs):
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return round(a / b, 4) if a is not None and b else None


def stats(xs):
    """Median and spread of a case's runs (None for no runs)."""
    if not xs:
        return {"median": None, "min": None, "max": None, "runs": 0}
    return {"median": round(med(xs), 4), "min": round(min(xs), 4), "max": round(max(xs), 4), "runs": len(xs)}


def case_key(x):
    return (x["code"], int(x["k"]), int(x["r"]), int(x["s"]), int(x["object_mib"]), x["lost"])


# One layout per summary: the paper's (one stripe per object) unless the
# results hold only another.
layouts = sorted({x.get("layout", "paper") for x in rows})
LAYOUT = "paper" if "paper" in layouts or not layouts else layouts[0]
rows = [x for x in rows if x.get("layout", "paper") == LAYOUT]
groups = {}
for x in rows:
    groups.setdefault(case_key(x), []).append(x)


def side(key):
    g = groups.get(key)
    if not g:
        return None
    return {
        "recovery_s": stats([x["recovery_s"] for x in g]),
        "dev_read_bytes": stats([x["dev_read_bytes"] for x in g]),
        "dev_read_vs_theory": stats([x["dev_read_bytes"] / x["theory_bytes"] for x in g if x["theory_bytes"]]),
        "store_read_vs_theory": stats([x["store_read_bytes"] / x["theory_bytes"] for x in g if x["theory_bytes"]]),
        "net_bytes": stats([x["net_bytes"] for x in g]),
        "store_reads": stats([x["store_reads"] for x in g]),
        "theory_bytes": int(med([x["theory_bytes"] for x in g])),
        "dev_write_vs_expected": stats([x["dev_write_bytes"] / x["expected_write_bytes"] for x in g]),
        "moved_max": int(max(x["moved"] for x in g)),
        "rebuilt_per_object": round(med([x["rebuilt_shards"] / x["objects"] for x in g]), 3),
        "element_kib": g[0]["element_kib"],
        "positions": sorted({int(x["position"]) for x in g}),
    }


def compare(a, b):
    """Code `a` against code `b`: ratios of their medians."""
    if not a or not b:
        return None
    c = {}
    for name, f in (("time", "recovery_s"), ("read", "dev_read_bytes"), ("net", "net_bytes")):
        c[name] = ratio(a[f]["median"], b[f]["median"])
    c["theory"] = ratio(a["theory_bytes"], b["theory_bytes"])
    c["read_vs_theory_ratio"] = ratio(c["read"], c["theory"])
    return c


configs = []
for k, r, s in sorted({(int(x["k"]), int(x["r"]), int(x["s"])) for x in rows if x["code"].startswith("zigzag")}):
    for mib in sorted({int(x["object_mib"]) for x in rows}):
        c = {"k": k, "r": r, "s": s, "object_mib": mib}
        for lost in ("data", "parity"):
            rs = side(("rs", k, r, 0, mib, lost))
            per = {"rs": rs}
            for code in ("zigzag", "zigzag-opt", "zigzag-agg"):
                z = side((code, k, r, s, mib, lost))
                if z:
                    per[code] = z
                    per[code + "_vs_rs"] = compare(z, rs)
            lrc = side(("lrc", k, r, 0, mib, lost))
            if lrc:
                per["lrc"] = lrc
                per["lrc_vs_rs"] = compare(lrc, rs)
            if rs and len(per) > 1:
                c[lost] = per
        # A failed OSD holds data shards k times in k + r, parity r times
        # (the paper's per-GB-recovered figures mix them so).
        if "data" in c and "parity" in c:
            wd, wp = k / (k + r), r / (k + r)
            for code in ("zigzag", "zigzag-opt", "zigzag-agg"):
                if code not in c["data"] or code not in c["parity"]:
                    continue
                w = {}
                for name, f in (("time", "recovery_s"), ("read", "dev_read_bytes"), ("net", "net_bytes")):
                    zz = wd * c["data"][code][f]["median"] + wp * c["parity"][code][f]["median"]
                    rr = wd * c["data"]["rs"][f]["median"] + wp * c["parity"]["rs"][f]["median"]
                    w[name] = ratio(zz, rr)
                tz = wd * c["data"][code]["theory_bytes"] + wp * c["parity"][code]["theory_bytes"]
                tr = wd * c["data"]["rs"]["theory_bytes"] + wp * c["parity"]["rs"]["theory_bytes"]
                w["theory"] = ratio(tz, tr)
                w["read_vs_theory_ratio"] = ratio(w["read"], w["theory"])
                c["weighted_" + code] = w
        # The weighted read ratio, else (runs of data losses only) the
        # data loss's.
        c["ratio"] = ((c.get("weighted_zigzag") or {}).get("read")
                      or ((c.get("data") or {}).get("zigzag_vs_rs") or {}).get("read"))
        c["paper_rr"] = PAPER["table_5_1_rr"].get((k, r, s))
        if "data" in c or "parity" in c:
            c["paper_read"] = PAPER["read"].get((k, r, mib))
            c["paper_time"] = PAPER["time"].get((k, r, mib))
            configs.append(c)

# Every case once (RS and LRC serve every s of their k, r).
sides = [side(key) for key in sorted(groups)]
# Each case's run farthest from theory, either way.
worst = [max(abs(x["dev_read_vs_theory"]["max"] - 1), abs(1 - x["dev_read_vs_theory"]["min"])) + 1
         for x in sides if x["dev_read_vs_theory"]["runs"]]
within = [w for w in worst if w - 1 <= 0.05]
cmp_dev = [c[l][p]["read_vs_theory_ratio"] for c in configs for l in ("data", "parity") if l in c
           for p in ("zigzag_vs_rs", "zigzag-opt_vs_rs") if p in c[l] and c[l][p]]
summary = {
    "configurations": configs,
    "targets": {
        "device_read_within_5pct_of_theory": f"{len(within)} of {len(worst)} cases (every run)",
        "worst_device_read_off_theory": round(max(worst, default=1) - 1, 4),
        "zigzag_vs_rs_read_ratio_vs_theory_ratio_worst": max(cmp_dev, default=None),
        "single_position_moved_in_every_run": all(x["moved"] == 1 for x in rows),
        "zigzag_vs_rs_time_best_weighted": min((c["weighted_zigzag"]["time"] for c in configs
                                               if c.get("weighted_zigzag")), default=None),
        "paper_best_time": 0.72,
    },
}

# --scale: many PGs, each RS / Zigzag pair from the same sitting.
srows = load("scale.csv")
scale = []
for key in sorted({(x["k"], x["r"], x["s"]) for x in srows if x["plugin"] == "zigzag"}):
    k, r_, s_ = key
    pairs = []
    for rep in sorted({x["repeat"] for x in srows}):
        z = next((x for x in srows if x["plugin"] == "zigzag" and x["k"] == k and x["r"] == r_
                  and x["repeat"] == rep), None)
        rs = next((x for x in srows if x["plugin"] == "rs" and x["k"] == k and x["r"] == r_
                   and x["repeat"] == rep), None)
        if z and rs:
            rd = "dev_read_bytes" if "dev_read_bytes" in z else "device_read_bytes"
            pairs.append({"rs_s": rs["recovery_s"], "zigzag_s": z["recovery_s"],
                          "time": ratio(z["recovery_s"], rs["recovery_s"]),
                          "read": ratio(z[rd], rs[rd]),
                          "theory": ratio(z["theory_bytes"], rs["theory_bytes"]),
                          "pgs": int(z["pgs"]), "objects": int(z["objects"]),
                          "object_mib": int(z["object_mib"])})
    if pairs:
        scale.append({"k": int(k), "r": int(r_), "s": int(s_), "pairs": pairs,
                      "time": stats([p["time"] for p in pairs]),
                      "read": stats([p["read"] for p in pairs]), "ratio": med([p["read"] for p in pairs])})
if scale:
    summary["scale"] = scale
summary["plans"] = plans


def fmt_bytes(x):
    return "%.1f" % (x / 2**20)


def spread(st, f=lambda v: "%.2f" % v):
    return "%s (%s-%s)" % (f(st["median"]), f(st["min"]), f(st["max"]))


try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    wc = [c for c in configs if c.get("weighted_zigzag")]
    if wc:
        labels = [f"k{c['k']} r{c['r']} s{c['s']}\n{c['object_mib']} MiB" for c in wc]
        xs = list(range(len(wc)))
        fig, ax = plt.subplots(1, 2, figsize=(13, 4))
        w = 0.2
        ax[0].bar([x - 1.5 * w for x in xs], [c["weighted_zigzag"]["read"] for c in wc], w, label="Zigzag device read")
        ax[0].bar([x - 0.5 * w for x in xs], [c["weighted_zigzag"]["theory"] for c in wc], w, label="theory")
        ax[0].bar([x + 0.5 * w for x in xs], [(c.get("weighted_zigzag-opt") or {}).get("read") or 0 for c in wc], w,
                  label="optimal construction")
        ax[0].bar([x + 1.5 * w for x in xs], [c["paper_read"] or 0 for c in wc], w, label="paper (Fig. 5.1)")
        ax[0].set_title("bytes read, Zigzag / RS (k:r weighted)")
        ax[1].bar([x - w / 2 for x in xs], [c["weighted_zigzag"]["time"] for c in wc], w, label="Loligo")
        ax[1].bar([x + w / 2 for x in xs], [c["paper_time"] or 0 for c in wc], w, label="paper (Fig. 5.4)")
        ax[1].set_title("recovery time, Zigzag / RS (k:r weighted)")
        for a in ax:
            a.set_xticks(xs)
            a.set_xticklabels(labels, fontsize=7)
            a.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "ec_recovery.png"), dpi=110)
        plt.close(fig)
    f56 = [p for p in plans if p["table"] == "5.6" and p.get("construction", "basic") == "basic"]
    if f56:
        fig, a = plt.subplots(figsize=(12, 4))
        names = sorted({(p["k"], p["r"], p["s"], p["object_mib"]) for p in f56})
        for i, co in enumerate(["conservative", "aggressive"]):
            v = [next(p["bytes_read_vs_rs"] for p in f56 if (p["k"], p["r"], p["s"], p["object_mib"]) == n
                      and p["coalesce"] == co) for n in names]
            a.bar([j + (i - 0.5) * 0.4 for j in range(len(names))], v, 0.4, label=co)
        a.set_xticks(range(len(names)))
        a.set_xticklabels([f"{n[0]},{n[1]},{n[2]}\n{n[3]}M" for n in names], fontsize=5)
        a.set_title("plan bytes read / RS, by coalescing (cf. Fig. 5.6)")
        a.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "coalescing.png"), dpi=110)
        plt.close(fig)
except ImportError:
    print("matplotlib missing: no plots", file=sys.stderr)

LAYOUT_TEXT = ("one stripe per object (the paper's element sizes)" if LAYOUT == "paper"
               else "the pool's default stripe unit")
md = ["# EC recovery: Reed-Solomon against Zigzag and LRC, measured at the device", "",
      "Generated by `experiments/ec_recovery/run.sh` (its header and run.py's say how). One PG, "
      + LAYOUT_TEXT + ", the victim chosen so that only its own "
      "position moves (each object rebuilds exactly one shard), page cache dropped before the "
      "failure. **Device bytes** are the surviving OSD processes' `/proc/PID/io` read_bytes "
      "(what reached the block layer, readahead and metadata included); theory is the plans' "
      "element bytes. Each figure is the median of the runs, the spread (min-max) in brackets. "
      "The parity lost is the first parity position whose going out moves no other (for LRC the "
      "table says whether it was a local or a global parity).", "",
      "## Per case", "",
      "| k | r | s | object | lost | code | element KiB | runs | time s | device MiB | device / theory | "
      "sent MiB | writes / shard bytes |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for c in configs:
    for lost in ("data", "parity"):
        if lost not in c:
            continue
        for code in ("rs", "zigzag", "zigzag-opt", "zigzag-agg", "lrc"):
            x = c[lost].get(code)
            if not x:
                continue
            shown = lost
            if (code, lost) == ("lrc", "parity"):
                # Pyramid's chunks: data, then the l = 2 local parities, then the global ones.
                shown = "local parity" if max(x["positions"]) < c["k"] + 2 else "global parity"
            md.append(f"| {c['k']} | {c['r']} | {c['s'] if code.startswith('zigzag') else ''} | "
                      f"{c['object_mib']} MiB | {shown} | {code} | {x['element_kib']:g} | {x['recovery_s']['runs']} | "
                      f"{spread(x['recovery_s'])} | {spread(x['dev_read_bytes'], fmt_bytes)} | "
                      f"{spread(x['dev_read_vs_theory'], lambda v: '%.3f' % v)} | "
                      f"{fmt_bytes(x['net_bytes']['median'])} | {x['dev_write_vs_expected']['median']:.2f} |")
md += ["", "## Zigzag / RS (Fig. 5.1 and 5.4)", "",
       "Ratios of the medians. `theory` is the plans' ratio; `read / theory` how far the device ratio is "
       "from it. The weighted rows mix data and parity losses k : r, as a failed OSD holds them "
       "(the paper's per-GB figures).", "",
       "| k | r | s | object | lost | time Z/RS | read Z/RS | theory | read / theory | sent Z/RS | "
       "optimal: read Z/RS | LRC: read / RS | paper read | paper time |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for c in configs:
    for lost in ("data", "parity", "weighted"):
        if lost == "weighted":
            z, o, l = c.get("weighted_zigzag"), c.get("weighted_zigzag-opt"), None
        elif lost in c:
            z, o, l = c[lost].get("zigzag_vs_rs"), c[lost].get("zigzag-opt_vs_rs"), c[lost].get("lrc_vs_rs")
        else:
            continue
        if not z:
            continue
        pr = c["paper_read"] if lost == "weighted" and c["paper_read"] else ""
        pt = c["paper_time"] if lost == "weighted" and c["paper_time"] else ""
        md.append(f"| {c['k']} | {c['r']} | {c['s']} | {c['object_mib']} MiB | {lost} | {z['time']} | {z['read']} | "
                  f"{z['theory']} | {z['read_vs_theory_ratio']} | {z['net']} | {(o or {}).get('read', '')} | "
                  f"{(l or {}).get('read', '')} | {pr} | {pt} |")

# Table 5.1's rows in the cluster: a data shard lost, Zigzag's device
# bytes over RS's, beside the plan for the position lost and the paper's
# rebuilding ratio. RR is the share of each of the k + r - 1 survivors
# read; RS reads k whole chunks, so Zigzag / RS = RR (k + r - 1) / k.
t51 = [c for c in configs if (c.get("data") or {}).get("zigzag_vs_rs")]
if t51:
    md += ["", "## Table 5.1 in the cluster (a data shard lost)", "",
           "Zigzag's device bytes over Reed-Solomon's, ratio of the medians (runs in brackets: each "
           "run's ratio against the RS median), for the one data position lost; `plan` is the "
           "plans' ratio for that position. The paper's rebuilding ratio (RR) is the share of each "
           "of the k + r - 1 surviving shards read; RS reads k whole shards, so in this table's "
           "unit the paper's figure is RR (k + r - 1) / k (`paper, as Z/RS`).", "",
           "| k | r | s | object | element KiB | runs | read Z/RS | plan | read / plan | paper RR | "
           "paper, as Z/RS | time Z/RS |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in t51:
        d = c["data"]
        z, rs = d["zigzag"], d["rs"]
        per = [x["dev_read_bytes"] / rs["dev_read_bytes"]["median"] for x in rows
               if x["code"] == "zigzag" and int(x["k"]) == c["k"] and int(x["r"]) == c["r"]
               and int(x["s"]) == c["s"] and int(x["object_mib"]) == c["object_mib"]
               and x["lost"] == "data"] if rs["dev_read_bytes"]["median"] else []
        rng = " (%.3f-%.3f)" % (min(per), max(per)) if per else ""
        cmp = d["zigzag_vs_rs"]
        rr = c["paper_rr"]
        as_zrs = "%.3f" % (rr * (c["k"] + c["r"] - 1) / c["k"]) if rr else ""
        md.append(f"| {c['k']} | {c['r']} | {c['s']} | {c['object_mib']} MiB | {z['element_kib']:g} | "
                  f"{z['recovery_s']['runs']} | {cmp['read']}{rng} | {cmp['theory']} | "
                  f"{cmp['read_vs_theory_ratio']} | {rr or ''} | {as_zrs} | {cmp['time']} |")

t52 = []
for c in configs:
    for lost in ("data", "parity"):
        if lost in c and "zigzag-opt" in c[lost] and "zigzag" in c[lost]:
            b = c[lost]["zigzag"]["dev_read_bytes"]["median"]
            o = c[lost]["zigzag-opt"]["dev_read_bytes"]["median"]
            bi = c[lost]["zigzag"]["store_reads"]["median"]
            oi = c[lost]["zigzag-opt"]["store_reads"]["median"]
            if b and bi:
                t52.append((c, lost, "%+.1f / %+.0f" % (100 * (o - b) / b, 100 * (oi - bi) / bi)))
offline52 = {}
for p in plans:
    if p["table"] == "5.6":
        offline52[(p["k"], p["r"], p["s"], p["object_mib"], p.get("construction", "basic"), p["coalesce"])] = p
if t52 or offline52:
    md += ["", "## Table 5.2: optimal against basic construction (% more read by the optimal one)", "",
           "Cluster: device bytes / read requests the stores issued, conservative coalescing (the OSDs'). "
           "Plans: element bytes, both coalescings. The paper's differences in bytes come from the disk's "
           "readahead around separate requests; here reads reach the device as planned (device bytes = "
           "theory), so the optimal order can change only how many requests carry the same bytes.", "",
           "| k | r | s | object | cluster, data lost: bytes / requests | cluster, parity lost | plan conservative | paper (a) | "
           "plan aggressive | paper (b) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for (k, r, s, mib, cons, co), p in sorted(offline52.items()):
        if cons != "optimal" or co != "conservative":
            continue
        def pct(co):
            b = offline52[(k, r, s, mib, "basic", co)]["bytes_read_vs_rs"]
            o = offline52[(k, r, s, mib, "optimal", co)]["bytes_read_vs_rs"]
            return round(100 * (o - b) / b, 1)
        cl = {lost: v for (c, lost, v) in t52 if (c["k"], c["r"], c["s"], c["object_mib"]) == (k, r, s, mib)}
        md.append(f"| {k} | {r} | {s} | {mib} MiB | {cl.get('data', '')} | {cl.get('parity', '')} | {pct('conservative')} | "
                  f"{PAPER['table_5_2'].get((k, r, mib), '')} | {pct('aggressive')} | "
                  f"{PAPER['table_5_2_aggressive'].get((k, r, mib), '')} |")

wr = [(c, lost, code, c[lost][code]["dev_write_vs_expected"]) for c in configs for lost in ("data", "parity")
      if lost in c for code in ("rs", "zigzag") if code in c[lost]]
if wr:
    md += ["", "## Writes during recovery (Fig. 5.2)", "",
           "Bytes the surviving OSDs wrote to the block layer per byte of shard rebuilt. The rebuilt shard "
           "goes to its new OSD only (the primary keeps no copy of it), so 1.0 is the floor; the paper's "
           "expected writes count the primary's local copy too. Paper: " + PAPER["writes"] + ".", "",
           "| object | codes | median | worst |", "|---|---|---|---|"]
    for mib in sorted({c["object_mib"] for c, *_ in wr}):
        xs = [w for c, _, _, w in wr if c["object_mib"] == mib]
        md.append(f"| {mib} MiB | RS and Zigzag, every case | {med([x['median'] for x in xs]):.2f} | "
                  f"{max(x['max'] for x in xs):.2f} |")

if scale:
    what = "device" if srows and "dev_read_bytes" in srows[0] else "store-counted"
    md += ["", "## Many PGs (`run.sh --scale`)", "",
           "A pool of 32 PGs at the pool's default stripe unit: the failed OSD held data shards in some and "
           "parity shards in others, and every PG it was in backfilled at once. Each pair is one RS run and "
           "one Zigzag run in the same sitting (the order alternates between repeats).", "",
           f"| k | r | s | pairs | time Z/RS | {what} read Z/RS | theory |", "|---|---|---|---|---|---|---|"]
    for c in scale:
        md.append(f"| {c['k']} | {c['r']} | {c['s']} | {len(c['pairs'])} | {spread(c['time'], lambda v: '%.3f' % v)} | "
                  f"{spread(c['read'], lambda v: '%.3f' % v)} | {c['pairs'][0]['theory']} |")

md += ["", "## Table 5.3: blocks read per failed block (offline, `loligo ec plan`)", "",
       "Averaged over every single failure (data and parity). The paper's unit is the unpadded block: "
       "the Zigzag column plans an object that fills its stripe exactly. A 4 MiB object's plan divided "
       "by its padded chunk reads less (its last data chunk is partly empty): that column is not the "
       "paper's unit.", "",
       "| n | k | s | RS | Zigzag (Loligo) | Zigzag (paper) | 4 MiB, per padded chunk | Pyramid (Loligo) | "
       "Pyramid (paper) | normalized Pyramid (Loligo) | (paper) |",
       "|---|---|---|---|---|---|---|---|---|---|---|"]
for p in plans:
    if p["table"] != "5.3":
        continue
    ref = PAPER["table_5_3"].get((p["n"], p["k"], p["s"]))
    md.append(f"| {p['n']} | {p['k']} | {p['s']} | {p['rs']} | {p['zigzag']} | {ref[1] if ref else ''} | "
              f"{p.get('zigzag_4mib_padded', '')} | {p['pyramid']} | {ref[2] if ref else ''} | "
              f"{p['pyramid_normalized']} | {ref[3] if ref else ''} |")
f56 = [p for p in plans if p["table"] == "5.6" and p.get("construction", "basic") == "basic"]
if f56:
    md += ["", "## Coalescing (Fig. 5.6; offline plans, basic construction, bytes read / RS)", "",
           "| k | r | s | object | element KiB | conservative | aggressive | I/Os conservative | I/Os aggressive |",
           "|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({(p["k"], p["r"], p["s"], p["object_mib"]) for p in f56}):
        c = next(p for p in f56 if (p["k"], p["r"], p["s"], p["object_mib"]) == n and p["coalesce"] == "conservative")
        a = next(p for p in f56 if (p["k"], p["r"], p["s"], p["object_mib"]) == n and p["coalesce"] == "aggressive")
        md.append(f"| {n[0]} | {n[1]} | {n[2]} | {n[3]} MiB | {c.get('element_kib', '')} | {c['bytes_read_vs_rs']} | "
                  f"{a['bytes_read_vs_rs']} | {c['avg_ios']} | {a['avg_ios']} |")
    agg = [(c, lost) for c in configs for lost in ("data", "parity")
           if lost in c and "zigzag-agg" in c[lost] and "zigzag" in c[lost]]
    if agg:
        md += ["", "In the cluster (`--codes zigzag-agg`: basic construction, the pool's `read_coalesce "
               "aggressive`), against the same code's conservative runs of this sitting: time, device bytes "
               "and the read requests the stores issued, aggressive / conservative, with the plans' bytes "
               "ratio beside them. Which position is lost matters: a Zigzag data position whose repair "
               "reads one run per chunk (position 1 here) plans alike both ways.", "",
               "| k | r | s | object | lost | element KiB | time | device bytes | requests | plan bytes |",
               "|---|---|---|---|---|---|---|---|---|---|"]
        for c, lost in agg:
            a, z = c[lost]["zigzag-agg"], c[lost]["zigzag"]
            pos = ", ".join(str(p) for p in sorted(set(a["positions"]) | set(z["positions"])))
            md.append(f"| {c['k']} | {c['r']} | {c['s']} | {c['object_mib']} MiB | {lost}, position {pos} | "
                      f"{z['element_kib']:g} | "
                      f"{ratio(a['recovery_s']['median'], z['recovery_s']['median'])} | "
                      f"{ratio(a['dev_read_bytes']['median'], z['dev_read_bytes']['median'])} | "
                      f"{ratio(a['store_reads']['median'], z['store_reads']['median'])} | "
                      f"{ratio(a['theory_bytes'], z['theory_bytes'])} |")
            summary.setdefault("coalescing", []).append({
                "k": c["k"], "r": c["r"], "s": c["s"], "object_mib": c["object_mib"], "lost": lost,
                "ratio": ratio(a["recovery_s"]["median"], z["recovery_s"]["median"]),
                "read": ratio(a["dev_read_bytes"]["median"], z["dev_read_bytes"]["median"]),
                "requests": ratio(a["store_reads"]["median"], z["store_reads"]["median"]),
                "theory": ratio(a["theory_bytes"], z["theory_bytes"])})
    else:
        md += ["", "No cluster run of aggressive coalescing in this sitting (`--codes ...,zigzag-agg` adds one; "
               "`out-coalesce/` holds one, made by the command in run.sh's header)."]
md.append("")
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(md))
print(json.dumps(summary["targets"]))
