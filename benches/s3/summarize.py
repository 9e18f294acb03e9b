#!/usr/bin/env python3
"""Summarize benches/s3/compare.sh: OUT/results.jsonl (one driver result
per system and phase) into OUT/results.csv, OUT/summary.json (each row's
figures and the Loligo/RGW ratio against the goal of 1.5), OUT/s3.png and
OUT/RESULTS.md.

    python3 benches/s3/summarize.py OUT SECS
"""
import csv
import json
import os
import sys

GOAL = 1.5
SIZES = {4096: "4 KiB", 1048576: "1 MiB", 67108864: "64 MiB"}


def main():
    out, secs = sys.argv[1], sys.argv[2]
    runs = {}
    for line in open(os.path.join(out, "results.jsonl")):
        line = line.strip()
        if line:
            d = json.loads(line)
            r = d["result"]
            key = ("list", 0) if r["op"] == "list" else (r["op"], r["size"])
            runs.setdefault(key, {})[d["system"]] = r
    rows = []
    order = [(op, s) for s in SIZES for op in ("put", "get")] + [("list", 0)]
    for key in order:
        if key not in runs:
            continue
        op, size = key
        lo, rgw = runs[key].get("loligo"), runs[key].get("rgw")
        if op == "list":
            name = "list 10,000 keys"
            # Listings per second: the reciprocal of a full listing's time.
            fig = lambda r: 1000.0 / r["p50_ms"] if r and r["p50_ms"] else None
            unit = "listings/s"
        else:
            name = "%s %s" % (op.upper(), SIZES[size])
            fig = (lambda r: r["ops_per_s"] if r else None) if size < (1 << 20) else \
                (lambda r: r["mib_per_s"] if r else None)
            unit = "ops/s" if size < (1 << 20) else "MiB/s"
        a, b = fig(lo), fig(rgw)
        rows.append({
            "row": name, "unit": unit,
            "loligo": round(a, 2) if a is not None else None,
            "rgw": round(b, 2) if b is not None else None,
            "ratio": round(a / b, 2) if a and b else None,
            "loligo_p50_ms": lo and lo["p50_ms"], "loligo_p99_ms": lo and lo["p99_ms"],
            "rgw_p50_ms": rgw and rgw["p50_ms"], "rgw_p99_ms": rgw and rgw["p99_ms"],
            "loligo_errors": lo and lo["errors"], "rgw_errors": rgw and rgw["errors"],
        })
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    summary = {
        "seconds_per_phase": float(secs),
        "clients": 16,
        "goal_ratio": GOAL,
        "rows": rows,
        "all_rows_meet_goal": bool(ratios) and len(ratios) == len(rows) and min(ratios) >= GOAL,
        "min_ratio": min(ratios) if ratios else None,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    lines = [
        "# S3: Loligo's gateway against Ceph 16.2's RGW",
        "",
        "Same machine, one after the other, same driver (benches/s3/driver,",
        "minio-go v7), 16 clients, %s s per phase; 4 OSDs, size-3 data pools" % secs,
        "of 32 PGs, encrypted cluster wires. Goal (issue 72): Loligo >= %.1fx RGW on every row." % GOAL,
        "",
        "| row | unit | Loligo | RGW | Loligo/RGW | Loligo p50/p99 ms | RGW p50/p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        def lat(p50, p99):
            return "%.1f / %.1f" % (p50, p99) if p50 is not None else "-"
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r["row"], r["unit"], r["loligo"], r["rgw"],
            ("%.2fx" % r["ratio"]) if r["ratio"] is not None else "-",
            lat(r["loligo_p50_ms"], r["loligo_p99_ms"]), lat(r["rgw_p50_ms"], r["rgw_p99_ms"])))
    lines += ["", "Reproduce: `bash benches/s3/compare.sh` (`--quick`: 6 s per phase)."]
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        have = [r for r in rows if r["ratio"] is not None]
        if have:
            fig, ax = plt.subplots(figsize=(8, 4))
            ax.bar([r["row"] for r in have], [r["ratio"] for r in have], color="#3b7dd8")
            ax.axhline(GOAL, color="red", linestyle="--", label="goal %.1fx" % GOAL)
            ax.axhline(1.0, color="grey", linewidth=0.8)
            ax.set_ylabel("Loligo / RGW")
            ax.set_title("S3 throughput, Loligo's gateway against RGW (16 clients)")
            ax.legend()
            plt.xticks(rotation=30, ha="right")
            plt.tight_layout()
            plt.savefig(os.path.join(out, "s3.png"), dpi=110)
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
