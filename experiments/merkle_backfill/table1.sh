#!/usr/bin/env bash
# The paper's Table 1: does keeping a Merkle tree per PG slow writes? The
# time to write 1,000 new 1 KiB objects (rados put, as the paper did, here
# `bench write --max-objects 1000`, 16 in flight) with no trees (the base)
# and with trees of 1,024 to 65,536 leaves per PG, ROUNDS runs each.
#
# One 3-OSD cluster of 32 PGs per leaf count, all up at once and idle but
# for the one being loaded, so drift of the disk and of the machine falls
# on all alike; each round loads every cluster once, in an order shuffled
# round by round (seeded; so no cluster always follows the same one, whose
# objects' removal may still occupy the disk). Clusters
# made earlier run a few percent faster than those made later, so there
# are two bases, made first and last: their difference is the noise the
# trees' rows must be read against. Per run:
# seconds and ops/s of the writes; the bench then removes the objects
# (not timed), so every run writes new objects, as the paper's did.
#
#   bash experiments/merkle_backfill/table1.sh            # 25 rounds (about 5 minutes)
#   ROUNDS=3 bash experiments/merkle_backfill/table1.sh   # (run.sh --quick does this)
#
# Environment: OUT (output folder, default out/), ROUNDS (25), LEAVES
# (a cluster per entry, in the order they are made: leaves per PG, 0 = no
# trees; default the paper's eight rows and a second base),
# OBJECTS (1000), OBJ_SIZE (1024). Writes OUT/table1.csv, then
# table1.py writes OUT/table1.json, OUT/table1.md and OUT/table1.png
# (summarize.py puts them in RESULTS.md and summary.json; run alone, into
# an OUT without run.sh's results, it writes those two itself).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
ROUNDS="${ROUNDS:-25}"
LEAVES="${LEAVES:-0 1024 2048 4096 8192 16384 32768 65536 0}"
OBJECTS="${OBJECTS:-1000}"
OBJ_SIZE="${OBJ_SIZE:-1024}"
mkdir -p "$OUT"
CSV="$OUT/table1.csv"

say() { echo "[merkle-table1 $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
# now, since, lol_wait, ALL_CLEAN, PY.
. "$ROOT/experiments/lib.sh"

# Cluster k (0-based, in the order made) has modes[k] leaves per PG.
read -r -a modes <<<"$LEAVES"
n=${#modes[@]}
DIR=()
cleanup() {
    for d in "${DIR[@]}"; do
        "$B" down --data-dir "$d/c" >/dev/null 2>&1 || true
        rm -rf "$d"
    done
}
trap cleanup EXIT

for k in $(seq 0 $((n - 1))); do
    DIR[k]=$(mktemp -d /tmp/loligo-merkle.XXXXXX)
    "$B" up --detach --osds 3 --pg-num 32 --osd-size $((1 << 30)) --s3 off \
        --merkle-leaves "${modes[k]}" --data-dir "${DIR[k]}/c" >/dev/null
    lol_wait "${DIR[k]}/c/loligo.conf" 120 "$ALL_CLEAN" >/dev/null
    say "cluster $k, ${modes[k]} leaves per PG, up"
done
# Every cluster's first writes warm its caches and connections: one
# unmeasured run each.
for d in "${DIR[@]}"; do
    "$B" -c "$d/c/loligo.conf" bench 60 write -b "$OBJ_SIZE" -t 16 \
        --max-objects "$OBJECTS" --json >/dev/null
done

echo "round,cluster,leaves,objects,obj_size,seconds,ops_s" >"$CSV"
for r in $(seq 1 "$ROUNDS"); do
    for k in $("$PY" -c "import random; o = list(range($n)); random.Random($r).shuffle(o); print(*o)"); do
        l=${modes[k]}
        json=$("$B" -c "${DIR[k]}/c/loligo.conf" bench 60 write -b "$OBJ_SIZE" -t 16 \
            --max-objects "$OBJECTS" --json | tail -1)
        line=$("$PY" -c "
import json, sys
w = json.loads(sys.argv[1])
assert w['ops'] == $OBJECTS, 'the run wrote %d objects of $OBJECTS' % w['ops']
print('%.4f,%.1f' % (w['seconds'], w['ops_per_s']))" "$json")
        echo "$r,$k,$l,$OBJECTS,$OBJ_SIZE,$line" >>"$CSV"
    done
    say "round $r of $ROUNDS done"
done
"$PY" "$HERE/table1.py" "$OUT"
