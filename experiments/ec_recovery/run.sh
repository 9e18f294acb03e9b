#!/usr/bin/env bash
# Erasure-coded recovery, Reed-Solomon against Zigzag (basic and optimal
# constructions) and Pyramid LRC, on a local cluster of width + 1 OSD
# processes: one member of an EC pool's PG is killed and marked out, the
# spare is backfilled with each shard rebuilt by the code's plan, and the
# surviving OSD processes' /proc/PID/io counts the bytes that reached the
# device (page cache dropped first). See run.py for the steps.
#
#   bash experiments/ec_recovery/run.sh          # k=6 r=2/3, k=8 r=2/3/4, k=10 r=3/4 (the
#                                                # starred s of the paper's Table 5.1); 4/16/64 MiB
#                                                # objects; 3 runs per case (about 3 hours)
#   bash experiments/ec_recovery/run.sh --quick  # k=8 r=2 s=2, 16 MiB objects, RS and Zigzag,
#                                                # 3 runs per case (about 4 minutes)
#   bash experiments/ec_recovery/run.sh --all    # every row of Table 5.1
#   bash experiments/ec_recovery/run.sh --configs "6,2,1;6,2,3;6,3,1;6,3,3;8,2,1;8,2,3;8,3,2;8,3,4;8,4,2;8,4,4;10,3,2;10,3,3;10,3,5;10,4,3;10,4,5" \
#     --codes rs,zigzag --sizes 64 --lost data --out experiments/ec_recovery/out-table51
#                                                # Table 5.1's other 15 rows: a data shard lost, RS
#                                                # beside, 3 runs each (about 30 minutes)
#   bash experiments/ec_recovery/run.sh --configs "6,2,2;8,2,2" --sizes 64 --codes rs,zigzag
#   bash experiments/ec_recovery/run.sh --configs "8,2,1;8,2,2" --sizes 4 --codes rs,zigzag,zigzag-agg \
#     --total-mib 512 --lost data --data-positions 7,3,6,5,4 --out experiments/ec_recovery/out-coalesce
#                                                # Fig. 5.6 in the cluster: aggressive against conservative
#                                                # coalescing, at data positions where they differ (6 minutes)
#   bash experiments/ec_recovery/run.sh --scale  # a pool of 32 PGs, 2 GiB of 16 MiB objects,
#                                                # k=4 r=2 and k=8 r=2, RS and Zigzag four times each
#                                                # (out/scale.csv; about 15 minutes)
#
# Writes out/results.csv, out/plans.json, out/summary.json, out/*.png and
# out/RESULTS.md.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
# The driver runs on the Python binding (an optimised wheel) in a
# virtualenv with matplotlib for the plots.
bash "$ROOT/tools/python-binding.sh" --release matplotlib
exec "$ROOT/target/pyenv/bin/python" "$HERE/run.py" "$@"
