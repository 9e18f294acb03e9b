#!/usr/bin/env bash
# The soak: a lab of hosts on this machine (three or five monitors, four
# OSDs, a client host; tools/hosts.sh) under faults one after another (OSD
# kills, partitions between OSDs, one-way ones, and from the monitors, a
# minority of monitors cut off, monitor kills, OSDs booting during a
# monitor partition, a client cut off from an OSD, lossy links, links
# down, blackhole routes) while clients write and read a replicated pool, an erasure-coded
# pool and a key-value store.
# Writes report.json and report.md (ops, faults, time to clean after each,
# histories checked for linearizability, writes lost) to the output folder.
#
#   tools/soak.sh [--minutes N] [--quick] [--seed S] [--mons 3|5] [--out DIR]
#
# --quick runs 5 minutes. Needs root (network namespaces), iproute2 and
# nftables. Every daemon and client also injects message faults
# (LOLIGO_MS_INJECT, docs/tools.md; by default one call in 200 resets its
# connection, one client op in 100 is sent twice, one frame in 100 is
# held back up to 20 ms); set LOLIGO_MS_INJECT= (empty) for none.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=60
seed=0
mons=3
out="target/soak/$(date -u +%Y%m%dT%H%M%SZ)"
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --quick) minutes=5; shift ;;
        --seed) seed="$2"; shift 2 ;;
        --mons) mons="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" != 0 ]; then
    echo "soak.sh: needs root (it makes network namespaces)" >&2
    exit 1
fi
case "$minutes" in
    ''|*[!0-9]*|0) echo "soak.sh: --minutes takes a whole number above 0, not '$minutes'" >&2; exit 2 ;;
esac
case "$mons" in
    3|5) ;;
    *) echo "soak.sh: --mons takes 3 or 5, not '$mons'" >&2; exit 2 ;;
esac
# (Unset: the default faults; set, even empty: as given.)
export LOLIGO_MS_INJECT="${LOLIGO_MS_INJECT-socket_failures=200,dup_probability=0.01,delay_max_ms=20,delay_probability=0.01}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
LOLIGO_SOAK_MINUTES="$minutes" LOLIGO_SOAK_SEED="$seed" LOLIGO_SOAK_OUT="$out" LOLIGO_SOAK_MONS="$mons" \
    cargo test --release -p loligo-cli --test soak -- --ignored --nocapture
echo "soak.sh: the report is in $out/report.md"
