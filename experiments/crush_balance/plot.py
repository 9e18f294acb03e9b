"""Plot the balanced-placement experiment: PGs per OSD on the proposal's
topology for each method, and the rms deviation per method/topology.
Reads per_osd.csv and results.csv from the directory given as argument."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = sys.argv[1]
per = defaultdict(list)
with open(f"{out}/per_osd.csv") as f:
    for row in csv.DictReader(f):
        per[(row["topology"], row["size"], row["method"])].append((int(row["osd"]), int(row["pgs"])))
results = list(csv.DictReader(open(f"{out}/results.csv")))
methods = list(dict.fromkeys(r["method"] for r in results))

fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
for ax, size in zip(axes[:2], ["2", "3"]):
    for m in methods:
        pts = sorted(per[("seed-4x10", size, m)])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=m)
    ax.set_title(f"proposal topology (4 hosts x 10 OSDs), 2048 PGs, size {size}")
    ax.set_xlabel("OSD")
    ax.set_ylabel("PGs")
    ax.legend(fontsize=8)
ax = axes[2]
groups = list(dict.fromkeys((r["topology"], r["size"]) for r in results))
width = 0.8 / len(methods)
for i, m in enumerate(methods):
    vals = [next(float(r["rms_deviation"]) for r in results if (r["topology"], r["size"], r["method"]) == (*g, m)) for g in groups]
    ax.bar([j + i * width for j in range(len(groups))], vals, width, label=m)
ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))])
ax.set_xticklabels([f"{t}\nsize {s}" for t, s in groups], fontsize=8)
ax.set_ylabel("rms deviation from weighted target (PGs)")
ax.set_title("imbalance by method")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(f"{out}/crush_balance.png", dpi=110)
print(f"wrote {out}/crush_balance.png")
