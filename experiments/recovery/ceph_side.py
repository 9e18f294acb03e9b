#!/usr/bin/env python3
"""Ceph's side of the recovery experiment, on the cluster benches/ceph/lab.sh
started: one case (mode, stale percentage), printed as one CSV line
`ceph,MODE,PCT,OBJECTS,UP_S,CLEAN_S` on stdout (progress on stderr).

Mode `log` keeps Ceph's default PG log lengths (log-based recovery); mode
`backfill` sets them to one or two entries so the restarted OSD backfills.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

import rados

SHORT_LOG = {
    "osd_min_pg_log_entries": "1",
    "osd_max_pg_log_entries": "2",
    "osd_pg_log_trim_min": "1",
    "osd_target_pg_log_entries_per_osd": "2",
}


def say(*a):
    print("[ceph %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def command(r, **cmd):
    cmd.setdefault("format", "json")
    ret, out, err = r.mon_command(json.dumps(cmd), b"", timeout=60)
    if ret != 0:
        raise RuntimeError("%s failed (%d): %s" % (cmd["prefix"], ret, err))
    return json.loads(out) if out else None


def status(r):
    return command(r, prefix="status")


def all_clean(s):
    o, p = s["osdmap"], s["pgmap"]
    clean = sum(x["count"] for x in p.get("pgs_by_state", []) if x["state_name"] == "active+clean")
    return o["num_up_osds"] == o["num_osds"] and clean == p.get("num_pgs", -1)


def wait(r, cond, limit, what):
    t0 = time.time()
    while time.time() - t0 < limit:
        if cond(status(r)):
            return time.time() - t0
        time.sleep(0.2)
    raise RuntimeError("%s not reached in %ds" % (what, limit))


def write_all(io, names, payload, in_flight=64):
    slots = threading.Semaphore(in_flight)
    done = []
    for n in names:
        slots.acquire()
        done.append(io.aio_write_full(n, payload, oncomplete=lambda c: slots.release()))
    failed = 0
    for c in done:
        c.wait_for_complete()
        failed += c.get_return_value() < 0
    if failed:
        raise RuntimeError("%d writes failed" % failed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["log", "backfill"], required=True)
    ap.add_argument("--pct", type=float, required=True)
    ap.add_argument("--objects", type=int, default=20000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--pgs", type=int, default=32)
    ap.add_argument("--victim", type=int, default=1)
    ap.add_argument("--lab", required=True, help="benches/ceph/lab.sh")
    a = ap.parse_args()
    conf = os.environ.get("CEPH_CONF") or os.path.join(
        os.environ.get("CEPHLAB_DATA", "/tmp/loligo-cephlab"), "ceph.conf")
    r = rados.Rados(conffile=conf)
    r.connect(timeout=30)
    for k, v in SHORT_LOG.items():
        if a.mode == "backfill":
            command(r, prefix="config set", who="osd", name=k, value=v)
        else:
            try:
                command(r, prefix="config rm", who="osd", name=k)
            except RuntimeError:
                pass
    pool = "recovery"
    try:
        command(r, prefix="osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    except RuntimeError:
        pass
    command(r, prefix="osd pool create", pool=pool, pg_num=a.pgs, pgp_num=a.pgs,
            pool_type="replicated")
    for var, val in [("size", "3"), ("min_size", "2"), ("pg_autoscale_mode", "off")]:
        command(r, prefix="osd pool set", pool=pool, var=var, val=val)
    command(r, prefix="osd pool application enable", pool=pool, app="rados")
    wait(r, all_clean, 300, "clean after pool create")
    io = r.open_ioctx(pool)
    names = ["benchmark_data_%d" % i for i in range(a.objects)]
    payload = bytes(random.Random(5).getrandbits(8) for _ in range(a.size))
    write_all(io, names, payload)
    wait(r, all_clean, 300, "clean after the load")
    # Stop the victim and keep it in (as Loligo's OSD stays in).
    command(r, prefix="osd set", key="noout")
    subprocess.check_call(["bash", a.lab, "stop-osd", str(a.victim)])
    try:
        command(r, prefix="osd down", ids=[str(a.victim)])
    except RuntimeError:
        pass
    wait(r, lambda s: s["osdmap"]["num_up_osds"] == s["osdmap"]["num_osds"] - 1, 120, "victim down")
    stale = sorted(random.Random(7).sample(range(a.objects), round(a.objects * a.pct / 100)))
    payload2 = bytes(random.Random(6).getrandbits(8) for _ in range(a.size))
    write_all(io, [names[i] for i in stale], payload2)
    t0 = time.time()
    subprocess.check_call(["bash", a.lab, "start-osd", str(a.victim)])
    wait(r, lambda s: s["osdmap"]["num_up_osds"] == s["osdmap"]["num_osds"], 300, "victim up")
    up = time.time() - t0
    wait(r, all_clean, 900, "clean after the restart")
    clean = time.time() - t0
    command(r, prefix="osd unset", key="noout")
    say("%s %s%%: up %.2fs, clean %.2fs after the start" % (a.mode, a.pct, up, clean))
    io.close()
    command(r, prefix="osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    r.shutdown()
    print("ceph,%s,%s,%d,%.2f,%.2f" % (a.mode, a.pct if a.pct % 1 else int(a.pct), a.objects, up, clean))


if __name__ == "__main__":
    main()
