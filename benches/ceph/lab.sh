#!/usr/bin/env bash
# A small Ceph 16.2 cluster on loopback, to measure Loligo against on the
# same machine (Debian packages: apt-get install -y ceph).
#
#   lab.sh up [N]        one monitor, one manager, N BlueStore OSDs on sparse
#                        files (default 4); waits for every PG to be clean
#   lab.sh down          stops what `up` started and removes the lab folder
#   lab.sh wait-clean    waits for all OSDs up+in and all PGs active+clean
#   lab.sh stop-osd ID   stops one OSD (SIGTERM); start-osd ID starts it again
#   lab.sh rgw-up ACCESS SECRET
#                        starts RGW (radosgw, Debian's radosgw package) on
#                        127.0.0.1:$CEPHLAB_RGW_PORT (default 40380) with a
#                        user `bench` holding that key; `down` stops it
#   lab.sh bench SECS OUT   rados bench write/seq/rand with 4 KiB and 4 MiB
#                        objects, 16 in flight (T=N for another), on a size-3 pool of 64 PGs;
#                        writes OUT/table.md; each phase is then run
#                        again by latency.py (python3-rados), which times
#                        every op, into OUT/SIZE_MODE_latency.json (the
#                        reads right after rados bench's, the write last)
#                        (SKIP_LATENCY=1 skips it)
#
# Env: CEPHLAB_DATA (default /tmp/loligo-cephlab), CEPHLAB_PORT (default
# 40300; the monitor listens there, daemons on the next 300 ports),
# CEPHLAB_OSD_GB (default 8), CEPHLAB_OBJECTSTORE (bluestore, the default,
# or filestore), SECURE=1 (msgr2 only, in its secure mode:
# every connection encrypted with AES-GCM, as Loligo's TLS is; without it
# daemons and clients speak msgr v1, which signs but does not encrypt).
set -euo pipefail
DATA="${CEPHLAB_DATA:-/tmp/loligo-cephlab}"
PORT="${CEPHLAB_PORT:-40300}"
OSD_GB="${CEPHLAB_OSD_GB:-8}"
export CEPH_CONF="$DATA/ceph.conf"
HERE="$(cd "$(dirname "$0")" && pwd)"

