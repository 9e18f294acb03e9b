#!/usr/bin/env python3
"""Turn OUT/results.csv and OUT/plans.json into OUT/summary.json, plots
and OUT/RESULTS.md (the paper's numbers beside Loligo's)."""
import csv
import json
import os
import sys

out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
for r in rows:
    for k, v in r.items():
        if k not in ("plugin", "lost"):
            r[k] = float(v)
plans = json.load(open(os.path.join(out, "plans.json")))

# The paper's numbers (Zigzag on Ceph, conservative coalescing): Zigzag's
# recovery time and data read as a fraction of Reed-Solomon's, where the
# text states them, and its Table 5.3.
PAPER = {
    "claims": "18%-39% less data read and transferred than RS; recovery time down to 0.72x RS "
              "(k=6, r=2, 64 MiB); reads up to 42% above the plan's expectation "
              "(k=10, r=3, s=5, unaligned 137 KiB elements)",
    "table_5_3": {  # n, k, s -> RS, Zigzag, Pyramid, normalized Pyramid
        (8, 6, 1): (6, 4.12, 3.33, 3.75), (9, 6, 1): (6, 3.78, 3.6, 4),
        (10, 8, 1): (8, 5.2, 4.36, 4.8), (11, 8, 2): (8, 5.09, 4.67, 5.09),
        (12, 8, 2): (8, 5, 4.92, 5.33), (13, 10, 2): (10, 5.9, 5.71, 6.15),
        (14, 10, 3): (10, 6.04, 6, 6.43),
    },
}

configs = []


def ratio(a, b):
    return round(a / b, 4) if b else None


def pick(plugin, k, r, s, mib, lost):
    return next((x for x in rows if x["plugin"] == plugin and x["k"] == k and x["r"] == r
                 and x["object_mib"] == mib and x["lost"] == lost
                 and (plugin == "rs" or x["s"] == s)), None)


def side(x):
    return {"recovery_s": x["recovery_s"], "read_vs_theory": ratio(x["device_read_bytes"], x["theory_bytes"]),
            "device_read_bytes": int(x["device_read_bytes"]), "theory_bytes": int(x["theory_bytes"]),
            "net_bytes": int(x["net_bytes"]), "proc_read_bytes": int(x["proc_read_bytes"]),
            "rebuilt_shards": int(x["rebuilt_shards"])}


keys = sorted({(r["k"], r["r"], r["s"], r["object_mib"]) for r in rows if r["plugin"] == "zigzag"})
for k, r_, s_, mib in keys:
    per = {}
    for lost in ("data", "parity"):
        z, rs = pick("zigzag", k, r_, s_, mib, lost), pick("rs", k, r_, s_, mib, lost)
        if z and rs:
            per[lost] = (z, rs)
    if not per:
        continue
    c = {"k": int(k), "r": int(r_), "s": int(s_), "object_mib": int(mib)}
    for lost, (z, rs) in per.items():
        c[lost] = {"rs": side(rs), "zigzag": side(z),
                   "zigzag_vs_rs_time": ratio(z["recovery_s"], rs["recovery_s"]),
                   "zigzag_vs_rs_read": ratio(z["device_read_bytes"], rs["device_read_bytes"]),
                   "zigzag_vs_rs_net": ratio(z["net_bytes"], rs["net_bytes"])}
    # A failed OSD holds data shards k times in k + r, parity r times.
    if len(per) == 2:
        wd, wp = k / (k + r_), r_ / (k + r_)
        avg = lambda f, p: wd * f(per["data"][p]) + wp * f(per["parity"][p])
        for name, f in (("time", lambda x: x["recovery_s"]), ("read", lambda x: x["device_read_bytes"]),
                        ("net", lambda x: x["net_bytes"])):
            c["weighted_zigzag_vs_rs_" + name] = ratio(avg(f, 0), avg(f, 1))
    configs.append(c)

