#!/usr/bin/env bash
# What serving metrics costs client I/O: the cluster bench (4 KiB writes,
# then random 4 KiB reads, 16 in flight) on a 3-OSD cluster, with
# nothing scraping and with a scraper fetching the leader's /metrics
# every second (15 times Prometheus' default interval: an upper bound),
# in both orders (off, on, on, off) each round, after a warm-up run
# that is not counted. The OSDs track every op
# and report their counters either way; what the scrape adds is the
# leader's rendering and its HTTP serving.
# Writes out/results.csv (one row per run), out/summary.json (ops/s per
# mode, the cost in percent, and the run-to-run noise: the spread of the
# same mode within a round), out/metrics_cost.png and out/RESULTS.md.
#
#   bash experiments/metrics_cost/run.sh            # 3 rounds of 20 s runs
#   bash experiments/metrics_cost/run.sh --quick    # 1 round of 10 s runs
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-$HERE/out}"
ROUNDS=3
SECS=20
if [ "${1:-}" = "--quick" ]; then
    ROUNDS=1
    SECS=10
fi
mkdir -p "$OUT"
CSV="$OUT/results.csv"
echo "round,order,mode,workload,ops_s,scrapes" >"$CSV"

say() { echo "[metrics_cost $(date +%H:%M:%S)] $*" >&2; }

cargo build --release -p loligo-cli --manifest-path "$ROOT/Cargo.toml" >&2
B="$ROOT/target/release/loligo"
. "$ROOT/experiments/lib.sh"

dir=$(mktemp -d /tmp/loligo-metricscost.XXXXXX)
conf="$dir/c/loligo.conf"
cleanup() {
    [ -n "${scraper:-}" ] && kill "$scraper" 2>/dev/null || true
    "$B" down --data-dir "$dir/c" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
"$B" up --detach --osds 3 --pg-num 32 --osd-size $((2 << 30)) --data-dir "$dir/c" >&2
lol_wait "$conf" 120 "$ALL_CLEAN" >/dev/null
url=$("$B" -c "$conf" mgr services | "$PY" -c "import json,sys; print(json.load(sys.stdin)['prometheus'])")
say "scraping $url when on"

# Fetch $1 every second until killed; count the scrapes in $2.
SCRAPER='
import sys, time, urllib.request
url, count = sys.argv[1], sys.argv[2]
n = 0
while True:
    t = time.monotonic()
    try:
        urllib.request.urlopen(url, timeout=5).read()
        n += 1
        open(count, "w").write(str(n))
    except OSError:
        pass
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
'

# One run: writes then reads, with the scraper on or off.
run() {
    local round="$1" order="$2" mode="$3" w r n=0
    scraper=""
    rm -f "$dir/scrapes"
    if [ "$mode" = on ]; then
        # (python itself in the background, so that the kill below
        # reaches it)
        "$PY" -c "$SCRAPER" "$url" "$dir/scrapes" &
        scraper=$!
    fi
    w=$("$B" -c "$conf" bench "$SECS" write -b 4096 -t 16 --no-cleanup --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)['ops_per_s'])")
    r=$("$B" -c "$conf" bench "$SECS" rand -b 4096 -t 16 --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)['ops_per_s'])")
    if [ -n "$scraper" ]; then
        kill "$scraper" 2>/dev/null || true
        wait "$scraper" 2>/dev/null || true
        scraper=""
        n=$(cat "$dir/scrapes" 2>/dev/null || echo 0)
    fi
    say "round $round, run $order, metrics $mode: writes $w ops/s, reads $r ops/s, $n scrapes"
    echo "$round,$order,$mode,write,$w,$n" >>"$CSV"
    echo "$round,$order,$mode,read,$r,$n" >>"$CSV"
}

# A warm-up run, not counted: a new store's first writes allocate and
# its first reads fill caches, which made the first counted run of each
# round slower than the rest.
say "warm-up run (not counted)"
"$B" -c "$conf" bench "$SECS" write -b 4096 -t 16 --no-cleanup >/dev/null
"$B" -c "$conf" bench "$SECS" rand -b 4096 -t 16 >/dev/null

for round in $(seq 1 "$ROUNDS"); do
    order=0
    for mode in off on on off; do
        order=$((order + 1))
        run "$round" "$order" "$mode"
    done
done
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >&2 || true
python3 "$HERE/summarize.py" "$OUT"
