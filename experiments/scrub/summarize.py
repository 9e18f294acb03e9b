#!/usr/bin/env python3
"""Turn the scrub experiment's results.csv into summary.json, RESULTS.md
and scrub.png: per system, deep scrub MB/s per OSD against the raw
sequential read of the same device (goal >= 0.8x), 4 KiB write ops/s
during a deep scrub against without (goal >= 0.8x), and deep-scrub
seconds per GiB, Loligo beside Ceph 16.2."""
import csv
import json
import os
import sys

GOAL = 0.8


def bitflip_section(rows, summary):
    """bitflip.py's steps as a table, each system's beside the other's."""
    lines = [
        "## One byte changed under valid checksums",
        "",
        "A 1 MiB object in a size-3 pool; one replica's OSD stopped and one",
        "byte of its copy changed with the store tool (`loligo store",
        "set-bytes`; `ceph-objectstore-tool get-bytes`/`set-bytes`), the OSD",
        "started again. Seconds from the command to the PG's deep-scrub stamp",
        "moving; what `list-inconsistent-obj` reports.",
        "",
        "| system | step | seconds | result |",
        "| --- | --- | --- | --- |",
    ]
    summary["bitflip"] = {}
    for r in rows:
        lines.append("| %s | %s | %s | %s |" % (r["system"], r["step"], r["seconds"], r["detail"]))
        summary["bitflip"].setdefault(r["system"], {})[r["step"]] = {
            "seconds": float(r["seconds"]) if r["seconds"] else None, "detail": r["detail"]}
    return lines + [""]


def main(out):
    rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
    systems = {}
    for r in rows:
        f = {k: float(v) for k, v in r.items() if k not in ("system", "write_runs")}
        gib = f["object_bytes"] / (1 << 30)
        systems[r["system"]] = {
            "objects": int(f["objects"]),
            "gib": round(gib, 2),
            "raw_mb_s": f["raw_mb_s"],
            "deep_scrub_s": f["deep_scrub_s"],
            "deep_scrub_s_per_gib": round(f["deep_scrub_s"] / gib, 2),
            "deep_scrub_mb_s_per_osd": f["deep_scrub_mb_s_per_osd"],
            "raw3_mb_s": f["raw3_mb_s"],
            "scrub_vs_raw": round(f["deep_scrub_mb_s_per_osd"] / f["raw_mb_s"], 2),
            "scrub_vs_raw3": round(f["deep_scrub_mb_s_per_osd"] / f["raw3_mb_s"], 2),
            "writes_ops_s": f["writes_ops_s"],
            "writes_during_scrub_ops_s": f["writes_during_scrub_ops_s"],
            # (Alone, under a scrub, alone, under, alone: each a mean.)
            "write_runs": [float(w) for w in r["write_runs"].split(";")],
            "writes_ratio": round(f["writes_during_scrub_ops_s"] / f["writes_ops_s"], 2),
            "scrub_overlap": f["scrub_overlap"],
        }
    summary = {"goal_ratio": GOAL, "systems": systems}
    if "loligo" in systems and "ceph" in systems:
        summary["loligo_vs_ceph_scrub_speed"] = round(
            systems["ceph"]["deep_scrub_s"] / systems["loligo"]["deep_scrub_s"], 2)
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
    lines = [
        "# Deep scrub: speed and cost to clients",
        "",
        "3 OSDs, a size-3 pool of 16 PGs, objects of 4 MiB; defaults (scrub",
        "sleep 0, one scrub slot per OSD). Goals: deep scrub >= %.1fx the raw" % GOAL,
        "read, 4 KiB writes during a deep scrub >= %.1fx without." % GOAL,
        "",
        "| system | data | raw read MB/s: one / three at once, each | deep scrub s (s/GiB) | "
        "MB/s per OSD | vs raw: one / three | "
        "4 KiB writes ops/s | during deep scrub | ratio | runs: alone, scrub, ... | scrub overlap |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in systems.items():
        lines.append("| %s | %.2f GiB | %.0f / %.0f | %.2f (%.2f) | %.0f | %.2fx / %.2fx | %.0f | %.0f | %.2fx | %s | %.2f |" % (
            name, s["gib"], s["raw_mb_s"], s["raw3_mb_s"], s["deep_scrub_s"], s["deep_scrub_s_per_gib"],
            s["deep_scrub_mb_s_per_osd"], s["scrub_vs_raw"], s["scrub_vs_raw3"], s["writes_ops_s"],
            s["writes_during_scrub_ops_s"], s["writes_ratio"],
            ", ".join("%.0f" % w for w in s["write_runs"]), s["scrub_overlap"]))
    if "loligo_vs_ceph_scrub_speed" in summary:
        lines += ["", "Loligo deep-scrubs the same data %.2fx as fast as Ceph 16.2." %
                  summary["loligo_vs_ceph_scrub_speed"]]
    lines += ["", "`three at once`: the three OSDs' block files read with O_DIRECT at",
              "the same time, as a deep scrub reads every copy at once (all three",
              "OSDs share this machine's one disk)."]
    lines += ["", "`ratio`: the mean of the two write runs under a deep scrub against",
              "the mean of the three alone, which come before, between and after",
              "them (each run writes new objects into a fresh pool; the writes slow",
              "as the objects add up and whenever the metadata KV compacts)."]
    lines += ["", "`scrub overlap`: the share of the write run the second deep scrub",
              "lasted (below 1, the rest of the run had no scrub under it).", ""]
    flips = os.path.join(out, "bitflip.csv")
    if os.path.exists(flips):
        lines += bitflip_section(list(csv.DictReader(open(flips))), summary)
        json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
    open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
        names = list(systems)
        ax[0].bar([n + " raw" for n in names], [systems[n]["raw_mb_s"] for n in names])
        ax[0].bar([n + " scrub" for n in names], [systems[n]["deep_scrub_mb_s_per_osd"] for n in names])
        ax[0].set_ylabel("MB/s per OSD")
        ax[1].bar([n + " alone" for n in names], [systems[n]["writes_ops_s"] for n in names])
        ax[1].bar([n + " scrub" for n in names], [systems[n]["writes_during_scrub_ops_s"] for n in names])
        ax[1].set_ylabel("4 KiB write ops/s")
        for a in ax:
            a.tick_params(axis="x", rotation=30)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "scrub.png"), dpi=100)
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out"))
