#!/usr/bin/env bash
# Small reads beside large ones: on a fresh local cluster (`loligo up`: 4
# OSDs, TLS, a size-3 pool of 64 PGs), 4 MiB objects are written for 10 s
# into the default pool and 4 KiB objects for 5 s into a second pool
# (`small`, 32 PGs); then 4 KiB random reads (4 in flight) run 6 s alone,
# and 6 s again while 4 MiB random reads (16 in flight) run beside them.
# Then 4 KiB overwrites (4 in flight) into the 4 MiB objects themselves
# run 6 s alone, and 6 s beside 4 MiB random reads of the same pool.
# What it shows: how much a large read holds up the small ops queued on
# the same OSDs (ops/s and p99 of the small reads, alone and mixed), and
# on the same PGs (the overwrites).
#   bash benches/cluster/mixed.sh [BINARY...]   # default: this tree's release build
# With several binaries (e.g. two builds to compare), ROUNDS rounds (3)
# run each in turn. Prints one line per binary, round and phase; writes
# OUT/results.csv.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-$(mktemp -d /tmp/loligo-mixed.XXXXXX)}"
mkdir -p "$OUT"
if [ "$#" -eq 0 ]; then
    cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
    set -- "$ROOT/target/release/loligo"
fi
echo "binary,round,phase,ops_per_s,mb_per_s,p50_ms,p99_ms,max_ms" > "$OUT/results.csv"

# ops/s, MB/s, p50, p99, max of one `loligo bench --json` line.
fields() {
    python3 -c 'import json,sys
d = json.loads(sys.stdin.read())
l = d["latency_ms"]
print("%.0f,%.0f,%.2f,%.2f,%.2f" % (d["ops_per_s"], d["mb_per_s"], l["p50"], l["p99"], l["max"]))'
}

one() {
    local b="$1" round="$2" d
    d=$(mktemp -d /tmp/loligo-mixed-run.XXXXXX)
    "$b" up --detach --data-dir "$d/c" --pg-num 64 > /dev/null
    sleep 3
    export LOLIGO_CONF="$d/c/loligo.conf"
    "$b" pool create small --pg-num 32 > /dev/null
    sleep 2
    "$b" bench 10 write -b 4194304 --no-cleanup --json > /dev/null
    "$b" bench 5 write -b 4096 -t 8 -p small --no-cleanup --json > /dev/null
    sync
    echo 3 2> /dev/null > /proc/sys/vm/drop_caches || true
    local alone mixed big
    alone=$("$b" bench 6 rand -p small -t 4 --json | tail -1 | fields)
    "$b" bench 10 rand --json | tail -1 | fields > "$d/big" &
    sleep 2
    mixed=$("$b" bench 6 rand -p small -t 4 --json | tail -1 | fields)
    wait
    big=$(cat "$d/big")
    local ow_alone ow_mixed ow_big
    ow_alone=$("$b" bench 6 randwrite -t 4 --json | tail -1 | fields)
    "$b" bench 10 rand --json | tail -1 | fields > "$d/big" &
    sleep 2
    ow_mixed=$("$b" bench 6 randwrite -t 4 --json | tail -1 | fields)
    wait
    ow_big=$(cat "$d/big")
    "$b" down --data-dir "$d/c" > /dev/null 2>&1 || true
    rm -rf "$d"
    for p in "small-alone:$alone" "small-mixed:$mixed" "big-mixed:$big" \
        "overwrite-alone:$ow_alone" "overwrite-mixed:$ow_mixed" "big-beside-overwrites:$ow_big"; do
        echo "$b,$round,${p%%:*},${p#*:}" | tee -a "$OUT/results.csv"
    done
}

for r in $(seq 1 "$ROUNDS"); do
    for b in "$@"; do
        one "$b" "$r"
    done
done
echo "results: $OUT/results.csv" >&2
