#!/usr/bin/env bash
# Loligo's local cluster against a real Ceph 16.2 cluster on the same
# machine, one right after the other: rados-bench-style write / seq / rand
# with 4 KiB and 4 MiB objects, 16 in flight (T), a size-3 replicated pool of
# 64 PGs on 4 OSDs.
#   bash benches/cluster/compare.sh            # both (Ceph if `ceph` is installed: apt-get install -y ceph)
#   SKIP_CEPH=1 bash benches/cluster/compare.sh
#   LOLIGO_FIRST=1 bash benches/cluster/compare.sh   # the other order
# Env: SECS (default 10) per phase; T (default 16) ops in flight on both systems; SETTLE (s, default 30) between systems; READ_SETTLE (s, default 20) between the
# write phase and the reads, so that they measure reads, not write-back; SKIP_RAW=1 skips the raw disk baseline;
# OSD_SIZE (bytes, default 7 GiB) per Loligo OSD. Both wires are
# encrypted by default: Loligo's mutual TLS, and Ceph's msgr2 in secure
# mode (lab.sh SECURE=1); INSECURE=1 runs both in the clear (Loligo
# --insecure, Ceph on msgr v1, which signs but does not encrypt).
# Ceph's phases are run a second time by benches/ceph/latency.py
# (python3-rados; Debian's /usr/bin/python3), which times every op, so
# that p99 can be compared where rados bench prints only a mean and a
# maximum (SKIP_LATENCY=1 skips it). Each phase of both systems also
# records the bytes the disk read and wrote meanwhile
# (benches/disk_bytes.sh), so that reads served by the device can be
# told from reads served from an OSD's memory.
# Writes OUT/summary.json: each workload's Loligo and Ceph figures and
# their ratio, and the raw disk baseline measured in the same run (four
# parallel O_DIRECT streams of 4 MiB blocks, written then read, in the
# folder the clusters use) with the disk-bound targets of issue 18.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SECS="${SECS:-10}"
OUT="${OUT:-$(mktemp -d /tmp/loligo-compare.XXXXXX)}"
mkdir -p "$OUT"
LAB="$ROOT/benches/ceph/lab.sh"
DISK_BYTES="$ROOT/benches/disk_bytes.sh"

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"

run_ceph() {
  if [ -z "${SKIP_CEPH:-}" ] && command -v ceph-osd >/dev/null; then
    echo "== Ceph: 4 OSDs, rep3 pool of 64 PGs, ${SECS}s per phase" >&2
    local secure=1
    [ -n "${INSECURE:-}" ] && secure=""
    SECURE="$secure" bash "$LAB" up 4 >&2
    SECURE="$secure" bash "$LAB" bench "$SECS" "$OUT/ceph" >&2 || true
    bash "$LAB" down >&2
  fi
}

run_loligo() {
  echo "== Loligo: 4 OSDs, pool of 64 PGs, size 3, ${SECS}s per phase" >&2
  DIR="$OUT/loligo-cluster"
  # Block files large enough for 10 s of 4 MiB writes at full speed
  # (rados bench writes new objects, and so does this).
  # INSECURE=1: no TLS (and Ceph on msgr v1).
  "$B" up --detach --osds 4 --pg-num 64 --osd-size "${OSD_SIZE:-$((7 << 30))}" \
    ${INSECURE:+--insecure} --data-dir "$DIR" >&2
  # The cluster's block files are large: remove them, keep the results.
  trap '"$B" down --data-dir "$DIR" >&2 || true; rm -rf "$DIR"' EXIT
  export LOLIGO_CONF="$DIR/loligo.conf"
  {
    echo "| size | mode | ops/s | MB/s | avg ms | p50 ms | p99 ms | max ms |"
    echo "|---|---|---|---|---|---|---|---|"
    for size in 4096 4194304; do
      for mode in write seq rand; do
        extra=""
        [ "$mode" = write ] && extra="-b $size --no-cleanup"
        d0="$(bash "$DISK_BYTES" "$OUT")"
        # shellcheck disable=SC2086
        j="$("$B" bench "$SECS" "$mode" -t "${T:-16}" $extra --json)"
        d1="$(bash "$DISK_BYTES" "$OUT")"
        printf '{"size": %s, "bench": %s, "disk_before": %s, "disk_after": %s}\n' \
            "$size" "$j" "$d0" "$d1" >>"$OUT/loligo.jsonl"
        # Let the stores write back before the reads (as for Ceph).
        [ "$mode" = write ] && sleep "${READ_SETTLE:-20}"
        python3 -c "
import json,sys
d=json.loads(sys.argv[1]); l=d['latency_ms']
print(f\"| {sys.argv[2]} | {d['mode']} | {d['ops_per_s']:.0f} | {d['mb_per_s']:.1f} | {l['avg']:.2f} | {l['p50']:.2f} | {l['p99']:.2f} | {l['max']:.2f} |\")
" "$j" "$size"
      done
    done
  } | tee "$OUT/loligo.md"
  "$B" down --data-dir "$DIR" >&2 || true
  rm -rf "$DIR"
  trap - EXIT
}

# The disk's own speed, now: four parallel O_DIRECT streams of 4 MiB
# blocks (1 GiB each) written, then read back, in the clusters' folder.
raw_disk() {
  [ -n "${SKIP_RAW:-}" ] && return 0
  local d="$OUT/raw" t0 t1 t2
  mkdir -p "$d"
  t0=$(date +%s.%N)
  for i in 1 2 3 4; do
    dd if=/dev/zero of="$d/f$i" bs=4M count=256 oflag=direct conv=fsync status=none &
  done
  wait
  t1=$(date +%s.%N)
  for i in 1 2 3 4; do
    dd if="$d/f$i" of=/dev/null bs=4M iflag=direct status=none &
  done
  wait
  t2=$(date +%s.%N)
  rm -rf "$d"
  python3 -c "
import json,sys
t0,t1,t2=map(float,sys.argv[1:4]); b=4*256*4*2**20
print(json.dumps({'write_mb_s': b/(t1-t0)/1e6, 'read_mb_s': b/(t2-t1)/1e6, 'streams': 4, 'block': 4194304}))
" "$t0" "$t1" "$t2" >"$OUT/raw.json"
  echo "raw disk: $(cat "$OUT/raw.json")" >&2
}

# Between phases: let the previous system's dirty pages reach the disk,
# drop the page cache where allowed (so neither system reads what the
# other left cached), and let the disk recover from the burst before
# measuring (SETTLE seconds, default 30; with 5 s, whichever system ran
# right after the raw-disk phase measured 10-20% lower).
settle() {
  sync
  echo 3 2>/dev/null >/proc/sys/vm/drop_caches || true
  sleep "${SETTLE:-30}"
}
: >"$OUT/loligo.jsonl"
raw_disk; settle
if [ -n "${LOLIGO_FIRST:-}" ]; then
  run_loligo; settle; run_ceph
else
  run_ceph; settle; run_loligo
fi
[ -f "$OUT/ceph/table.md" ] && { echo; cat "$OUT/ceph/table.md"; }
python3 "$HERE/summarize_compare.py" "$OUT"
echo "results in $OUT" >&2
