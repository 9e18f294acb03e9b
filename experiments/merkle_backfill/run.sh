#!/usr/bin/env bash
# Merkle-tree backfill against full-scan backfill, on a local cluster, in
# one sitting ("Merkle-tree backfill" for Ceph reports its backfill 10-400%
# faster; this reproduces its evaluation on Loligo). For each case:
#   1. a fresh 3-OSD cluster, the default size-3 pool (min_size 2) with one
#      PG (so every object is in it), a two-entry PG log (an OSD that was
#      away is always backfilled), --merkle-leaves L (0: no trees, the
#      full-scan baseline)
#   2. N objects of OBJ_SIZE bytes (1 KiB unless set) written (32 in
#      flight): write ops/s
#   3. osd.2 stopped and marked down; P% of the objects overwritten
#   4. osd.2 started: its backfill's time, tree nodes exchanged, objects
#      its scans listed and objects copied, from the primary's log line;
#      seconds from the start command until the PG is clean; the frame
#      bytes the OSDs sent meanwhile (their msgr_send_bytes counters)
#   Steps 3-4 run REPS times on the same cluster (another sample of
#   objects each time, the same in every mode); the full-scan cluster and
#   the Merkle ones are up at once and take turns, so drift falls on all
#   alike; the summary takes each case's median (one backfill varies by
#   20-40% with the disk's sync latency).
# Then Ceph 16.2's own backfill on the same workload (the paper's base),
# when Ceph is installed (apt-get install -y ceph): ceph_side.py on a
# 3-OSD lab cluster (benches/ceph/lab.sh), per N and P, CEPH_REPS times
# (REPS; 1 with --quick): the time its primary's PG spent backfilling.
# Then the write overhead of keeping trees: 4 KiB writes, 32 in flight,
# on two clusters of 32 PGs (trees on, off) loaded at the same time:
# ops/s and the OSDs' CPU time per write, compared within each round.
# Then the paper's Table 1 (table1.sh; it also runs alone).
# Writes out/results.csv, out/writes.csv, out/summary.json, PNGs and
# out/RESULTS.md.
#
#   bash experiments/merkle_backfill/run.sh          # N 5K 10K 20K 50K, P 1 5 10 20, L 1K 4K 16K 64K (hours)
#   bash experiments/merkle_backfill/run.sh --quick  # N 20K, P 1 5 10 20, L 16K (under 10 minutes)
#   OBJ_SIZE=65536 OBJECTS_LIST=20000 PCTS="1 10" LEAVES_LIST=16384 SKIP_CEPH=1 WRITE_ROUNDS=0 \
#     OUT=experiments/merkle_backfill/out-64k bash experiments/merkle_backfill/run.sh   # out-64k/ (2 min)
#   PAIRS="5000:20 10000:10 20000:5 100000:1" LEAVES_LIST="1024 2048 4096 8192 16384" SKIP_CEPH=1 \
#     WRITE_ROUNDS=0 OUT=experiments/merkle_backfill/out-fig17 bash experiments/merkle_backfill/run.sh
#                                      # the paper's Figs. 17, 18 and 28: 1,000 stale objects in PGs of
#                                      # 5K-100K objects, 5 leaf counts (about 30 minutes)
# Environment: OUT (output folder), OBJ_SIZE (bytes per object, 1024), OBJECTS_LIST, PCTS, PAIRS (N:P cases
# instead of every N with every P; the Ceph side still runs OBJECTS_LIST x PCTS), LEAVES_LIST (not with --quick; PCTS with it too), REPS (backfills per case, 3), WRITE_ROUNDS (0: skip the
# write-overhead part and, unless TABLE1_ROUNDS is set, Table 1), TABLE1_ROUNDS (runs per row of
# Table 1, 25; 3 with --quick; 0 skips it; always 1 KiB objects),
# CEPH_REPS (Ceph's backfills per case), SKIP_CEPH (set: no Ceph side),
# CEPH_PY (the Python with Ceph's `rados` binding, /usr/bin/python3).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
OBJECTS_LIST="${OBJECTS_LIST:-5000 10000 20000 50000}"
PCTS="${PCTS:-1 5 10 20}"
LEAVES_LIST="${LEAVES_LIST:-1024 4096 16384 65536}"
WRITE_SECS=8
REPS="${REPS:-3}"
OBJ_SIZE="${OBJ_SIZE:-1024}"
if [ "${1:-}" = "--quick" ]; then
    OBJECTS_LIST=20000
    LEAVES_LIST=16384
    WRITE_ROUNDS="${WRITE_ROUNDS:-8}"
    TABLE1_ROUNDS="${TABLE1_ROUNDS:-3}"
    CEPH_REPS="${CEPH_REPS:-1}"
