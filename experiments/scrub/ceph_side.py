#!/usr/bin/env python3
"""Ceph's side of the scrub experiment, on the 3-OSD cluster
benches/ceph/lab.sh started, in the steps run.sh gives Loligo: N objects of
4 MiB in a size-3 pool of 16 PGs; osd.0's block file read with O_DIRECT;
4 KiB writes (16 in flight, to another pool on the same OSDs) without a
scrub; a deep scrub of every PG
(`osd pool deep-scrub`, then every PG's deep-scrub stamp moved); the same
writes under a second deep scrub. Prints one CSV line as run.sh's (progress
on stderr).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

import rados

POOL = "scrub"


def say(*a):
    print("[ceph %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def command(r, **cmd):
    cmd.setdefault("format", "json")
    ret, out, err = r.mon_command(json.dumps(cmd), b"", timeout=60)
    if ret != 0:
        raise RuntimeError("%s failed (%d): %s" % (cmd["prefix"], ret, err))
    return json.loads(out) if out else None


def all_clean(r):
    s = command(r, prefix="status")
    o, p = s["osdmap"], s["pgmap"]
    clean = sum(x["count"] for x in p.get("pgs_by_state", []) if x["state_name"] == "active+clean")
    return o["num_up_osds"] == o["num_osds"] and clean == p.get("num_pgs", -1)


def wait(cond, limit, what):
    t0 = time.time()
    while time.time() - t0 < limit:
        if cond():
            return time.time() - t0
        time.sleep(0.2)
    raise RuntimeError("%s not reached in %ds" % (what, limit))


def deep_stamps(r):
    out = command(r, prefix="pg ls-by-pool", poolstr=POOL)
    stats = out["pg_stats"] if isinstance(out, dict) else out
    return {p["pgid"]: p["last_deep_scrub_stamp"] for p in stats}


def deep_scrub_all(r):
    """Seconds until every PG of the pool was deep-scrubbed again."""
    before = deep_stamps(r)
    t0 = time.time()
    command(r, prefix="osd pool deep-scrub", who=[POOL])
    wait(lambda: all(deep_stamps(r)[p] != s for p, s in before.items()), 3600, "deep scrubs")
    return time.time() - t0


def writes(conf, secs):
    out = subprocess.run(
        ["rados", "-c", conf, "bench", "-p", "w", str(secs), "write", "-b", "4096", "-t", "16",
         "--no-cleanup", "--run-name", "w%d" % time.time_ns()],
        check=True, capture_output=True, text=True).stdout
    return float(re.search(r"Average IOPS:\s+([0-9.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, required=True)
    ap.add_argument("--write-s", type=int, required=True)
    ap.add_argument("--lab", required=True, help="benches/ceph/lab.sh")
    a = ap.parse_args()
    data = os.environ.get("CEPHLAB_DATA", "/tmp/loligo-cephlab")
    conf = os.environ.get("CEPH_CONF") or os.path.join(data, "ceph.conf")
    r = rados.Rados(conffile=conf)
    r.connect(timeout=30)
    for pool in [POOL, "w"]:
        command(r, prefix="osd pool create", pool=pool, pg_num=16, pgp_num=16,
                pool_type="replicated")
        for var, val in [("size", "3"), ("min_size", "2"), ("pg_autoscale_mode", "off")]:
            command(r, prefix="osd pool set", pool=pool, var=var, val=val)
        command(r, prefix="osd pool application enable", pool=pool, app="rados")
    wait(lambda: all_clean(r), 300, "clean after pool create")
    io = r.open_ioctx(POOL)
    payload = random.Random(5).randbytes(4 << 20)
    slots = threading.Semaphore(16)
    done = []
    for i in range(a.objects):
        slots.acquire()
        done.append(io.aio_write_full("obj_%d" % i, payload, oncomplete=lambda c: slots.release()))
    for c in done:
        c.wait_for_complete()
    wait(lambda: all_clean(r), 600, "clean after the load")
    obj_bytes = a.objects * (4 << 20)
    dd = subprocess.run(
        ["dd", "if=%s/osd.0/block" % data, "of=/dev/null", "bs=4M", "count=%d" % a.objects,
         "iflag=direct"], check=True, capture_output=True, text=True).stderr
    raw = obj_bytes / float(re.search(r"([0-9.]+) s,", dd).group(1)) / 1e6
    say("raw sequential read of osd.0's block file: %.1f MB/s" % raw)
    # (Every OSD reads its copy at once in a deep scrub; on one device
    # they share it.)
    t0 = time.time()
    procs = [subprocess.Popen(
        ["dd", "if=%s/osd.%d/block" % (data, o), "of=/dev/null", "bs=4M",
         "count=%d" % a.objects, "iflag=direct"], stderr=subprocess.DEVNULL) for o in range(3)]
    for p in procs:
        p.wait()
    raw3 = obj_bytes / (time.time() - t0) / 1e6
    say("raw sequential read of the three block files at once: %.1f MB/s each" % raw3)
    alone = [writes(conf, a.write_s)]
    runs = [alone[0]]
    say("4 KiB writes without a scrub: %.1f ops/s" % alone[0])
    scrub_s = deep_scrub_all(r)
    say("deep scrub of every PG: %.2fs" % scrub_s)
    # (Twice: writes under a deep scrub, then alone: the runs under a
    # scrub are compared with the runs alone between them.)
    during, overlap = [], 1.0
    for _ in range(2):
        result = {}
        t = threading.Thread(target=lambda: result.update(s=deep_scrub_all(r)))
        t0 = time.time()
        t.start()
        w = writes(conf, a.write_s)
        t1 = time.time() - t0
        t.join()
        o = min(1.0, result["s"] / t1)
        overlap = min(overlap, o)
        say("4 KiB writes during a deep scrub: %.1f ops/s (the scrub ran %.2f of the time)" % (w, o))
        during.append(w)
        runs.append(w)
        w = writes(conf, a.write_s)
        say("4 KiB writes without a scrub: %.1f ops/s" % w)
        alone.append(w)
        runs.append(w)
    io.close()
    r.shutdown()
    print("ceph,%d,%d,%.1f,%.1f,%.2f,%.1f,%.1f,%.1f,%s,%.2f" % (
        a.objects, obj_bytes, raw, raw3, scrub_s, obj_bytes / scrub_s / 1e6,
        sum(alone) / len(alone), sum(during) / len(during), ";".join("%.1f" % w for w in runs),
        overlap))

if __name__ == "__main__":
    main()
