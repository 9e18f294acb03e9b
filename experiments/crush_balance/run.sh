#!/usr/bin/env bash
# Reproduce the balanced-placement experiment (the linear-bucket CRUSH proposal + upmap balancer).
# Writes results.csv, per_osd.csv, sample.csv, summary.json, RESULTS.md and
# crush_balance.png into experiments/crush_balance/out (or the directory
# given as $1). The whole run takes about a minute: `--quick` is the same run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" = "--quick" ] && shift
out=${1:-$here/out}
cd "$here/../.."
cargo run --release -q -p loligo-crush --example crush_balance -- "$out"
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib
python3 "$here/plot.py" "$out"
