#!/usr/bin/env bash
# The key-value store on object maps under the workload of "A scalable,
# consistent key-value store on RADOS" (4 OSDs, 2 replicas, 5 clients, 25%
# each of reads, inserts, removes and updates), on a local cluster in one
# sitting, with a baseline measured beside it: the same ops on one object
# per key (no tree).
#   1. a fresh 4-OSD cluster and a pool `kv` of 64 PGs, size 2
#   2. the seed's workload at 64 KiB and 1 KiB entries, k = 800: tree,
#      baseline (mode 1) and tree with nodes written by plain ops instead of
#      the kv.write object class method (mode 2: what the method saves),
#      1 op in flight per client (the seed's) and 8 (throughput)
#   3. throughput vs k (1 KiB entries) and vs entry size (k = 800)
#   4. the paper's regime by node count (its best configuration had about
#      900 node objects, its others up to 2,500; its data was 4x the
#      machines' RAM, more than this machine's disk holds), each case
#      REGIME_RUNS times (median and spread), beside the baseline:
#      - 1 KiB entries, 200,000 keys, k = 160 (about 900 nodes), the
#        paper's cache of 1,000 index entries: the paper's mix, a
#        read-heavy one (85% reads) and a write-heavy one (10% reads);
#      - the same with k = 100 (about 1,500 nodes: more than the cache
#        holds), with the paper's cache and with the default;
#      - 64 KiB entries, 32,768 keys (2 GiB), k = 40 (about 600 nodes);
#      - the paper's mix at k = 160 runs PAPER_RUNS times (its spread
#        over runs is the widest);
#      - then on a fresh 6-OSD cluster (the paper's second size): 1 KiB,
#        k = 160, the paper's mix.
# Each case creates its store, writes its prefill keys and runs the timed
# mix (`loligo kv bench`) on a cluster of its own, made fresh.
# Writes out/results.csv, out/summary.json, PNGs and out/RESULTS.md.
#
#   bash experiments/kv/run.sh          # 20 s per case, k 100..1600, entries 1 KiB..256 KiB
#   bash experiments/kv/run.sh --quick  # 5 s per case, fewer points, the regime at
#                                       # k = 50 and 100,000 keys (under 10 minutes)
# ONLY=regime runs step 4 alone.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
SECS=20
KS="100 200 400 800 1600"
SIZES="1024 4096 16384 65536 262144"
# The regime: k for about 900 nodes and for about 1,500 (a node holds
# about 1.34 k entries after random inserts), keys, runs per case.
REGIME_K=160
REGIME_K_MANY=100
REGIME_KEYS=200000
REGIME_RUNS=3
# The paper's own case (4 OSDs, its mix) is the noisiest beside its
# baseline: it runs more often.
PAPER_RUNS=5
BIG_K=40
BIG_KEYS=32768
MIXES="25,25,25,25 85,5,5,5 10,30,30,30"
if [ "${1:-}" = "--quick" ]; then
    SECS=5
    KS="100 400 1600"
    SIZES="1024 16384 262144"
    REGIME_K=80
    REGIME_K_MANY=50
    REGIME_KEYS=100000
    REGIME_RUNS=1
    PAPER_RUNS=1
    BIG_K=20
    BIG_KEYS=8192
    MIXES="25,25,25,25"
fi
mkdir -p "$OUT"
CSV="$OUT/results.csv"
OLD_HEADER="case,mode,clients,in_flight,k,entry_size,prefill,ops_per_s,read_p50,read_p99,insert_p50,insert_p99,remove_p50,remove_p99,update_p50,update_p99,read_mean,insert_mean,remove_mean,update_mean,cache_entries,osds,mix,run,nodes"
HEADER="$OLD_HEADER,trips_per_op,index_trips_per_op,reshapes"
if [ "${ONLY:-}" = regime ] && [ -s "$CSV" ] && [ "$(head -1 "$CSV")" = "$OLD_HEADER" ]; then
    # Rows from before the round-trip columns: kept, those left empty.
    { echo "$HEADER"; tail -n +2 "$CSV" | sed 's/$/,,,/'; } >"$CSV.new"
    mv "$CSV.new" "$CSV"
fi
if [ "${ONLY:-}" = regime ] && [ -s "$CSV" ] && [ "$(head -1 "$CSV")" = "$HEADER" ]; then
    # The other cases' rows stay; the regime's are replaced.
    grep -v '^regime,' "$CSV" >"$CSV.keep" || true
    mv "$CSV.keep" "$CSV"
else
    echo "$HEADER" >"$CSV"
fi