sides = [c[l][p] for c in configs for l in ("data", "parity") if l in c for p in ("rs", "zigzag")]
within = [x for x in sides if x["read_vs_theory"] is not None and abs(x["read_vs_theory"] - 1) <= 0.05]
summary = {
    "configurations": configs,
    "targets": {
        "read_within_5pct_of_theory": f"{len(within)} of {len(sides)}",
        "zigzag_vs_rs_time_best_weighted": min((c["weighted_zigzag_vs_rs_time"] for c in configs if c.get("weighted_zigzag_vs_rs_time")), default=None),
        "zigzag_vs_rs_time_best_data_shard": min((c["data"]["zigzag_vs_rs_time"] for c in configs if "data" in c and c["data"]["zigzag_vs_rs_time"]), default=None),
        "zigzag_vs_rs_time_target": 0.72,
    },
    "plans": plans,
}
# --scale: many PGs, each RS / Zigzag pair from the same sitting.
scale = []
scale_path = os.path.join(out, "scale.csv")
if os.path.exists(scale_path):
    srows = list(csv.DictReader(open(scale_path)))
    for r in srows:
        for k, v in r.items():
            if k != "plugin":
                r[k] = float(v)
    for key in sorted({(r["k"], r["r"], r["s"] if r["plugin"] == "zigzag" else None) for r in srows
                       if r["plugin"] == "zigzag"}):
        k, r_, s_ = key
        pairs = []
        for rep in sorted({r["repeat"] for r in srows}):
            z = next((x for x in srows if x["plugin"] == "zigzag" and x["k"] == k and x["r"] == r_
                      and x["repeat"] == rep), None)
            rs = next((x for x in srows if x["plugin"] == "rs" and x["k"] == k and x["r"] == r_
                       and x["repeat"] == rep), None)
            if z and rs:
                pairs.append({"rs_s": rs["recovery_s"], "zigzag_s": z["recovery_s"],
                              "time": ratio(z["recovery_s"], rs["recovery_s"]),
                              "read": ratio(z["device_read_bytes"], rs["device_read_bytes"]),
                              "rs_read_vs_theory": ratio(rs["device_read_bytes"], rs["theory_bytes"]),
                              "zigzag_read_vs_theory": ratio(z["device_read_bytes"], z["theory_bytes"]),
                              "pgs": int(z["pgs"]), "objects": int(z["objects"]),
                              "object_mib": int(z["object_mib"])})
        if pairs:
            times = sorted(p["time"] for p in pairs)
            mid = len(times) // 2
            median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
            scale.append({"k": int(k), "r": int(r_), "s": int(s_), "pairs": pairs,
                          "zigzag_vs_rs_time_median": round(median, 4)})
    summary["scale"] = scale
    summary["targets"]["zigzag_vs_rs_time_scale_best_median"] = min(
        (c["zigzag_vs_rs_time_median"] for c in scale), default=None)
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"k{c['k']} r{c['r']} s{c['s']}\n{c['object_mib']} MiB" for c in configs]
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    xs = list(range(len(configs)))
    w = 0.27
    for i, (name, key) in enumerate([("data shard lost", "data"), ("parity shard lost", "parity")]):
        ax[0].bar([x + (i - 1) * w for x in xs], [c.get(key, {}).get("zigzag_vs_rs_read") or 0 for c in configs], w, label=name)
        ax[1].bar([x + (i - 1) * w for x in xs], [c.get(key, {}).get("zigzag_vs_rs_time") or 0 for c in configs], w, label=name)
    ax[0].bar([x + w for x in xs], [c.get("weighted_zigzag_vs_rs_read") or 0 for c in configs], w, label="weighted k:r")
    ax[1].bar([x + w for x in xs], [c.get("weighted_zigzag_vs_rs_time") or 0 for c in configs], w, label="weighted k:r")
    ax[0].set_title("device bytes read, Zigzag / RS (cf. Fig. 5.1)")
    ax[1].axhline(0.72, color="red", lw=1, ls="--", label="paper's best 0.72")
    ax[1].set_title("recovery time, Zigzag / RS (cf. Fig. 5.4)")
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=7)
    ax[2].bar(xs, [max(x["read_vs_theory"] or 0 for l in ("data", "parity") if l in c for x in (c[l]["rs"], c[l]["zigzag"])) for c in configs])
    ax[2].set_title("device bytes read / plan theory (worst of the runs)")
    for a in ax:
        a.set_xticks(xs)
        a.set_xticklabels(labels, fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ec_recovery.png"), dpi=110)
    f56 = [p for p in plans if p["table"] == "5.6"]
    if f56:
        fig, a = plt.subplots(figsize=(7, 4))
        names = sorted({(p["k"], p["r"], p["s"], p["object_mib"]) for p in f56})
        for i, co in enumerate(["conservative", "aggressive"]):
            v = [next(p["bytes_read_vs_rs"] for p in f56 if (p["k"], p["r"], p["s"], p["object_mib"]) == n and p["coalesce"] == co) for n in names]
            a.bar([j + (i - 0.5) * 0.4 for j in range(len(names))], v, 0.4, label=co)
        a.set_xticks(range(len(names)))
        a.set_xticklabels([f"k{n[0]} r{n[1]} s{n[2]}\n{n[3]} MiB" for n in names], fontsize=7)
        a.set_title("plan bytes read / RS, by coalescing (cf. Fig. 5.6)")
        a.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "coalescing.png"), dpi=110)
