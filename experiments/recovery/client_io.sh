#!/usr/bin/env bash
# Client writes while a restarted OSD is recovered, against the same
# writes on a healthy cluster (Loligo): 4 OSDs, a size-3 pool of 32 PGs,
# OBJECTS objects of 64 KiB; 4 KiB writes, 16 in flight, SECS seconds,
# once on the clean cluster and once starting right when osd.1 (stopped
# while STALE% of the objects were overwritten) starts again.
# Writes out/client_io.json and prints a table row for BENCHMARKS.md.
#   bash experiments/recovery/client_io.sh     (env: OBJECTS=10000 STALE=30 SECS=8)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
OBJECTS="${OBJECTS:-10000}"
STALE="${STALE:-30}"
SECS="${SECS:-8}"
mkdir -p "$OUT"
cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
dir=$(mktemp -d /tmp/loligo-clientio.XXXXXX)
trap '"$B" down --data-dir "$dir/c" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
conf="$dir/c/loligo.conf"

clean() {
    for _ in $(seq 600); do
        if "$B" -c "$conf" status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
o = s["osdmap"]
ok = s["pgs"]["by_state"].get("active+clean", 0) == s["pgs"]["total"] and o["num_up_osds"] == o["num_osds"]
sys.exit(0 if ok else 1)'; then return 0; fi
        sleep 0.2
    done
    return 1
}

ops() { python3 -c "import json,sys; print(round(json.load(open('$1'))['ops_per_s']))"; }

"$B" up --detach --osds 4 --pg-num 32 --osd-size $((3 << 30)) --data-dir "$dir/c" >&2
clean
"$B" -c "$conf" bench 600 write -b 65536 -t 32 --max-objects "$OBJECTS" --no-cleanup --json >/dev/null
clean
"$B" -c "$conf" -p default bench "$SECS" write -b 4096 -t 16 --json >"$dir/healthy.json"
clean
"$B" stop osd.1 --data-dir "$dir/c" >&2
"$B" -c "$conf" bench 600 write -b 65536 -t 32 --max-objects "$OBJECTS" --sample-pct "$STALE" \
    --seed 3 --no-cleanup --json >/dev/null
t0=$(date +%s.%N)
"$B" start osd.1 --data-dir "$dir/c" >&2
"$B" -c "$conf" bench "$SECS" write -b 4096 -t 16 --json >"$dir/recovering.json" &
bench=$!
clean
t_clean=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
wait "$bench"
h=$(ops "$dir/healthy.json")
r=$(ops "$dir/recovering.json")
python3 - "$h" "$r" "$t_clean" "$OUT/client_io.json" "$OBJECTS" "$STALE" "$SECS" <<'PY'
import json, sys
h, r, t, out, n, stale, secs = sys.argv[1:]
res = {"healthy_ops_s": int(h), "recovering_ops_s": int(r), "ratio": round(int(r) / max(int(h), 1), 3),
       "recovery_clean_s": float(t), "objects": int(n), "object_size": 65536, "stale_pct": float(stale),
       "bench_secs": float(secs)}
json.dump(res, open(out, "w"), indent=2)
print("| %s x 64 KiB, %s%% stale | %s | %s | %.2fx | %.1f s |" % (n, stale, h, r, res["ratio"], res["recovery_clean_s"]))
PY
