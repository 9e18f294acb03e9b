#!/usr/bin/env bash
# Hosts on one machine: Linux network namespaces joined by veth pairs to
# one bridge, each a "host" with its own address, and nftables rules that
# cut links between them (partitions, one-way ones included). For
# partition tests and experiments; needs root, iproute2 and nftables.
#
#   tools/hosts.sh up NAME N        make hosts NAME-h0 .. NAME-h(N-1)
#   tools/hosts.sh addr NAME I      print host I's address
#   tools/hosts.sh exec NAME I CMD  run CMD on host I
#   tools/hosts.sh cut NAME I ADDR [in|out|both]
#                                   host I drops what it receives from
#                                   ADDR (in), sends to it (out), or both
#   tools/hosts.sh lose NAME I ADDR PERCENT
#                                   host I drops PERCENT% of what it
#                                   sends to and receives from ADDR, at
#                                   random (loss; TCP turns it into delay)
#   tools/hosts.sh blackhole NAME I ADDR
#                                   host I routes ADDR into a blackhole
#                                   (its packets there are discarded)
#   tools/hosts.sh heal NAME I      remove host I's cuts, losses and
#                                   blackhole routes
#   tools/hosts.sh link NAME I up|down
#                                   bring host I's link up or down
#   tools/hosts.sh down NAME        remove the hosts and the bridge
#
# NAME is at most 8 characters (interface names are at most 15). Hosts
# get 10.77.S.(I+1)/24, where S is a number in 1..250 derived from NAME;
# the bridge, in the machine's own namespace, is 10.77.S.254, so a process
# outside the hosts reaches all of them. Traffic goes only to these
# addresses: nothing is routed off the bridge.
set -euo pipefail

die() { echo "hosts.sh: $*" >&2; exit 1; }

subnet() {
    local sum
    sum=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
    echo $(( sum % 250 + 1 ))
}

check_name() {
    [[ "$1" =~ ^[a-z0-9]{1,8}$ ]] || die "NAME must be 1 to 8 lower-case letters or digits: $1"
}

ns() { echo "$1-h$2"; }

cmd=${1:-}
[ -n "$cmd" ] || die "usage: up|addr|exec|cut|lose|blackhole|heal|link|down NAME ... (see the file's head)"
shift
name=${1:-}
check_name "$name"
shift
s=$(subnet "$name")
br="$name-br"

case "$cmd" in
up)
    n=${1:?N}
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "N must be 1..200"
    command -v ip >/dev/null || die "ip (iproute2) not found"
    command -v nft >/dev/null || die "nft (nftables) not found: apt-get install -y nftables"
    if ip -4 addr show | grep -q "inet 10\.77\.$s\."; then
        die "10.77.$s.0/24 is in use here (hosts of another NAME?): choose another NAME"
    fi
    ip link add "$br" type bridge
    ip addr add "10.77.$s.254/24" dev "$br"
    ip link set "$br" up
    for ((i = 0; i < n; i++)); do
        h=$(ns "$name" "$i")
        ip netns add "$h"
        ip link add "$name-v$i" type veth peer name eth0 netns "$h"
        ip link set "$name-v$i" master "$br" up
        ip -n "$h" addr add "10.77.$s.$((i + 1))/24" dev eth0
        ip -n "$h" link set eth0 up
        ip -n "$h" link set lo up
        ip netns exec "$h" nft add table inet hosts
        ip netns exec "$h" nft add chain inet hosts input '{ type filter hook input priority 0; }'
        ip netns exec "$h" nft add chain inet hosts output '{ type filter hook output priority 0; }'
    done
    ;;
addr)
    i=${1:?I}
    echo "10.77.$s.$((i + 1))"
    ;;
exec)
    i=${1:?I}
    shift
    exec ip netns exec "$(ns "$name" "$i")" "$@"
    ;;
cut)
    i=${1:?I}
    addr=${2:?ADDR}
    way=${3:-both}
    h=$(ns "$name" "$i")
    case "$way" in
    in | both) ip netns exec "$h" nft add rule inet hosts input ip saddr "$addr" drop ;;
    out) ;;
    *) die "cut: in, out or both, not $way" ;;
    esac
    case "$way" in
    out | both) ip netns exec "$h" nft add rule inet hosts output ip daddr "$addr" drop ;;
    esac
    ;;
lose)
    i=${1:?I}
    addr=${2:?ADDR}
    pct=${3:?PERCENT}
    [[ "$pct" =~ ^[0-9]+$ ]] && [ "$pct" -le 100 ] || die "lose: PERCENT is a whole number 0..100, not $pct"
    h=$(ns "$name" "$i")
    ip netns exec "$h" nft add rule inet hosts input ip saddr "$addr" numgen random mod 100 lt "$pct" drop
    ip netns exec "$h" nft add rule inet hosts output ip daddr "$addr" numgen random mod 100 lt "$pct" drop
    ;;
blackhole)
    i=${1:?I}
    addr=${2:?ADDR}
    [[ "$addr" =~ ^10\.77\.$s\.[0-9]+$ ]] || die "blackhole: ADDR must be a host of $name (10.77.$s.N), not $addr"
    ip -n "$(ns "$name" "$i")" route replace blackhole "$addr/32"
    ;;
heal)
    i=${1:?I}
    h=$(ns "$name" "$i")
    ip netns exec "$h" nft flush chain inet hosts input
    ip netns exec "$h" nft flush chain inet hosts output
    ip -n "$h" route flush type blackhole 2>/dev/null || true
    ;;
link)
    i=${1:?I}
    state=${2:?up|down}
    [[ "$state" == up || "$state" == down ]] || die "link: up or down, not $state"
    ip link set "$name-v$i" "$state"
    ;;
down)
    for h in $(ip netns list | awk '{print $1}' | grep -E "^$name-h[0-9]+$" || true); do
        ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$h"
    done
    ip link del "$br" 2>/dev/null || true
    ;;
*)
    die "unknown command $cmd"
    ;;
esac
