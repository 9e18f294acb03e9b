#!/usr/bin/env bash
# An OSD's memory per PG it hosts (issue 18's scale part): a local
# cluster of 4 OSDs (plain, as the memory of TLS sessions is not per PG),
# then pools added step by step (size 3); after each step, once every PG
# is active+clean, each OSD's resident memory (VmRSS) beside the mean PG
# copies an OSD holds (3/4 of the PGs). The slope of memory against PG copies is what one PG
# costs an OSD: with Merkle trees (the default, 16,384 leaves) and
# without (--merkle-leaves 0), each an empty PG and one holding objects.
#   bash benches/scale/osd_memory.sh [--quick]
# Writes OUT/osd_memory.csv and OUT/osd_memory.json (OUT default
# benches/scale/out).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
mkdir -p "$OUT"
cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
say() { echo "[osd memory $(date +%H:%M:%S)] $*" >&2; }
# shellcheck source=../../experiments/lib.sh
source "$ROOT/experiments/lib.sh"
STEPS=(64 64 64 64)
OBJECTS=2000
if [ "${1:-}" = "--quick" ]; then
  STEPS=(64 128)
  OBJECTS=500
fi

echo "leaves,step,pgs_total,osd,pg_copies_mean,rss_kib" >"$OUT/osd_memory.csv"
for leaves in 16384 0; do
  D=$(mktemp -d /tmp/loligo-osdmem.XXXXXX)
  trap '"$B" down --data-dir "$D/c" >&2 || true; rm -rf "$D"' EXIT
  "$B" up --detach --insecure --osds 4 --pg-num 8 --osd-size $((2 << 30)) \
    --merkle-leaves "$leaves" --data-dir "$D/c" >&2
  conf="$D/c/loligo.conf"
  lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
  total=8
  step=0
  record() {
    sleep 3
    for o in 0 1 2 3; do
      pid=$(cat "$D/c/osd.$o.pid")
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
      # With 4 OSDs and failure domain osd, each OSD holds 3/4 of the
      # PG copies on average (the mean over the 4 is what is fitted).
      echo "$leaves,$step,$total,$o,$((total * 3 / 4)),$rss" >>"$OUT/osd_memory.csv"
    done
    say "leaves $leaves, step $step: $total PGs"
  }
  record
  for n in "${STEPS[@]}"; do
    step=$((step + 1))
    "$B" -c "$conf" pool create "p$step" --pg-num "$n" --size 3 >&2
    total=$((total + n))
    lol_wait "$conf" 300 "$ALL_CLEAN" >/dev/null
    record
  done
  # Objects in every PG: 4 KiB each, spread over the last pool.
  "$B" -c "$conf" -p "p$step" bench 30 write -b 4096 -t 16 --max-objects "$OBJECTS" --no-cleanup --json >/dev/null
  step=$((step + 1))
  record
  "$B" down --data-dir "$D/c" >&2 || true
  rm -rf "$D"
  trap - EXIT
done
"$PY" - "$OUT" <<'PY'
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/osd_memory.csv")))
res = {}
for leaves in ("16384", "0"):
    r = [x for x in rows if x["leaves"] == leaves]
    last_empty = max(int(x["step"]) for x in r) - 1
    pts = [(int(x["pg_copies_mean"]), int(x["rss_kib"])) for x in r if int(x["step"]) <= last_empty]
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else float("nan")
    full = [int(x["rss_kib"]) for x in r if int(x["step"]) == last_empty + 1]
    empty = [int(x["rss_kib"]) for x in r if int(x["step"]) == last_empty]
    res["leaves_" + leaves] = {
        "kib_per_pg_copy_empty": round(slope, 1),
        "rss_kib_min": min(p[1] for p in pts),
        "rss_kib_max": max(p[1] for p in pts),
        "pg_copies_max": max(p[0] for p in pts),
        "rss_kib_after_objects_mean": sum(full) / len(full),
        "rss_kib_before_objects_mean": sum(empty) / len(empty),
    }
json.dump(res, open(out + "/osd_memory.json", "w"), indent=2)
print(json.dumps(res, indent=2))
PY