fi
CEPH_REPS="${CEPH_REPS:-$REPS}"
CEPH_PY="${CEPH_PY:-/usr/bin/python3}"
WRITE_ROUNDS="${WRITE_ROUNDS:-12}"
# The write-cost parts go together: a backfill-only run (WRITE_ROUNDS=0)
# skips Table 1 too unless asked for it.
if [ "$WRITE_ROUNDS" = 0 ]; then
    TABLE1_ROUNDS="${TABLE1_ROUNDS:-0}"
fi
TABLE1_ROUNDS="${TABLE1_ROUNDS:-25}"
VICTIM=2
mkdir -p "$OUT"
# An earlier run's Table 1 must not pass for this run's.
rm -f "$OUT"/table1.csv "$OUT"/table1.json "$OUT"/table1.md "$OUT"/table1.png
CSV="$OUT/results.csv"
WCSV="$OUT/writes.csv"
echo "objects,pct,leaves,rep,load_ops_s,osd_rss_kib,backfill_ms,how,differing_leaves,nodes,listed,copied,chunks,clean_s,obj_size,sent_bytes" >"$CSV"
echo "round,leaves,ops_s,osd_cpu_us_per_op" >"$WCSV"
CCSV="$OUT/ceph.csv"
echo "system,objects,pct,rep,backfill_ms,clean_s" >"$CCSV"

