#!/usr/bin/env bash
# Loligo's S3 gateway against Ceph 16.2's RGW on this machine, one right
# after the other, driven by the same program (benches/s3/driver, on
# minio-go v7): PUT then GET throughput of 4 KiB, 1 MiB and 64 MiB
# objects with 16 concurrent clients, and full listings of a 10,000-key
# bucket. Both on 4 OSDs with encrypted cluster wires (Loligo's mutual
# TLS, Ceph's msgr2 secure mode), data in a size-3 pool of 32 PGs; both
# gateways serve plain HTTP on loopback.
#
#   bash benches/s3/compare.sh            # 20 s per phase
#   bash benches/s3/compare.sh --quick    # 6 s per phase (under 10 minutes)
#   SKIP_CEPH=1 bash benches/s3/compare.sh
#   RGW_FIRST=1 bash benches/s3/compare.sh   # the other order
#
# Needs Go (the driver) and, for RGW, Debian's ceph and radosgw packages
# (apt-get install -y ceph radosgw). Env: SECS, SETTLE (s between a PUT
# phase and its GETs, default 10), OUT (default benches/s3/out).
# Writes OUT/results.jsonl, OUT/results.csv, OUT/summary.json (each row's
# figures and the Loligo/RGW ratio), OUT/s3.png and OUT/RESULTS.md.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SECS="${SECS:-20}"
[ "${1:-}" = "--quick" ] && SECS="${SECS_QUICK:-6}"
SETTLE="${SETTLE:-10}"
OUT="${OUT:-$HERE/out}"
LAB="$ROOT/benches/ceph/lab.sh"
ACCESS=BENCHACCESSKEY0001
SECRET=benchsecretkey0000000000000000000000001
mkdir -p "$OUT"
: >"$OUT/results.jsonl"

say() { echo "[s3 bench $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
(cd "$HERE/driver" && go build -o "$ROOT/target/s3bench" .) >&2
D="$ROOT/target/s3bench"

# run SYSTEM ENDPOINT: every phase against one gateway, after a warm-up
# (RGW makes its data pool at the first object written: a stall of
# seconds that is not the steady state measured here).
run() {
    local system="$1" ep="$2" size j
    "$D" -endpoint "$ep" -access "$ACCESS" -secret "$SECRET" -bucket warmup \
        -op put -size 4096 -clients 4 -secs 3 >/dev/null
    sleep "$SETTLE"
    for size in 4096 1048576 67108864; do
        for op in put get; do
            say "$system: $op of $size-byte objects, 16 clients, ${SECS}s"
            j=$("$D" -endpoint "$ep" -access "$ACCESS" -secret "$SECRET" -bucket "b$size" \
                -op "$op" -size "$size" -clients 16 -secs "$SECS")
            echo "{\"system\": \"$system\", \"result\": $j}" >>"$OUT/results.jsonl"
            [ "$op" = put ] && sleep "$SETTLE"
        done
    done
    say "$system: listing 10,000 keys"
    j=$("$D" -endpoint "$ep" -access "$ACCESS" -secret "$SECRET" -bucket list -op list \
        -keys 10000 -clients 16 -rounds 5)
    echo "{\"system\": \"$system\", \"result\": $j}" >>"$OUT/results.jsonl"
}

run_loligo() {
    local dir="$OUT/loligo-cluster" port=40480
    say "Loligo: 4 OSDs, gateway on 127.0.0.1:$port"
    "$B" up --detach --osds 4 --pg-num 32 --osd-size $((10 << 30)) --s3 off --data-dir "$dir" >&2
    trap '"$B" down --data-dir "$dir" >&2 || true; rm -rf "$dir"' EXIT
    local conf="$dir/loligo.conf" gw
    # The gateway's pools as RGW's: 32 PGs, size 3 (the gateway `up`
    # starts makes smaller ones, for a laptop).
    for p in s3.index s3.data; do
        "$B" -c "$conf" pool create "$p" --pg-num 32 --size 3 >/dev/null
    done
    for _ in $(seq 300); do
        "$B" -c "$conf" status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s["pgs"]["by_state"].get("active+clean", 0) == s["pgs"]["total"] else 1)' && break
        sleep 0.5
    done
    "$B" -c "$conf" s3 user create bench --access-key "$ACCESS" --secret-key "$SECRET" >/dev/null
    "$B" -c "$conf" s3 run --listen "127.0.0.1:$port" >"$OUT/loligo-gateway.log" 2>&1 &
    gw=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
    run loligo "http://127.0.0.1:$port"
    "$B" -c "$conf" pool get s3.data >"$OUT/loligo-data-pool.json"
    kill "$gw" 2>/dev/null || true
    wait "$gw" 2>/dev/null || true
    "$B" down --data-dir "$dir" >&2 || true
    rm -rf "$dir"
    trap - EXIT
}

run_rgw() {
    if [ -n "${SKIP_CEPH:-}" ] || ! command -v radosgw >/dev/null; then
        say "no RGW (apt-get install -y ceph radosgw): Loligo only"
        return 0
    fi
    say "Ceph: 4 OSDs (msgr2 secure), RGW on 127.0.0.1:40380"
    SECURE=1 CEPHLAB_OSD_GB=10 bash "$LAB" up 4 >&2
    trap 'bash "$LAB" down >&2 || true' EXIT
    SECURE=1 bash "$LAB" rgw-up "$ACCESS" "$SECRET" >&2
    run rgw "http://127.0.0.1:40380"
    CEPH_CONF="${CEPHLAB_DATA:-/tmp/loligo-cephlab}/ceph.conf" \
        ceph osd pool ls detail >"$OUT/rgw-pools.txt" 2>&1 || true
    bash "$LAB" down >&2
    trap - EXIT
}

if [ -n "${RGW_FIRST:-}" ]; then run_rgw; run_loligo; else run_loligo; run_rgw; fi
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
python3 "$HERE/summarize.py" "$OUT" "$SECS"
