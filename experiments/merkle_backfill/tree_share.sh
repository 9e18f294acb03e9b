#!/usr/bin/env bash
# What keeping Merkle trees costs the OSDs' CPU, by a profile rather than
# by a difference of two noisy totals: one 3-OSD cluster with trees
# (LEAVES per PG, default 16,384) under 4 KiB writes (32 in flight),
# every OSD sampled with `perf record` (cpu-clock, so it works where the
# machine gives no hardware counters; stacks unwound from DWARF, so code
# inlined into its callers counts too), and the share of samples whose
# stack holds the tree's code: the tree module (`pg::tree`: the write's
# leaf update, its stamp and its pages), the tree itself (`pg::merkle`)
# and the log entry's stamp (`record::stamp_log`), wherever a frame names
# them (generic code instantiated for the tree's types too, so it leans
# high). Not in it: the store's work on what the tree adds to a write's
# transaction (a log entry some 14 bytes longer, now and then a page).
#
#   bash experiments/merkle_backfill/tree_share.sh          # 20 s of writes (about 1 minute)
#
# Environment: OUT (default out/), LEAVES (16384), SECS (20). Writes
# OUT/tree_share.json and prints it. Needs `perf` (Debian: linux-perf).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
LEAVES="${LEAVES:-16384}"
SECS="${SECS:-20}"
[ "$SECS" -ge 10 ] || { echo "SECS must be at least 10" >&2; exit 2; }
mkdir -p "$OUT"
say() { echo "[merkle-share $(date +%H:%M:%S)] $*" >&2; }
command -v perf >/dev/null || { say "perf is not installed (apt-get install -y linux-perf)"; exit 1; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
. "$ROOT/experiments/lib.sh"

DIR=$(mktemp -d /tmp/loligo-merkle-share.XXXXXX)
cleanup() { "$B" down --data-dir "$DIR/c" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$DIR"; }
trap cleanup EXIT
"$B" up --detach --osds 3 --pg-num 32 --osd-size $((1 << 30)) --s3 off \
    --merkle-leaves "$LEAVES" --data-dir "$DIR/c" >&2
lol_wait "$DIR/c/loligo.conf" 120 "$ALL_CLEAN" >/dev/null
pids=$(for f in "$DIR"/c/osd.*.pid; do cat "$f"; echo; done | paste -sd,)
"$B" -c "$DIR/c/loligo.conf" bench "$SECS" write -b 4096 -t 32 --no-cleanup --json >"$DIR/w.json" &
bench=$!
sleep 3
say "profiling OSDs $pids for $((SECS - 6)) s"
if ! perf record -e cpu-clock -F 199 --call-graph dwarf,8192 -p "$pids" -o "$DIR/perf.data" \
    -- sleep $((SECS - 6)) >"$DIR/perf.log" 2>&1; then
    say "perf record failed: $(tail -3 "$DIR/perf.log")"
    exit 1
fi
wait "$bench"
perf script -i "$DIR/perf.data" >"$DIR/perf.txt" 2>"$DIR/perf-script.log"
"$PY" - "$OUT/tree_share.json" "$LEAVES" "$DIR/w.json" "$DIR/perf.txt" <<'PY'
import json, re, sys
out, leaves, w = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
tree = re.compile(r"loligo_pg::pg::(tree|merkle)::|loligo_pg::pg::record::stamp_log")
samples = hit = 0
stack = []
def done():
    global samples, hit
    if stack:
        samples += 1
        hit += any(tree.search(f) for f in stack)
for line in open(sys.argv[4], errors="replace"):
    if not line.strip():
        done()
        stack = []
    elif line.startswith((" ", "\t")):
        stack.append(line)
done()
r = {"leaves": leaves, "samples": samples, "tree_samples": hit,
     "tree_share": round(hit / samples, 4) if samples else None,
     "ops_per_s": round(w["ops_per_s"], 1)}
json.dump(r, open(out, "w"), indent=1)
print(json.dumps(r))
PY