say() { echo "[merkle $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"

# now, since, lol_wait, ALL_CLEAN.
. "$ROOT/experiments/lib.sh"

# The OSD processes' resident memory, summed (KiB).
osd_rss() {
    local dir="$1" total=0 pid
    for f in "$dir"/c/osd.*.pid; do
        pid=$(cat "$f")
        total=$((total + $(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

cluster_up() {
    local dir="$1" leaves="$2" objects="$3" size
    # Every OSD holds every object (size 3 on 3 OSDs): room for them twice.
    size=$((2 * objects * OBJ_SIZE))
    [ "$size" -lt $((1 << 30)) ] && size=$((1 << 30))
    "$B" up --detach --osds 3 --pg-num 1 --osd-size "$size" --pg-log-entries 2 \
        --merkle-leaves "$leaves" --data-dir "$dir/c" >&2
    lol_wait "$dir/c/loligo.conf" 120 "$ALL_CLEAN" >/dev/null
}

# A case's cluster: up, loaded with N objects; its folder on stdout (the
# load's ops/s and the OSDs' memory in files there).
case_up() {
    local objects="$1" leaves="$2" dir conf
    dir=$(mktemp -d /tmp/loligo-merkle.XXXXXX)
    conf="$dir/c/loligo.conf"
    cluster_up "$dir" "$leaves" "$objects"
    "$B" -c "$conf" bench 600 write -b "$OBJ_SIZE" -t 32 --max-objects "$objects" --no-cleanup --json >"$dir/load.json"
    lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
    osd_rss "$dir" >"$dir/rss"
    python3 -c "import json; print(round(json.load(open('$dir/load.json'))['ops_per_s'], 1))" >"$dir/load"
    echo "$dir"
}

# Frame bytes the up OSDs have sent on their data connections (the sum of
# their last reports' counters), once $2 OSDs report, read after one
# more report (every 2 s) so that it counts what they sent until now.
# (Heartbeats go on meanwhile: a few hundred bytes a second.)
msgr_sent() {
    local conf="$1" want="$2" now="" ready=""
    for _ in $(seq 1 60); do
        now=$("$B" -c "$conf" status --json | "$PY" -c "
import json, sys
c = json.load(sys.stdin).get('osd_counters', [])
print('%d %d' % (len(c), sum(x.get('msgr_send_bytes', 0) for x in c)))")
        if [ "${now%% *}" != "$want" ]; then
            ready=""
            sleep 0.5
        elif [ -z "$ready" ]; then
            ready=1
            sleep 2.5
        else
            break
        fi
    done
    if [ "${now%% *}" != "$want" ]; then
        say "msgr_send_bytes: $want OSDs never reported (last: $now)"
        exit 1
    fi
    echo "${now#* }"
}

# One backfill on a case's cluster (rep r): osd.2 away while P% of the
# objects are overwritten (the same sample in every mode), then back.
case_rep() {
    local dir="$1" objects="$2" pct="$3" leaves="$4" r="$5" conf t0 clean line
    conf="$dir/c/loligo.conf"
    "$B" stop "osd.$VICTIM" --data-dir "$dir/c" >&2
    "$B" -c "$conf" osd down "$VICTIM" >&2 || true
    lol_wait "$conf" 60 "o['num_up_osds'] == o['num_osds'] - 1" >/dev/null
    if [ "$pct" != 0 ]; then
        "$B" -c "$conf" bench 600 write -b "$OBJ_SIZE" -t 32 --max-objects "$objects" --sample-pct "$pct" \
            --seed $((7 + r)) --no-cleanup --json >"$dir/overwrite.json"
    fi
    sent0=$(msgr_sent "$conf" 2)
    t0=$(now)
    "$B" start "osd.$VICTIM" --data-dir "$dir/c" >&2
    lol_wait "$conf" 600 "$ALL_CLEAN" >/dev/null
    clean=$(since "$t0")
    # What all three sent from the victim's start (its counter starts
    # there) until clean: the backfill, its peering, a few heartbeats.
    sent=$(( $(msgr_sent "$conf" 3) - sent0 ))
    # The primary's two lines: the backfill's start (the target's log
    # merged) and its end; their timestamps give its time.
    line=$(python3 - "$dir/c" "$VICTIM" <<'PY'
import datetime, glob, re, sys
d, victim = sys.argv[1], sys.argv[2]
def ts(l):
    return datetime.datetime.strptime(l.split()[0].rstrip("Z")[:26], "%Y-%m-%dT%H:%M:%S.%f")
for f in glob.glob(d + "/osd.*.log"):
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in open(f, errors="replace")]
    ends = [i for i, l in enumerate(lines) if "osd.%s backfilled by" % victim in l]
    if not ends:
        continue
    e = ends[-1]
    starts = [i for i in range(e) if "backfilling osd.%s from" % victim in lines[i]]
    if starts:
        ms = (ts(lines[e]) - ts(lines[starts[-1]])).total_seconds() * 1000
        print("%.1f %s" % (ms, lines[e].strip()))
PY
)
    python3 - "$line" "$objects" "$pct" "$leaves" "$r" "$(cat "$dir/load")" "$(cat "$dir/rss")" "$clean" "$OBJ_SIZE" "$sent" >>"$CSV" <<'PY'
import re, sys
line, objects, pct, leaves, r, load, rss, clean, obj_size, sent = sys.argv[1:]
m = re.search(r"^([0-9.]+) .*backfilled by (?:(\d+) differing Merkle leaves|a full scan): "
              r"(\d+) tree nodes exchanged, (\d+) of its objects listed, (\d+) copied or removed in (\d+) chunks", line)
if not m:
    sys.exit("no backfill line for osd.2: %r" % line)
ms, diff, nodes, listed, copied, chunks = m.groups()
how = "merkle" if diff is not None else "full"
print(",".join([objects, pct, leaves, r, load, rss, ms, how, diff or "", nodes, listed, copied, chunks, clean, obj_size,
                sent]))
PY
    say "N=$objects P=$pct% L=$leaves rep $r: $(tail -1 "$CSV")"
}

# Each (N, P): the full-scan cluster and one per leaf count up at once,
# their backfills taking turns (rep r starts with another mode each time),
# so the disk's drift between minutes falls on every mode alike (one mode
# after the other, whole sittings of copies differed by 2x in speed).
# The (N, P) cases: every N with every P, or the pairs PAIRS names.
if [ -n "${PAIRS:-}" ]; then
    CASES="$PAIRS"
else
    CASES=$(for o in $OBJECTS_LIST; do for p in $PCTS; do printf '%s:%s ' "$o" "$p"; done; done)
fi
for case in $CASES; do
    objects=${case%%:*}
    pct=${case#*:}
    if ! [[ "$case" =~ ^[0-9]+:[0-9.]+$ ]]; then
        say "PAIRS: '$case' is not OBJECTS:PCT"
        exit 2
    fi
    {
        modes=(0 $LEAVES_LIST)
        declare -A CDIR
        for leaves in "${modes[@]}"; do
            CDIR[$leaves]=$(case_up "$objects" "$leaves")
        done
        n=${#modes[@]}
        for r in $(seq 1 "$REPS"); do
            for k in $(seq 0 $((n - 1))); do
                leaves=${modes[$(( (k + r - 1) % n ))]}
                case_rep "${CDIR[$leaves]}" "$objects" "$pct" "$leaves" "$r"
            done
        done
        for leaves in "${modes[@]}"; do
            "$B" down --data-dir "${CDIR[$leaves]}/c" >&2 || true
            rm -rf "${CDIR[$leaves]}"
        done
        unset CDIR
    }
done

if [ -z "${SKIP_CEPH:-}" ] && command -v ceph-osd >/dev/null && "$CEPH_PY" -c "import rados" 2>/dev/null; then
    lab="$ROOT/benches/ceph/lab.sh"
    say "Ceph: 3 OSDs"
    bash "$lab" up 3 >&2
    for objects in $OBJECTS_LIST; do
        "$CEPH_PY" "$HERE/ceph_side.py" --objects "$objects" --pcts "$PCTS" --reps "$CEPH_REPS" \
            --lab "$lab" >>"$CCSV"
    done
    bash "$lab" down >&2
else
    say "Ceph not run (SKIP_CEPH set, or ceph / python3-rados not installed)"
fi

# The OSD processes' CPU time, summed (clock ticks).
osd_ticks() {
    local dir="$1" total=0 pid
    for f in "$dir"/c/osd.*.pid; do
        pid=$(cat "$f")
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

# Write overhead: two clusters of 32 PGs up at once, trees on (16,384
# leaves) and off, running the same write load at the same time, so both
# see the same drift of the disk and of other load (taking turns left
# 5-15% between rounds; side by side they agree within 2-3%); the ratio
# is taken within each round. Two clusters with no trees at all ran this
# way favour the one made (and loaded) first by up to 4-8% in ops/s, so
# the rounds come in two halves, each on a new pair made in the other
# order, each round loading them in its own order.
half=$(( (WRITE_ROUNDS + 1) / 2 ))
round=0
pairs=("16384 0" "0 16384")
[ "$WRITE_ROUNDS" = 0 ] && pairs=()
for pair in "${pairs[@]}"; do
    declare -A WDIR
    for leaves in $pair; do
        WDIR[$leaves]=$(mktemp -d /tmp/loligo-merkle.XXXXXX)
        "$B" up --detach --osds 3 --pg-num 32 --osd-size $((1 << 30)) \
            --merkle-leaves "$leaves" --data-dir "${WDIR[$leaves]}/c" >&2
        lol_wait "${WDIR[$leaves]}/c/loligo.conf" 120 "$ALL_CLEAN" >/dev/null
    done
    for _ in $(seq 1 "$half"); do
        round=$((round + 1))
        order="$pair"
        [ $((round % 2)) = 0 ] && order=$(echo "$pair" | awk '{print $2, $1}')
        declare -A T0
        for leaves in $order; do
            T0[$leaves]=$(osd_ticks "${WDIR[$leaves]}")
        done
        for leaves in $order; do
            dir=${WDIR[$leaves]}
            "$B" -c "$dir/c/loligo.conf" bench "$WRITE_SECS" write -b 4096 -t 32 --no-cleanup --json >"$dir/w.json" &
        done
        wait
        for leaves in $order; do
            dir=${WDIR[$leaves]}
            t1=$(osd_ticks "$dir")
            line=$(python3 -c "
import json, os
w = json.load(open('$dir/w.json'))
hz = os.sysconf('SC_CLK_TCK')
ops = w['ops']
print('%.1f,%.1f' % (w['ops_per_s'], ($t1 - ${T0[$leaves]}) / hz * 1e6 / max(ops, 1)))")
            echo "$round,$leaves,$line" >>"$WCSV"
            say "4 KiB writes, leaves $leaves, round $round: ops/s, OSD CPU us per op: $line"
        done
    done
    for leaves in $pair; do
        "$B" down --data-dir "${WDIR[$leaves]}/c" >&2 || true
        rm -rf "${WDIR[$leaves]}"
    done
    unset WDIR
done

# The tree code's share of the OSDs' CPU under the same writes, by a
# profile (needs perf): the CPU measure of the write overhead.
rm -f "$OUT/tree_share.json"
if [ "$WRITE_ROUNDS" != 0 ] && command -v perf >/dev/null; then
    OUT="$OUT" LEAVES=16384 bash "$HERE/tree_share.sh" >&2 || say "tree_share.sh failed: the CPU overhead is judged by the totals"
fi

# The paper's Table 1 (table1.sh): the time to write 1,000 new 1 KiB
# objects with no trees and with the paper's seven leaf counts.
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
if [ "$TABLE1_ROUNDS" != 0 ]; then
    ROUNDS="$TABLE1_ROUNDS" OUT="$OUT" OBJ_SIZE=1024 bash "$HERE/table1.sh"
fi
python3 "$HERE/summarize.py" "$OUT"
