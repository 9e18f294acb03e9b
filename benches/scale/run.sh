#!/usr/bin/env bash
# How the cluster map's costs grow with the cluster (issue 18's scale
# part): maps of 10, 100, 1,000 and 10,000 OSDs (10 per host, about 100 PG
# copies per OSD in size-3 pools) built in memory by `loligo osdmap
# scale`, and for an incremental that marks one OSD down: the map's size,
# `OsdMap::apply` (what the monitors and every receiver run), a CRUSH
# compile, one pass of CRUSH over every PG (what an OSD and a client each
# did on every epoch before carried mappings), the carried mappings'
# build, their advance (an OSD's work per epoch now), a client's new
# routing table, and the carried mappings' memory. Then, per size, one
# process with a real monitor (`--monitor`): every OSD booted against it
# (boots that wait together share an epoch), the pools created, its commit of `osd down` and of a
# boot timed, and the process's memory growth. Then, per size of
# PEER_SIZES, the PGs' peering after one OSD is marked down
# (`--peering`).
# Writes out/scale.csv, out/monitor.csv, out/peering.csv, out/summary.json, out/scale.png,
# out/RESULTS.md.
#
#   bash benches/scale/run.sh           # 5 repetitions per size (about 7 minutes)
#   bash benches/scale/run.sh --quick   # 1 repetition per size (about 3 minutes)
# Environment: OUT (output folder), SIZES and PEER_SIZES (comma separated), REPS.
# PEER_SIZES=100,1000,3000,10000 draws peering to 10,000 OSDs (that size
# alone: 5 to 8 minutes and 10 GB of memory a repetition, 5 repetitions).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
SIZES="${SIZES:-10,100,1000,10000}"
PEER_SIZES="${PEER_SIZES:-100,300,1000}"
REPS="${REPS:-5}"
if [ "${1:-}" = "--quick" ]; then
  REPS=1
fi
mkdir -p "$OUT"
cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
"$ROOT/target/release/loligo" osdmap scale --osds "$SIZES" --reps "$REPS" --csv "$OUT/scale.csv" \
  2> >(tee "$OUT/parts.txt" >&2)
# The monitor, one size per process (so each memory figure is its own).
first=1
for n in ${SIZES//,/ }; do
  "$ROOT/target/release/loligo" osdmap scale --osds "$n" --reps "$REPS" --monitor --csv "$OUT/monitor.part.csv"
  if [ -n "$first" ]; then cat "$OUT/monitor.part.csv" >"$OUT/monitor.csv"; first=""
  else tail -n +2 "$OUT/monitor.part.csv" >>"$OUT/monitor.csv"; fi
done
rm -f "$OUT/monitor.part.csv"
# Peering after one OSD fails: simulated OSDs (the real PG state
# machines) against a real monitor, in virtual time charged with each
# step's measured cost (one process per size).
first=1
for n in ${PEER_SIZES//,/ }; do
  "$ROOT/target/release/loligo" osdmap scale --osds "$n" --peering --csv "$OUT/peering.part.csv"
  if [ -n "$first" ]; then cat "$OUT/peering.part.csv" >"$OUT/peering.csv"; first=""
  else tail -n +2 "$OUT/peering.part.csv" >>"$OUT/peering.csv"; fi
done
rm -f "$OUT/peering.part.csv"
# The plots want matplotlib: the system's, or a virtualenv of its own.
PY=python3
if ! "$PY" -c "import matplotlib" 2>/dev/null; then
  venv="$ROOT/target/plotenv"
  { [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"; } && "$venv/bin/pip" install -q matplotlib \
    && PY="$venv/bin/python" || echo "no matplotlib: tables only" >&2
fi
"$PY" "$HERE/summarize.py" "$OUT" "$REPS"
echo "results in $OUT" >&2
