#!/usr/bin/env bash
# Loligo's local cluster against a real Ceph 16.2 cluster on the same
# machine, one right after the other: rados-bench-style write / seq / rand
# with 4 KiB and 4 MiB objects, 16 in flight, a size-3 replicated pool of
# 64 PGs on 4 OSDs.
#   bash benches/cluster/compare.sh            # both (Ceph if `ceph` is installed: apt-get install -y ceph)
#   SKIP_CEPH=1 bash benches/cluster/compare.sh
#   LOLIGO_FIRST=1 bash benches/cluster/compare.sh   # the other order
# Env: SECS (default 10) per phase.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SECS="${SECS:-10}"
OUT="${OUT:-$(mktemp -d /tmp/loligo-compare.XXXXXX)}"
LAB="$ROOT/benches/ceph/lab.sh"

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"

run_ceph() {
  if [ -z "${SKIP_CEPH:-}" ] && command -v ceph-osd >/dev/null; then
    echo "== Ceph: 4 OSDs, rep3 pool of 64 PGs, ${SECS}s per phase" >&2
    bash "$LAB" up 4 >&2
    bash "$LAB" bench "$SECS" "$OUT/ceph" >&2 || true
    bash "$LAB" down >&2
  fi
}

run_loligo() {
  echo "== Loligo: 4 OSDs, pool of 64 PGs, size 3, ${SECS}s per phase" >&2
  DIR="$OUT/loligo-cluster"
  "$B" up --detach --osds 4 --pg-num 64 --data-dir "$DIR" >&2
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
        # shellcheck disable=SC2086
        j="$("$B" bench "$SECS" "$mode" -t 16 $extra --json)"
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

# Let the previous system's dirty pages reach the disk before measuring.
settle() { sync; sleep 5; }
if [ -n "${LOLIGO_FIRST:-}" ]; then
  run_loligo; settle; run_ceph
else
  run_ceph; settle; run_loligo
fi
[ -f "$OUT/ceph/table.md" ] && { echo; cat "$OUT/ceph/table.md"; }
echo "results in $OUT" >&2