except ImportError:
    print("matplotlib missing: no plots", file=sys.stderr)

md = ["# EC recovery: Reed-Solomon against Zigzag, measured at the disk", "",
      "Generated by `experiments/ec_recovery/run.sh` (see its header for the method). "
      "Bytes read are the OSD stores' own device-read counters (every read request the store sends to its "
      "block file); `/proc` read_bytes of the OSD processes is in results.csv beside them.", "",
      "| k | r | s | object | lost | RS s | Zigzag s | time Z/RS | read Z/RS | sent Z/RS | RS read/theory | Z read/theory |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for c in configs:
    for lost in ("data", "parity"):
        if lost not in c:
            continue
        x = c[lost]
        md.append(f"| {c['k']} | {c['r']} | {c['s']} | {c['object_mib']} MiB | {lost} | {x['rs']['recovery_s']:.2f} | "
                  f"{x['zigzag']['recovery_s']:.2f} | {x['zigzag_vs_rs_time']} | {x['zigzag_vs_rs_read']} | "
                  f"{x['zigzag_vs_rs_net']} | {x['rs']['read_vs_theory']} | {x['zigzag']['read_vs_theory']} |")
    if "weighted_zigzag_vs_rs_read" in c:
        md.append(f"| {c['k']} | {c['r']} | {c['s']} | {c['object_mib']} MiB | weighted k:r | | | "
                  f"{c['weighted_zigzag_vs_rs_time']} | {c['weighted_zigzag_vs_rs_read']} | {c['weighted_zigzag_vs_rs_net']} | | |")
if scale:
    md += ["", "## Many PGs (`run.sh --scale`)", "",
           "A pool of 32 PGs: the failed OSD held data shards in some and parity shards in others, "
           "and every PG it was in backfilled at once. Each row is one RS run and one Zigzag run "
           "in the same sitting (the order alternates between repeats).", "",
           "| k | r | s | PGs | objects | RS s | Zigzag s | time Z/RS | read Z/RS | RS read/theory | Z read/theory |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in scale:
        for p in c["pairs"]:
            md.append(f"| {c['k']} | {c['r']} | {c['s']} | {p['pgs']} | {p['objects']} x {p['object_mib']} MiB | "
                      f"{p['rs_s']:.2f} | {p['zigzag_s']:.2f} | {p['time']} | {p['read']} | "
                      f"{p['rs_read_vs_theory']} | {p['zigzag_read_vs_theory']} |")
md += ["", "The paper (Zigzag in Ceph): " + PAPER["claims"] + ".", "",
       "## Table 5.3: blocks read per failed block (offline, `loligo ec plan`)", "",
       "| n | k | s | RS | Zigzag (Loligo) | Zigzag (paper) | Pyramid (Loligo) | Pyramid (paper) | normalized Pyramid (Loligo) | (paper) |",
       "|---|---|---|---|---|---|---|---|---|---|"]
for p in plans:
    if p["table"] != "5.3":
        continue
    ref = PAPER["table_5_3"].get((p["n"], p["k"], p["s"]))
    md.append(f"| {p['n']} | {p['k']} | {p['s']} | {p['rs']} | {p['zigzag']} | {ref[1] if ref else ''} | "
              f"{p['pyramid']} | {ref[2] if ref else ''} | {p['pyramid_normalized']} | {ref[3] if ref else ''} |")
md += ["", "## Coalescing (Fig. 5.6; offline plans, bytes read / RS)", "",
       "| k | r | s | object | conservative | aggressive | I/Os conservative | I/Os aggressive |",
       "|---|---|---|---|---|---|---|---|"]
f56 = [p for p in plans if p["table"] == "5.6"]
for n in sorted({(p["k"], p["r"], p["s"], p["object_mib"]) for p in f56}):
    c = next(p for p in f56 if (p["k"], p["r"], p["s"], p["object_mib"]) == n and p["coalesce"] == "conservative")
    a = next(p for p in f56 if (p["k"], p["r"], p["s"], p["object_mib"]) == n and p["coalesce"] == "aggressive")
    md.append(f"| {n[0]} | {n[1]} | {n[2]} | {n[3]} MiB | {c['bytes_read_vs_rs']} | {a['bytes_read_vs_rs']} | {c['avg_ios']} | {a['avg_ios']} |")
md += ["", "The OSDs use conservative coalescing (never read an element the plan does not need).", ""]
open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(md))
print(json.dumps(summary["targets"]))