say() { echo "[ceph lab] $*" >&2; }
c() { timeout 120 ceph "$@"; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid() { cat "$DATA/run/$1.pid" 2>/dev/null || true; }

# The monitor's address as the monmap and mon_host give it.
mon_addr() {
    if [ -n "${SECURE:-}" ]; then echo "v2:127.0.0.1:$PORT"; else echo "127.0.0.1:$PORT"; fi
}

# msgr2's secure mode on every connection (SECURE=1).
secure_conf() {
    [ -n "${SECURE:-}" ] || return 0
    cat <<CONF
ms_bind_msgr1 = false
ms_bind_msgr2 = true
ms_cluster_mode = secure
ms_service_mode = secure
ms_client_mode = secure
ms_mon_cluster_mode = secure
ms_mon_service_mode = secure
ms_mon_client_mode = secure
CONF
}

conf() {
    cat >"$CEPH_CONF" <<CONF
[global]
fsid = $1
mon_host = $(mon_addr)
$(secure_conf)
public_addr = 127.0.0.1
ms_bind_ipv6 = false
ms_bind_port_min = $((PORT + 10))
ms_bind_port_max = $((PORT + 300))
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = $DATA/run
pid_file = $DATA/run/\$name.pid
admin_socket = $DATA/run/\$name.asok
log_file = $DATA/log/\$name.log
mon_cluster_log_file = $DATA/log/cluster.log
crash_dir = $DATA/crash
osd_pool_default_size = 3
osd_pool_default_min_size = 2
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_delete = true
mon_max_pg_per_osd = 1000
mon_data_avail_warn = 5
mon_data_avail_crit = 2
mgr_stats_period = 1
mon_mgr_digest_period = 1

[client]
keyring = $DATA/keyring
admin_socket =
log_file = $DATA/log/client.log

[mon]
mon_data = $DATA/mon.\$id
keyring = $DATA/mon.\$id/keyring
auth_allow_insecure_global_id_reclaim = false

[mgr]
mgr_data = $DATA/mgr.\$id
keyring = $DATA/mgr.\$id/keyring

[osd]
osd_data = $DATA/osd.\$id
keyring = $DATA/osd.\$id/keyring
osd_objectstore = ${CEPHLAB_OBJECTSTORE:-bluestore}
$(filestore_conf)
bluestore_block_create = true
bluestore_block_size = $((OSD_GB << 30))
bluestore_fsck_on_mkfs = false
bluestore_fsck_on_mount = false
osd_memory_target = 1610612736
# A virtual disk reports itself rotational; do not let Ceph's HDD profile
# throttle recovery on purpose.
osd_recovery_sleep_hdd = 0
osd_recovery_max_active_hdd = 10
osd_mon_report_interval = 1
CONF
}

# FileStore's settings (CEPHLAB_OBJECTSTORE=filestore): a 1 GiB journal
# file in each OSD's folder, objects as files beside it, and object names
# short enough for ext4's xattr values.
filestore_conf() {
    [ "${CEPHLAB_OBJECTSTORE:-bluestore}" = filestore ] || return 0
    cat <<CONF
osd_journal = $DATA/osd.\$id/journal
osd_journal_size = 1024
osd_max_object_name_len = 256
osd_max_object_namespace_len = 64
CONF
}

stop() {
    local p
    p=$(pid "$1")
    if alive "$p"; then
        kill "$p"
        for _ in $(seq 60); do alive "$p" || break; sleep 0.5; done
        alive "$p" && kill -9 "$p"
    fi
    rm -f "$DATA/run/$1.pid"
}

wait_clean() {
    local deadline=$(($(date +%s) + ${1:-600}))
    until c status -f json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
o, p = s["osdmap"], s["pgmap"]
clean = sum(x["count"] for x in p.get("pgs_by_state", []) if x["state_name"] == "active+clean")
ok = o["num_osds"] > 0 and o["num_up_osds"] == o["num_osds"] == o["num_in_osds"] and clean == p.get("num_pgs", 0)
sys.exit(0 if ok else 1)'; do
        [ "$(date +%s)" -lt "$deadline" ] || { say "not clean in time"; return 1; }
        sleep 2
    done
}

up() {
    local n="${1:-4}" fsid
    [ -d "$DATA" ] && down
    mkdir -p "$DATA"/{run,log,crash,mon.a,mgr.x}
    fsid=$(uuidgen)
    conf "$fsid"
    ceph-authtool --create-keyring "$DATA/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$DATA/keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
    ceph-authtool "$DATA/mon.keyring" --import-keyring "$DATA/keyring" >/dev/null
    if [ -n "${SECURE:-}" ]; then
        monmaptool --create --fsid "$fsid" --addv a "[$(mon_addr)]" "$DATA/monmap" >/dev/null
    else
        monmaptool --create --fsid "$fsid" --add a "127.0.0.1:$PORT" "$DATA/monmap" >/dev/null
    fi
    ceph-mon -i a --mkfs --monmap "$DATA/monmap" --keyring "$DATA/mon.keyring"
    ceph-mon -i a
    for _ in $(seq 60); do c mon stat >/dev/null 2>&1 && break; sleep 1; done
    c auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' -o "$DATA/mgr.x/keyring"
    ceph-mgr -i x
    for _ in $(seq "$n"); do
        local uuid id
        uuid=$(uuidgen)
        id=$(c osd new "$uuid")
        mkdir -p "$DATA/osd.$id"
        ceph-osd -i "$id" --mkfs --mkkey --no-mon-config --osd-uuid "$uuid" >"$DATA/log/osd.$id.mkfs.log" 2>&1
        c auth add "osd.$id" osd 'allow *' mon 'allow profile osd' mgr 'allow profile osd' \
            -i "$DATA/osd.$id/keyring" >/dev/null 2>&1
        ceph-osd -i "$id"
    done
    wait_clean 600
    say "up: $n OSDs in $DATA"
}

# rgw-up ACCESS SECRET: RGW with the settings of s3-tests' README (a
# 64-thread beast frontend, garbage collected at once) and one user.
rgw_up() {
    local port="${CEPHLAB_RGW_PORT:-40380}"
    cat >>"$CEPH_CONF" <<CONF

[client.rgw.x]
keyring = $DATA/rgw.x.keyring
rgw_frontends = beast endpoint=127.0.0.1:$port tcp_nodelay=1
rgw_data = $DATA/rgw.x
rgw_thread_pool_size = 64
rgw_gc_obj_min_wait = 0
log_file = $DATA/log/rgw.x.log
CONF
    mkdir -p "$DATA/rgw.x"
    c auth get-or-create client.rgw.x mon 'allow rw' osd 'allow rwx' mgr 'allow rw' \
        -o "$DATA/rgw.x.keyring" >/dev/null
    radosgw -n client.rgw.x
    for _ in $(seq 120); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && break
        sleep 1
    done
    curl -s -o /dev/null "http://127.0.0.1:$port/" || { say "RGW did not answer"; return 1; }
    radosgw-admin user create --uid bench --display-name bench \
        --access-key "$1" --secret "$2" >/dev/null
    wait_clean 300
    say "RGW on 127.0.0.1:$port"
}

down() {
    if [ -d "$DATA/run" ]; then
        stop client.rgw.x
        for f in "$DATA"/run/osd.*.pid; do
            [ -e "$f" ] && stop "$(basename "$f" .pid)"
        done
        stop mgr.x
        stop mon.a
    fi
    # Only ever remove a folder this script made.
    [ -f "$DATA/ceph.conf" ] && rm -rf "$DATA"
    return 0
}

# Whether phases are run again by latency.py: not under SKIP_LATENCY=1,
# nor without python3-rados.
timing() {
    [ -z "${SKIP_LATENCY:-}" ] && /usr/bin/python3 -c 'import rados' 2>/dev/null
}

# disk_json BEFORE FILE: the disk's byte counts before a phase (from
# benches/disk_bytes.sh) and now, into FILE.
disk_json() {
    printf '{"disk_before": %s, "disk_after": %s}\n' "$1" "$(bash "$HERE/../disk_bytes.sh" "$DATA")" >"$2"
}

# bench SECS OUT: the same phases and table columns as Loligo's side of
# benches/cluster/compare.sh.
bench() {
    local secs="$1" out="$2" pool=bench log
    mkdir -p "$out"
    {
        echo "| size | mode | ops/s | MB/s | avg ms |"
        echo "|---|---|---|---|---|"
    } >"$out/table.md"
    for size in 4096 4194304; do
        c osd pool rm "$pool" "$pool" --yes-i-really-really-mean-it >/dev/null 2>&1 || true
        c osd pool create "$pool" 64 64 replicated >/dev/null
        c osd pool set "$pool" size 3 >/dev/null
        c osd pool application enable "$pool" rados >/dev/null 2>&1 || true
        wait_clean 300
        for mode in write seq rand; do
            log="$out/${size}_$mode.log"
            d0="$(bash "$HERE/../disk_bytes.sh" "$DATA")"
            if [ "$mode" = write ]; then
                rados -p "$pool" bench "$secs" write -b "$size" -t "${T:-16}" --no-cleanup --run-name b >"$log" 2>&1
                disk_json "$d0" "$out/${size}_${mode}_disk.json"
                # Let the OSDs write back before the reads.
                sleep "${READ_SETTLE:-20}"
            else
                rados -p "$pool" bench "$secs" "$mode" -t "${T:-16}" --run-name b >"$log" 2>&1
                disk_json "$d0" "$out/${size}_${mode}_disk.json"
                # The same reads again, each op timed (rados bench prints
                # no percentiles); skipped without python3-rados.
                if timing; then
                    /usr/bin/python3 "$HERE/latency.py" --pool "$pool" --size "$size" --mode "$mode" \
                        --secs "$secs" -t "${T:-16}" --out "$out/${size}_${mode}_latency.json" || true
                fi
            fi
            # rados bench's "Bandwidth (MB/sec)" is MiB/s: convert to MB/s.
            awk -F: -v size="$size" -v mode="$mode" '
                /^Average IOPS/ { iops = $2 }
                /^Bandwidth \(MB\/sec\)/ { bw = $2 }
                /^Average Latency\(s\)/ { lat = $2 }
                END { printf "| %s | %s | %.0f | %.1f | %.2f |\n", size, mode, iops, bw * 1.048576, lat * 1000 }' \
                "$log" >>"$out/table.md"
        done
        # The write phase again, each op timed, after the reads (so they
        # read what rados bench wrote, on a store that had only that);
        # its new objects go with the pool.
        if timing; then
            /usr/bin/python3 "$HERE/latency.py" --pool "$pool" --size "$size" --mode write \
                --secs "$secs" -t "${T:-16}" --out "$out/${size}_write_latency.json" || true
        fi
        c osd pool rm "$pool" "$pool" --yes-i-really-really-mean-it >/dev/null
    done
    local wire="msgr v1 (not encrypted)"
    [ -n "${SECURE:-}" ] && wire="msgr2 secure mode (encrypted)"
    echo "($(ceph --version | cut -d' ' -f1-3), ${secs}s per phase, wire: $wire)" >>"$out/table.md"
}

case "${1:-}" in
up) up "${2:-4}" ;;
down) down ;;
wait-clean) wait_clean "${2:-600}" ;;
stop-osd) stop "osd.${2:?osd id}" ;;
start-osd) ceph-osd -i "${2:?osd id}" ;;
bench) bench "${2:?seconds}" "${3:?output folder}" ;;
rgw-up) rgw_up "${2:?access key}" "${3:?secret key}" ;;
*)
    echo "usage: $0 up [N] | down | wait-clean [SECS] | stop-osd ID | start-osd ID | bench SECS OUT | rgw-up ACCESS SECRET" >&2
    exit 2
    ;;
esac
