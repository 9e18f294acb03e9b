#!/usr/bin/env bash
# Deep scrub speed and its cost to clients, Loligo against Ceph 16.2 on
# this machine, one right after the other. On a fresh 3-OSD cluster with a
# size-3 pool of 16 PGs:
#   1. N objects of 4 MiB written, every PG clean
#   2. raw: one OSD's block file read sequentially with O_DIRECT (dd), as
#      many bytes as the OSD holds of the objects; and the three OSDs'
#      block files read so at once (a deep scrub reads every copy at once,
#      and here the three share one device): MB/s each
#   3. client 4 KiB writes for W seconds (16 in flight) to another pool on
#      the same OSDs: ops/s without scrub (each write run creates its
#      objects: Loligo's into a pool of its own, Ceph's under a run name
#      of its own)
#   4. a deep scrub of every PG (`pool deep-scrub`, then every PG's deep
#      stamp moved): seconds, and MB/s per OSD (each OSD holds every byte)
#   5. a deep scrub again, with the same 4 KiB writes running under it,
#      and the writes alone again; 5 twice more: the writes slow as the
#      runs add objects and whenever the metadata KV compacts, so the
#      runs under a scrub are compared with the runs alone between them
#      (mean against mean)
# and then, on a fresh cluster of each, one byte of a replica's copy
# changed under valid checksums, found by a deep scrub, mended by a repair
# (bitflip.py; out/bitflip.csv).
# Defaults throughout (scrub sleep 0, one scrub slot per OSD).
# Writes out/results.csv, out/summary.json, out/scrub.png, out/RESULTS.md.
#
#   bash experiments/scrub/run.sh            # 1,024 objects (4 GiB), W = 20
#   bash experiments/scrub/run.sh --quick    # 256 objects (1 GiB), W = 10
#   SKIP_CEPH=1 bash experiments/scrub/run.sh --quick
# Ceph runs when `ceph-osd` and python3-rados are installed
# (apt-get install -y ceph).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
OBJECTS=1024
WRITE_S=20
if [ "${1:-}" = "--quick" ]; then
    OBJECTS=256
    WRITE_S=10
fi
CEPH_PY="${CEPH_PY:-/usr/bin/python3}"
mkdir -p "$OUT"
CSV="$OUT/results.csv"
echo "system,objects,object_bytes,raw_mb_s,raw3_mb_s,deep_scrub_s,deep_scrub_mb_s_per_osd,writes_ops_s,writes_during_scrub_ops_s,write_runs,scrub_overlap" >"$CSV"

