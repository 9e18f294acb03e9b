#!/usr/bin/env bash
# The BlueStore slides' evaluation on one OSD code: Loligo's block store
# against its FileStore-like store (a journal and a file per object), and
# Ceph 16.2's BlueStore against its FileStore (when Ceph is installed:
# apt-get install -y ceph), each on 3 OSD processes: rados bench by object
# size, 4 KiB random overwrites of 4 MiB objects, the same on a 2+1 EC
# pool, and the device bytes written per user byte. See run.py.
#
#   bash experiments/objectstore/run.sh          # 4 KiB to 4 MiB objects, 15 s each,
#                                                # 3 rounds (about 40 minutes)
#   bash experiments/objectstore/run.sh --quick  # 4 KiB, 64 KiB, 4 MiB; 5 s each;
#                                                # one round (under 10 minutes)
#   bash experiments/objectstore/run.sh --no-ceph --threads 16 --sizes 4096
#
# Writes out/results.csv, out/summary.json, out/objectstore.png and
# out/RESULTS.md.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
# Plots need matplotlib: the binding's virtualenv has it.
bash "$ROOT/tools/python-binding.sh" --release matplotlib >&2
exec "$ROOT/target/pyenv/bin/python" "$HERE/run.py" "$@"
