#!/usr/bin/env python3
"""Turn the PG split experiment's results.csv into summary.json, RESULTS.md
and pg_split.png (in the same folder)."""
import csv
import json
import os
import sys


def main():
    out = sys.argv[1]
    rows = {r["system"]: r for r in csv.DictReader(open(os.path.join(out, "results.csv")))}
    s = {}
    for name, r in rows.items():
        s[name] = {
            "objects": int(r["objects"]),
            "pg_num": [int(r["from"]), int(r["to"])],
            "clean_s": float(r["clean_s"]),
            "reads_ops_s_before": float(r["base_ops_s"]),
            "reads_ops_s_during": float(r["during_ops_s"]),
        }
    if "loligo" in s and "ceph" in s:
        s["clean_ratio_loligo_over_ceph"] = round(s["loligo"]["clean_s"] / s["ceph"]["clean_s"], 3)
        s["reads_during_ratio_loligo_over_ceph"] = round(
            s["loligo"]["reads_ops_s_during"] / max(s["ceph"]["reads_ops_s_during"], 1e-9), 3)
    json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=2)
    lines = ["# PG split under client load: Loligo vs Ceph 16.2", "",
             "A 4-OSD cluster, a size-3 pool of 4 KiB objects; pg_num raised at once, "
             "pgp_num following in steps under 5% misplaced (Loligo's monitors, Ceph's "
             "manager); seconds from `pool set pg_num` until pg_num = pgp_num and every PG "
             "is active+clean, and random 4 KiB reads (16 in flight) before and during.", "",
             "| system | objects | PGs | seconds to clean | reads/s before | reads/s during |",
             "|---|---|---|---|---|---|"]
    for name in ("loligo", "ceph"):
        if name in s:
            c = s[name]
            lines.append("| %s | %d | %d -> %d | %.1f | %.0f | %.0f |" % (
                name, c["objects"], c["pg_num"][0], c["pg_num"][1], c["clean_s"],
                c["reads_ops_s_before"], c["reads_ops_s_during"]))
    if "clean_ratio_loligo_over_ceph" in s:
        lines += ["", "Loligo / Ceph: time to clean %.2f, reads during %.2f." % (
            s["clean_ratio_loligo_over_ceph"], s["reads_during_ratio_loligo_over_ceph"])]
    lines += ["", "Reproduce: `bash experiments/pg_split/run.sh` (`--quick`: 4,000 objects)."]
    open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        names = [n for n in ("loligo", "ceph") if n in s]
        fig, ax = plt.subplots(1, 2, figsize=(8, 3))
        ax[0].bar(names, [s[n]["clean_s"] for n in names])
        ax[0].set_ylabel("seconds to clean")
        x = range(len(names))
        ax[1].bar([i - 0.2 for i in x], [s[n]["reads_ops_s_before"] for n in names], 0.4, label="before")
        ax[1].bar([i + 0.2 for i in x], [s[n]["reads_ops_s_during"] for n in names], 0.4, label="during")
        ax[1].set_xticks(list(x))
        ax[1].set_xticklabels(names)
        ax[1].set_ylabel("reads/s")
        ax[1].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "pg_split.png"))
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
