#!/usr/bin/env bash
# Recovery after an OSD restart, Loligo against Ceph 16.2 on this machine,
# one right after the other. For each mode (log: the default PG log, so the
# OSD is recovered from the log; backfill: a two-entry PG log, so it is
# backfilled) and each stale fraction P:
#   1. a fresh 4-OSD cluster, a size-3 pool (min_size 2) of 32 PGs
#   2. N objects of 4 KiB written (64 in flight)
#   3. osd.1 stopped (SIGTERM) and marked down
#   4. P% of the objects overwritten (a seeded sample)
#   5. osd.1 started again: seconds from the start command until it is up,
#      and until every PG is active+clean (boot included)
# Writes out/results.csv, out/summary.json (per case: Loligo's and Ceph's
# seconds to clean and the ratio), out/recovery.png and out/RESULTS.md.
#
#   bash experiments/recovery/run.sh            # 20,000 objects, P = 1 10 20
#   bash experiments/recovery/run.sh --quick    # 4,000 objects, P = 1 10 (a few minutes)
#   SKIP_CEPH=1 bash experiments/recovery/run.sh --quick
# Ceph runs when `ceph-osd` is installed (apt-get install -y ceph).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
OBJECTS=20000
PCTS="1 10 20"
if [ "${1:-}" = "--quick" ]; then
    OBJECTS=4000
    PCTS="1 10"
fi
MODES="${MODES:-log backfill}"
# The Python with Ceph's `rados` binding (Debian's python3-rados).
CEPH_PY="${CEPH_PY:-/usr/bin/python3}"
VICTIM=1
mkdir -p "$OUT"
CSV="$OUT/results.csv"
echo "system,mode,pct,objects,up_s,clean_s" >"$CSV"

say() { echo "[recovery $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"

# now, since, lol_wait, ALL_CLEAN.
. "$ROOT/experiments/lib.sh"

run_loligo() {
    local mode="$1" pct="$2" dir conf extra=() up clean
    dir=$(mktemp -d /tmp/loligo-recovery.XXXXXX)
    conf="$dir/c/loligo.conf"
    [ "$mode" = backfill ] && extra=(--pg-log-entries 2)
    "$B" up --detach --osds 4 --pg-num 32 --osd-size $((2 << 30)) --data-dir "$dir/c" "${extra[@]}" >&2
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    "$B" -c "$conf" bench 600 write -b 4096 -t 64 --max-objects "$OBJECTS" --no-cleanup --json >"$dir/load.json"
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    "$B" stop "osd.$VICTIM" --data-dir "$dir/c" >&2
    "$B" -c "$conf" osd down "$VICTIM" >&2 || true
    lol_wait "$conf" 60 "o['num_up_osds'] == o['num_osds'] - 1" >/dev/null
    "$B" -c "$conf" bench 600 write -b 4096 -t 64 --max-objects "$OBJECTS" --sample-pct "$pct" \
        --seed 7 --no-cleanup --json >"$dir/overwrite.json"
    local t0
    t0=$(now)
    "$B" start "osd.$VICTIM" --data-dir "$dir/c" >&2
    lol_wait "$conf" 120 "o['num_up_osds'] == o['num_osds']" >/dev/null
    up=$(since "$t0")
    lol_wait "$conf" 600 "$ALL_CLEAN" >/dev/null
    clean=$(since "$t0")
    say "Loligo $mode ${pct}%: up ${up}s and clean ${clean}s after the start"
    echo "loligo,$mode,$pct,$OBJECTS,$up,$clean" >>"$CSV"
    "$B" down --data-dir "$dir/c" >&2 || true
    rm -rf "$dir"
}

run_ceph_all() {
    local lab="$ROOT/benches/ceph/lab.sh"
    say "Ceph: 4 OSDs"
    bash "$lab" up 4 >&2
    for mode in $MODES; do
        for pct in $PCTS; do
            "$CEPH_PY" "$HERE/ceph_side.py" --mode "$mode" --pct "$pct" --objects "$OBJECTS" \
                --victim "$VICTIM" --lab "$lab" >>"$CSV"
        done
    done
    bash "$lab" down >&2
}

for mode in $MODES; do
    for pct in $PCTS; do
        say "Loligo: $mode, ${pct}% stale of $OBJECTS"
        run_loligo "$mode" "$pct"
    done
done
if [ -z "${SKIP_CEPH:-}" ] && command -v ceph-osd >/dev/null && "$CEPH_PY" -c "import rados" 2>/dev/null; then
    run_ceph_all
else
    say "Ceph not run (SKIP_CEPH set, or ceph / python3-rados not installed)"
fi
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
python3 "$HERE/summarize.py" "$OUT"