say() { echo "[kv $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
. "$ROOT/experiments/lib.sh"

DIR=$(mktemp -d /tmp/loligo-kv.XXXXXX)
CONF="$DIR/c/loligo.conf"
cleanup() { "$B" down --data-dir "$DIR/c" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
# cluster N: a fresh cluster of N OSDs with the pool `kv`.
OSDS=0
cluster() {
    "$B" down --data-dir "$DIR/c" >/dev/null 2>&1 || true
    rm -rf "$DIR/c"
    OSDS=$1
    "$B" up --detach --osds "$OSDS" --osd-size $((4 << 30)) --data-dir "$DIR/c" >&2
    lol_wait "$CONF" 120 "$ALL_CLEAN" >/dev/null
    "$B" -c "$CONF" pool create kv --pg-num 64 --size 2 >&2
    lol_wait "$CONF" 120 "$ALL_CLEAN" >/dev/null
}
cluster 4

# Keys written before the timed run: 40,000, at most 512 MiB of values
# (a store of a few nodes serializes its writers on them: see RESULTS.md).
prefill() { local p=$(((512 << 20) / $1)); [ "$p" -gt 40000 ] && p=40000; echo "$p"; }

# run CASE MODE IN_FLIGHT K ENTRY_SIZE [PREFILL] [CACHE_ENTRIES] [MIX] [RUN]
run() {
    local case="$1" base="$2" inflight="$3" k="$4" size="$5" p="${6:-}" cache="${7:-65536}"
    local mix="${8:-25,25,25,25}" rep="${9:-1}" extra=()
    [ -n "$p" ] || p=$(prefill "$size")
    [ "$base" = 1 ] && extra=(--baseline)
    [ "$base" = 2 ] && extra=(--plain-writes)
    say "$case: osds=$OSDS baseline=$base in_flight=$inflight k=$k entry=$size prefill=$p cache=$cache mix=$mix run=$rep"
    # The store (or the baseline's objects) stays, and goes with the
    # cluster: removing 200,000 objects one by one took longer than the
    # run, and a removed pool's objects are deleted in the background,
    # which would load the next case.
    "$B" -c "$CONF" -p kv kv bench "kvb" --clients 5 --in-flight "$inflight" --seconds "$SECS" \
        --k "$k" --entry-size "$size" --prefill "$p" --cache-entries "$cache" --mix "$mix" \
        --keep --json "${extra[@]}" >"$DIR/r.json"
    cluster "$OSDS"
    "$PY" - "$DIR/r.json" "$case" "$base" "$inflight" "$k" "$size" "$p" "$cache" "$OSDS" "$mix" "$rep" >>"$CSV" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["report"]
case, mode, inflight, k, size, prefill, cache, osds, mix, rep = sys.argv[2:12]
row = [case, mode, 5, inflight, k, size, prefill, round(r["ops_per_s"], 1)]
for k in r["kinds"]:
    row += [round(k["p50_ms"], 3), round(k["p99_ms"], 3)]
row += [round(k["mean_ms"], 3) for k in r["kinds"]]
nodes = r.get("nodes")
row += [cache, osds, mix.replace(",", "/"), rep, "" if nodes is None else nodes]
t = r.get("trips", {})
row += [round(t.get("per_op", 0), 4), round(t.get("index_per_op", 0), 4), t.get("reshapes", 0)]
print(",".join(str(x) for x in row))
PY
    tail -1 "$CSV" >&2
}

if [ "${ONLY:-}" != regime ]; then
    for size in 65536 1024; do
        for inflight in 1 8; do
            for base in 0 1 2; do
                run seed "$base" "$inflight" 800 "$size"
            done
        done
    done
    for k in $KS; do run k 0 8 "$k" 1024; done
    for size in $SIZES; do run size 0 8 800 "$size"; done
fi
# The paper's regime: many nodes, its cache (1,000 entries), beside the
# baseline; runs interleaved so a slow spell does not fall on one case.
for rep in $(seq 1 $((PAPER_RUNS > REGIME_RUNS ? PAPER_RUNS : REGIME_RUNS))); do
    if [ "$rep" -gt "$REGIME_RUNS" ]; then
        run regime 0 8 "$REGIME_K" 1024 "$REGIME_KEYS" 1000 25,25,25,25 "$rep"
        run regime 1 8 "$REGIME_K" 1024 "$REGIME_KEYS" 1000 25,25,25,25 "$rep"
        continue
    fi
    for mix in $MIXES; do
        run regime 0 8 "$REGIME_K" 1024 "$REGIME_KEYS" 1000 "$mix" "$rep"
        run regime 1 8 "$REGIME_K" 1024 "$REGIME_KEYS" 1000 "$mix" "$rep"
    done
    run regime 0 8 "$REGIME_K_MANY" 1024 "$REGIME_KEYS" 1000 25,25,25,25 "$rep"
    run regime 0 8 "$REGIME_K_MANY" 1024 "$REGIME_KEYS" 65536 25,25,25,25 "$rep"
    run regime 0 8 "$BIG_K" 65536 "$BIG_KEYS" 1000 25,25,25,25 "$rep"
    run regime 1 8 "$BIG_K" 65536 "$BIG_KEYS" 1000 25,25,25,25 "$rep"
done
cluster 6
for rep in $(seq 1 "$REGIME_RUNS"); do
    run regime 0 8 "$REGIME_K" 1024 "$REGIME_KEYS" 1000 25,25,25,25 "$rep"
    run regime 1 8 "$REGIME_K" 1024 "$REGIME_KEYS" 1000 25,25,25,25 "$rep"
done

python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
python3 "$HERE/summarize.py" "$OUT"
say "wrote $OUT/RESULTS.md"