say() { echo "[scrub $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"

# now, since, lol_wait, ALL_CLEAN.
. "$ROOT/experiments/lib.sh"

# The default pool's (pool 1's) PGs' last deep-scrub stamps, as
# "pg stamp" lines.
deep_stamps() {
    "$B" -c "$1" pg ls --json | "$PY" -c "
import json, sys
for r in json.load(sys.stdin):
    if r['pg'].startswith('1.'):
        print(r['pg'], r['last_deep_scrub_stamp'])"
}

# Ask a deep scrub of every PG of the default pool and wait until each
# PG's deep stamp moved past what `before` (a deep_stamps file) says;
# print the seconds it took. One python process polls (every 0.25 s): a
# python started per poll took a fifth of this 2-core machine from the
# clients whose writes run under the scrub.
deep_scrub_all() {
    local conf="$1" before="$2" t0
    t0=$(now)
    "$B" -c "$conf" pool deep-scrub default >&2
    "$PY" - "$B" "$conf" "$before" "$t0" <<'PYEOF'
import json, subprocess, sys, time
b, conf, before, t0 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
want = dict(l.split() for l in open(before))
while True:
    out = subprocess.run([b, "-c", conf, "pg", "ls", "--json"], check=True,
                         capture_output=True, text=True).stdout
    stamps = {r["pg"]: r["last_deep_scrub_stamp"] for r in json.loads(out)}
    if all(int(stamps[p]) > int(s) for p, s in want.items()):
        print(round(time.time() - t0, 2))
        break
    time.sleep(0.25)
PYEOF
}

# 4 KiB writes for WRITE_S seconds to pool $2: ops/s. (Each run writes
# to a pool of its own, so both create objects: a second run into the
# same pool would overwrite the first's, another workload.)
writes() {
    "$B" -c "$1" -p "$2" bench "$WRITE_S" write -b 4096 -t 16 --no-cleanup --json | "$PY" -c "
import json, sys
print(round(json.load(sys.stdin)['ops_per_s'], 1))"
}

run_loligo() {
    local dir conf obj_bytes raw raw3 scrub_s w t0 t1 o alone during runs overlap
    dir=$(mktemp -d /tmp/loligo-scrub.XXXXXX)
    conf="$dir/c/loligo.conf"
    "$B" up --detach --insecure --osds 3 --pg-num 16 --osd-size $(((OBJECTS * 4 + 2048) << 20)) \
        --data-dir "$dir/c" >&2
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    for p in w1 w2 w3 w4 w5; do
        "$B" -c "$conf" pool create "$p" --pg-num 16 >&2
    done
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    "$B" -c "$conf" bench 900 write -b 4194304 -t 16 --max-objects "$OBJECTS" --no-cleanup --json \
        >"$dir/load.json"
    lol_wait "$conf" 300 "$ALL_CLEAN" >/dev/null
    obj_bytes=$((OBJECTS * 4194304))
    raw=$(dd if="$dir/c/osd.0/block" of=/dev/null bs=4M count="$OBJECTS" iflag=direct 2>&1 |
        "$PY" -c "
import re, sys
t = sys.stdin.read()
m = re.search(r'([0-9.]+) s,', t)
print(round($obj_bytes / float(m.group(1)) / 1e6, 1))")
    say "Loligo: raw sequential read of osd.0's block file: $raw MB/s"
    # (Every OSD reads its copy at once in a deep scrub; on one device
    # they share it.)
    t0=$(now)
    for o in 0 1 2; do
        dd if="$dir/c/osd.$o/block" of=/dev/null bs=4M count="$OBJECTS" iflag=direct 2>/dev/null &
    done
    wait
    raw3=$("$PY" -c "print(round($obj_bytes / $(since "$t0") / 1e6, 1))")
    say "Loligo: raw sequential read of the three block files at once: $raw3 MB/s each"
    alone=$(writes "$conf" w1)
    runs="$alone"
    say "Loligo: 4 KiB writes without a scrub: $alone ops/s"
    deep_stamps "$conf" >"$dir/before"
    scrub_s=$(deep_scrub_all "$conf" "$dir/before")
    say "Loligo: deep scrub of every PG: ${scrub_s}s"
    during=""
    overlap=1
    for pair in "w2 w3" "w4 w5"; do
        set -- $pair
        deep_stamps "$conf" >"$dir/before"
        t0=$(now)
        deep_scrub_all "$conf" "$dir/before" >"$dir/scrub2" &
        local sp=$!
        w=$(writes "$conf" "$1")
        t1=$(since "$t0")
        wait "$sp"
        o=$("$PY" -c "print(round(min(1.0, $(cat "$dir/scrub2") / $t1), 2))")
        overlap=$("$PY" -c "print(min($overlap, $o))")
        say "Loligo: 4 KiB writes during a deep scrub: $w ops/s (the scrub ran $o of the time)"
        during="$during $w"
        runs="$runs;$w"
        w=$(writes "$conf" "$2")
        say "Loligo: 4 KiB writes without a scrub: $w ops/s"
        alone="$alone $w"
        runs="$runs;$w"
    done
    mean() { "$PY" -c "import sys; v = [float(x) for x in sys.argv[1:]]; print(round(sum(v) / len(v), 1))" $1; }
    echo "loligo,$OBJECTS,$obj_bytes,$raw,$raw3,$scrub_s,$("$PY" -c "print(round($obj_bytes / $scrub_s / 1e6, 1))"),$(mean "$alone"),$(mean "$during"),$runs,$overlap" >>"$CSV"
    "$B" down --data-dir "$dir/c" >&2 || true
    rm -rf "$dir"
}

run_ceph() {
    local lab="$ROOT/benches/ceph/lab.sh"
    say "Ceph: 3 OSDs"
    CEPHLAB_OSD_GB=$(((OBJECTS * 4 + 2048) / 1024 + 1)) bash "$lab" up 3 >&2
    "$CEPH_PY" "$HERE/ceph_side.py" --objects "$OBJECTS" --write-s "$WRITE_S" --lab "$lab" >>"$CSV"
    "$CEPH_PY" "$HERE/bitflip.py" ceph --lab "$lab" --out "$OUT"
    bash "$lab" down >&2
}

say "Loligo: $OBJECTS objects of 4 MiB"
run_loligo
rm -f "$OUT/bitflip.csv"
"$PY" "$HERE/bitflip.py" loligo --bin "$B" --out "$OUT"
if [ -z "${SKIP_CEPH:-}" ] && command -v ceph-osd >/dev/null && "$CEPH_PY" -c "import rados" 2>/dev/null; then
    run_ceph
else
    say "Ceph not run (SKIP_CEPH set, or ceph / python3-rados not installed)"
fi
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
python3 "$HERE/summarize.py" "$OUT"
