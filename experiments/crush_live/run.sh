#!/usr/bin/env bash
# The linear-bucket CRUSH proposal's Table 2 on a running cluster: read and
# write throughput of 128 KiB and 10 MiB objects, straw2 against linear
# buckets with the adaptive balance parameter, each OSD's device reads
# capped alike (one disk per OSD, as in the proposal's cluster), with PGs,
# primaries and disk use per OSD. Writes out/results.csv, out/per_osd.csv,
# out/summary.json, out/crush_live.png and out/RESULTS.md.
#   run.sh          3 rounds per case (about 25 minutes)
#   run.sh --quick  1 round, fewer objects (under 10 minutes)
# Needs root (blkio cgroups, dropping the page cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
cargo build --release -q -p loligo-cli
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib
python3 "$here/run.py" "$@"
python3 "$here/summarize.py" "$here/out"
