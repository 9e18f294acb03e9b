#!/usr/bin/env python3
"""Turn the metrics-cost experiment's results.csv into summary.json,
RESULTS.md and metrics_cost.png (in the same folder).

Per workload: the mean ops/s with metrics off and on, the cost (how much
slower on is, in percent), and the run-to-run noise: within each round
each mode runs twice (off, on, on, off), so the difference of its two
runs, relative to their mean, is what repeating a run moves it (the
mean over rounds and modes). The verdict: within the 2% target, or
only within the noise (inconclusive at that noise), or above both."""
import csv
import json
import os
import sys

TARGET_PCT = 2.0


def main():
    out = sys.argv[1]
    rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
    s = {}
    for w in ("write", "read"):
        rs = [r for r in rows if r["workload"] == w]
        by = {m: [float(r["ops_s"]) for r in rs if r["mode"] == m] for m in ("off", "on")}
        if not by["off"] or not by["on"]:
            continue
        off = sum(by["off"]) / len(by["off"])
        on = sum(by["on"]) / len(by["on"])
        noise = []
        for rnd in sorted({r["round"] for r in rs}):
            for m in ("off", "on"):
                v = [float(r["ops_s"]) for r in rs if r["round"] == rnd and r["mode"] == m]
                if len(v) == 2 and sum(v) > 0:
                    noise.append(abs(v[0] - v[1]) / (sum(v) / 2) * 100)
        cost = (off - on) / off * 100 if off else 0.0
        n = sum(noise) / len(noise) if noise else 0.0
        s[w] = {
            "ops_s_metrics_off": round(off, 1),
            "ops_s_metrics_on": round(on, 1),
            "cost_pct": round(cost, 2),
            "noise_pct": round(n, 2),
            "runs_per_mode": len(by["off"]),
            "verdict": ("within target" if abs(cost) <= TARGET_PCT
                        else "within noise, inconclusive" if abs(cost) <= n
                        else "above target and noise"),
        }
    s["scrapes_per_run"] = max((int(r["scrapes"]) for r in rows), default=0)
    s["target_pct"] = TARGET_PCT
    json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=2)
    lines = [
        "# What serving metrics costs client I/O", "",
        "A 3-OSD cluster, 4 KiB writes then random 4 KiB reads, 16 in flight; "
        "runs with nothing scraping and with the leader's /metrics fetched every "
        "second (15 times Prometheus' default), in both orders each round "
        "(off, on, on, off). Target from the issue: at most 2% or within the "
        "run-to-run noise.", "",
        "| workload | ops/s, metrics off | ops/s, scraped every second | cost | run-to-run noise | verdict |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for w in ("write", "read"):
        if w in s:
            x = s[w]
            lines.append(
                f"| {w} | {x['ops_s_metrics_off']} | {x['ops_s_metrics_on']} | "
                f"{x['cost_pct']}% | {x['noise_pct']}% | "
                f"{x['verdict']} |")
    lines += ["", "Reproduce: `bash experiments/metrics_cost/run.sh` "
              "(`--quick`: one round of 10 s runs)."]
    open(os.path.join(out, "RESULTS.md"), "w").write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ws = [w for w in ("write", "read") if w in s]
        xs = range(len(ws))
        ax.bar([x - 0.2 for x in xs], [s[w]["ops_s_metrics_off"] for w in ws], 0.4, label="metrics off")
        ax.bar([x + 0.2 for x in xs], [s[w]["ops_s_metrics_on"] for w in ws], 0.4, label="scraped every second")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(ws)
        ax.set_ylabel("ops/s (4 KiB, 16 in flight)")
        ax.set_title("Client I/O with and without metrics scraping")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "metrics_cost.png"), dpi=120)
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
    print(json.dumps(s, indent=2))


if __name__ == "__main__":
    main()
