#!/usr/bin/env python3
"""Turn the PG split experiment's results.csv into summary.json, RESULTS.md
and pg_split.png (in the same folder): one entry per system and change
(`split`: FROM -> TO, `merge`: TO -> FROM)."""
import csv
import json
import os
import sys

SYSTEMS = ("loligo", "ceph")
CHANGES = ("split", "merge")


def main():
    out = sys.argv[1]
    s = {}
    for r in csv.DictReader(open(os.path.join(out, "results.csv"))):
        frm, to = int(r["from"]), int(r["to"])
        change = "split" if to > frm else "merge"
        s.setdefault(change, {})[r["system"]] = {
            "objects": int(r["objects"]),
            "pg_num": [frm, to],
            "clean_s": float(r["clean_s"]),
            "reads_ops_s_before": float(r["base_ops_s"]),
            "reads_ops_s_during": float(r["during_ops_s"]),
        }
    for c in s.values():
        if "loligo" in c and "ceph" in c:
            l, k = c["loligo"], c["ceph"]
            c["clean_ratio_loligo_over_ceph"] = round(l["clean_s"] / k["clean_s"], 3)
            c["reads_during_ratio_loligo_over_ceph"] = round(
                l["reads_ops_s_during"] / max(k["reads_ops_s_during"], 1e-9), 3)
    json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=2)
    lines = ["# PG split and merge under client load: Loligo vs Ceph 16.2", "",
             "A 4-OSD cluster, a size-3 pool of 4 KiB objects; pg_num raised at once "
             "(split), then set back (merge); pgp_num follows in steps under 5% misplaced "
             "(Loligo's monitors, Ceph's manager). Seconds from `pool set pg_num` until "
             "pg_num = pgp_num = the target and every PG is active+clean, and random 4 KiB "
             "reads (16 in flight) in the 10 s before and during.", "",
             "| change | system | objects | PGs | seconds to clean | reads/s before | reads/s during |",
             "|---|---|---|---|---|---|---|"]
    for change in CHANGES:
        for name in SYSTEMS:
            c = s.get(change, {}).get(name)
            if c:
                lines.append("| %s | %s | %d | %d -> %d | %.1f | %.0f | %.0f |" % (
                    change, name, c["objects"], c["pg_num"][0], c["pg_num"][1], c["clean_s"],
                    c["reads_ops_s_before"], c["reads_ops_s_during"]))
    for change in CHANGES:
        c = s.get(change, {})
        if "clean_ratio_loligo_over_ceph" in c:
            lines += ["", "%s, Loligo / Ceph: time to clean %.2f, reads during %.2f." % (
                change.capitalize(), c["clean_ratio_loligo_over_ceph"],
                c["reads_during_ratio_loligo_over_ceph"])]
    lines += ["", "Reproduce: `bash experiments/pg_split/run.sh` (`--quick`: 4,000 objects)."]
    open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(9, 3))
        bars = [(ch, n) for ch in CHANGES for n in SYSTEMS if n in s.get(ch, {})]
        labels = ["%s\n%s" % b for b in bars]
        x = range(len(bars))
        ax[0].bar(labels, [s[ch][n]["clean_s"] for ch, n in bars])
        ax[0].set_ylabel("seconds to clean")
        ax[1].bar([i - 0.2 for i in x], [s[ch][n]["reads_ops_s_before"] for ch, n in bars], 0.4,
                  label="before")
        ax[1].bar([i + 0.2 for i in x], [s[ch][n]["reads_ops_s_during"] for ch, n in bars], 0.4,
                  label="during")
        ax[1].set_xticks(list(x))
        ax[1].set_xticklabels(labels)
        ax[1].set_ylabel("reads/s")
        ax[1].legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "pg_split.png"))
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
