#!/usr/bin/env bash
# PG split under client load, Loligo against Ceph 16.2 on this machine,
# one right after the other:
#   1. a fresh 4-OSD cluster, a size-3 pool (min_size 2) of 32 PGs
#   2. N objects of 4 KiB written (64 in flight)
#   3. random 4 KiB reads (16 in flight) for a baseline window
#   4. pg_num set to 128 (pgp_num follows: Loligo's monitors and Ceph's
#      manager raise it in steps under 5% misplaced), random reads going
#      on: seconds until pg_num = pgp_num = 128 and every PG active+clean,
#      and the reads' ops/s over that time
#   5. pg_num set back to 32 (PGs merge: pgp_num steps down first, then
#      pg_num follows, as in Ceph), measured the same way
# Writes out/results.csv (one row per system and change), out/summary.json
# (seconds to clean, ops/s before and during, the ratios), out/pg_split.png and out/RESULTS.md.
#
#   bash experiments/pg_split/run.sh            # 20,000 objects
#   bash experiments/pg_split/run.sh --quick    # 4,000 objects (a few minutes)
#   SKIP_CEPH=1 bash experiments/pg_split/run.sh --quick
# Ceph runs when `ceph-osd` is installed (apt-get install -y ceph).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
OBJECTS=20000
[ "${1:-}" = "--quick" ] && OBJECTS=4000
FROM=32
TO=128
BASE_S=10
CEPH_PY="${CEPH_PY:-/usr/bin/python3}"
mkdir -p "$OUT"
CSV="$OUT/results.csv"
echo "system,objects,from,to,clean_s,base_ops_s,during_ops_s" >"$CSV"

say() { echo "[pg_split $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"

# now, since, lol_wait, ALL_CLEAN.
. "$ROOT/experiments/lib.sh"

# Reads in 5-second runs until $1 (a file) exists; prints total ops and
# seconds read.
read_until() {
    local conf="$1" stop="$2" ops=0 secs=0 j
    while [ ! -e "$stop" ]; do
        j=$("$B" -c "$conf" bench 5 rand -b 4096 -t 16 --json 2>/dev/null) || continue
        ops=$("$PY" -c "import json,sys; print($ops + json.loads(sys.argv[1])['ops'])" "$j")
        secs=$("$PY" -c "import json,sys; print($secs + json.loads(sys.argv[1])['seconds'])" "$j")
    done
    echo "$ops $secs"
}

# Sets pg_num of the cluster of config $1 from $3 to $4 with reads going
# on (a baseline of reads/s measured first); appends the CSV row once
# pg_num = pgp_num = $5 and every PG is active+clean.
change() {
    local conf="$1" dir="$2" from="$3" to="$4" base t0 clean during reader
    base=$("$B" -c "$conf" bench "$BASE_S" rand -b 4096 -t 16 --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)['ops_per_s'])")
    rm -f "$dir/stop"
    read_until "$conf" "$dir/stop" >"$dir/during" &
    reader=$!
    t0=$(now)
    "$B" -c "$conf" pool set default pg_num "$to" >&2
    until "$B" -c "$conf" pool get default | "$PY" -c "import json,sys; p=json.load(sys.stdin); sys.exit(0 if p['pg_num'] == $to and p['pgp_num'] == $to else 1)"; do
        sleep 0.2
    done
    lol_wait "$conf" 900 "$ALL_CLEAN and pgs['total'] == $to" >/dev/null
    clean=$(since "$t0")
    touch "$dir/stop"
    wait "$reader"
    during=$("$PY" -c "import sys; o, s = map(float, open(sys.argv[1]).read().split()); print(round(o / s, 1) if s else 0)" "$dir/during")
    say "Loligo: $from -> $to PGs with $OBJECTS objects: clean ${clean}s; reads ${base} ops/s before, ${during} during"
    echo "loligo,$OBJECTS,$from,$to,$clean,$base,$during" >>"$CSV"
}

run_loligo() {
    local dir conf
    dir=$(mktemp -d /tmp/loligo-pgsplit.XXXXXX)
    conf="$dir/c/loligo.conf"
    "$B" up --detach --osds 4 --pg-num "$FROM" --osd-size $((2 << 30)) --data-dir "$dir/c" >&2
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    "$B" -c "$conf" bench 600 write -b 4096 -t 64 --max-objects "$OBJECTS" --no-cleanup --json >"$dir/load.json"
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    change "$conf" "$dir" "$FROM" "$TO"
    change "$conf" "$dir" "$TO" "$FROM"
    "$B" down --data-dir "$dir/c" >&2 || true
    rm -rf "$dir"
}

run_loligo
if [ -z "${SKIP_CEPH:-}" ] && command -v ceph-osd >/dev/null && "$CEPH_PY" -c "import rados" 2>/dev/null; then
    lab="$ROOT/benches/ceph/lab.sh"
    say "Ceph: 4 OSDs"
    bash "$lab" up 4 >&2
    "$CEPH_PY" "$HERE/ceph_side.py" --objects "$OBJECTS" --from "$FROM" --to "$TO" --base "$BASE_S" >>"$CSV"
    bash "$lab" down >&2
else
    say "Ceph not run (SKIP_CEPH set, or ceph / python3-rados not installed)"
fi
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
python3 "$HERE/summarize.py" "$OUT"
