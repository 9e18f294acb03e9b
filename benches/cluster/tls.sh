#!/usr/bin/env bash
# The cost of mutual TLS: two local clusters up at once, one made by
# `loligo up` (keys, TLS on every connection) and one by `loligo up
# --insecure` (plain), each 4 OSDs with a size-3 pool of 64 PGs; the same
# rados-bench-style phases (4 KiB write and random read, 4 MiB write and
# sequential and random read, 16 in flight) on each in turn, the order
# swapped every round, so the disk's drift falls on both alike. Writes
# overwrite a fixed set of objects (--max-objects: 400 of 4 MiB, about 3 s
# of writing), so rounds do not fill the devices. The page cache is
# dropped before each 4 MiB read phase (when this runs as root), so those
# reads come from the devices as a cold object's would.
#   bash benches/cluster/tls.sh                 # SECS=10 per phase (at most), ROUNDS=3
#   LOLIGO_BIN=path/to/loligo bash benches/cluster/tls.sh   # that build instead
# Writes OUT/results.csv, OUT/summary.json (per phase: median ops/s with
# and without TLS and the median of the rounds' ratios) and OUT/table.md.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SECS="${SECS:-10}"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-$(mktemp -d /tmp/loligo-tls.XXXXXX)}"
mkdir -p "$OUT"

B="${LOLIGO_BIN:-$ROOT/target/release/loligo}"
[ -n "${LOLIGO_BIN:-}" ] || cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
say() { echo "[tls $(date +%H:%M:%S)] $*" >&2; }

declare -A DIR
DIR[tls]=$(mktemp -d /tmp/loligo-tls-on.XXXXXX)
DIR[plain]=$(mktemp -d /tmp/loligo-tls-off.XXXXXX)
cleanup() {
    for m in tls plain; do
        "$B" down --data-dir "${DIR[$m]}/c" >&2 || true
        rm -rf "${DIR[$m]}"
    done
}
trap cleanup EXIT
"$B" up --detach --osds 4 --pg-num 64 --osd-size $((4 << 30)) --data-dir "${DIR[tls]}/c" >&2
"$B" up --detach --osds 4 --pg-num 64 --osd-size $((4 << 30)) --insecure --data-dir "${DIR[plain]}/c" >&2

echo "round,mode,size,phase,ops_s,mb_s,p99_ms" >"$OUT/results.csv"
phases=("4096 write 15000" "4096 rand 0" "4194304 write 400" "4194304 seq 0" "4194304 rand 0")
for r in $(seq 1 "$ROUNDS"); do
    order="tls plain"
    [ $((r % 2)) = 0 ] && order="plain tls"
    for p in "${phases[@]}"; do
        read -r size phase max <<<"$p"
        for m in $order; do
            extra=()
            [ "$phase" = write ] && extra=(-b "$size" --no-cleanup --max-objects "$max")
            if [ "$phase" != write ] && [ "$size" -gt 65536 ] && [ -w /proc/sys/vm/drop_caches ]; then
                sleep 5 # the writes' background work
                sync
                echo 3 >/proc/sys/vm/drop_caches
            fi
            j=$("$B" -c "${DIR[$m]}/c/loligo.conf" bench "$SECS" "$phase" -t 16 "${extra[@]}" --json)
            line=$(python3 -c "
import json, sys
d = json.loads(sys.argv[1])
print('%.1f,%.2f,%.2f' % (d['ops_per_s'], d['mb_per_s'], d['latency_ms']['p99']))" "$j")
            echo "$r,$m,$size,$phase,$line" >>"$OUT/results.csv"
            say "round $r, $m, $size $phase: ops/s, MB/s, p99 ms = $line"
        done
    done
done

python3 - "$OUT" <<'PY'
import csv, json, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/results.csv")))
phases = []
for r in rows:
    k = (r["size"], r["phase"])
    if k not in phases:
        phases.append(k)
summary = {}
lines = ["| size | phase | TLS ops/s | plain ops/s | TLS / plain (median of rounds) | TLS p99 ms | plain p99 ms |",
         "|---|---|---|---|---|---|---|"]
for size, phase in phases:
    get = lambda m, f: {r["round"]: float(r[f]) for r in rows
                        if r["mode"] == m and r["size"] == size and r["phase"] == phase}
    on, off = get("tls", "ops_s"), get("plain", "ops_s")
    ratio = statistics.median(on[k] / off[k] for k in on if k in off and off[k] > 0)
    p99on, p99off = get("tls", "p99_ms"), get("plain", "p99_ms")
    key = "%s %s" % (size, phase)
    summary[key] = {"tls_ops_s": statistics.median(on.values()),
                    "plain_ops_s": statistics.median(off.values()),
                    "ratio": round(ratio, 3), "target": 0.9, "meets_target": ratio >= 0.9,
                    "tls_p99_ms": statistics.median(p99on.values()),
                    "plain_p99_ms": statistics.median(p99off.values())}
    s = summary[key]
    lines.append("| %s | %s | %.0f | %.0f | %.3f | %.2f | %.2f |" % (
        size, phase, s["tls_ops_s"], s["plain_ops_s"], ratio, s["tls_p99_ms"], s["plain_p99_ms"]))
json.dump(summary, open(out + "/summary.json", "w"), indent=2)
open(out + "/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print("(results in %s)" % out)
PY
