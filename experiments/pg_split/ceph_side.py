#!/usr/bin/env python3
"""Ceph's side of the PG split experiment, on the cluster benches/ceph/lab.sh
started: a size-3 pool of FROM PGs (autoscaler off), OBJECTS x 4 KiB
written, random reads (16 in flight) for a baseline, then pg_num set to TO
with reads going on until pg_num = pgp_num = TO and every PG is
active+clean; then back to FROM (PGs merge) the same way. Prints one CSV
line per change, `ceph,OBJECTS,FROM,TO,CLEAN_S,BASE,DURING` (progress on
stderr)."""
import argparse
import json
import os
import random
import sys
import threading
import time

import rados


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


def write_all(io, names, payload, in_flight=64):
    slots = threading.Semaphore(in_flight)
    done = []
    for n in names:
        slots.acquire()
        done.append(io.aio_write_full(n, payload, oncomplete=lambda c: slots.release()))
    failed = sum(c.wait_for_complete() or c.get_return_value() < 0 for c in done)
    if failed:
        raise RuntimeError("%d writes failed" % failed)


class Reader:
    """Random 4 KiB reads of `names`, `in_flight` at once, until stopped."""

    def __init__(self, io, names, in_flight=16):
        self.io, self.names, self.ops, self.errors = io, names, 0, 0
        self.slots = threading.Semaphore(in_flight)
        self.stop = threading.Event()
        self.rng = random.Random(11)
        self.thread = threading.Thread(target=self.run)

    def done(self, c, data):
        if c.get_return_value() < 0:
            self.errors += 1
        else:
            self.ops += 1
        self.slots.release()

    def run(self):
        while not self.stop.is_set():
            self.slots.acquire()
            self.io.aio_read(self.rng.choice(self.names), 4096, 0, self.done)

    def measure(self, until):
        t0, ops0 = time.time(), self.ops
        until()
        return (self.ops - ops0) / (time.time() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=20000)
    ap.add_argument("--from", dest="frm", type=int, default=32)
    ap.add_argument("--to", type=int, default=128)
    ap.add_argument("--base", type=float, default=10)
    a = ap.parse_args()
    conf = os.environ.get("CEPH_CONF") or os.path.join(
        os.environ.get("CEPHLAB_DATA", "/tmp/loligo-cephlab"), "ceph.conf")
    r = rados.Rados(conffile=conf)
    r.connect(timeout=30)
    pool = "split"
    try:
        command(r, prefix="osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    except RuntimeError:
        pass
    command(r, prefix="osd pool create", pool=pool, pg_num=a.frm, pgp_num=a.frm,
            pool_type="replicated")
    for var, val in [("size", "3"), ("min_size", "2"), ("pg_autoscale_mode", "off")]:
        command(r, prefix="osd pool set", pool=pool, var=var, val=val)
    command(r, prefix="osd pool application enable", pool=pool, app="rados")
    wait(lambda: all_clean(r), 300, "clean after pool create")
    io = r.open_ioctx(pool)
    names = ["benchmark_data_%d" % i for i in range(a.objects)]
    payload = bytes(random.Random(5).getrandbits(8) for _ in range(4096))
    write_all(io, names, payload)
    wait(lambda: all_clean(r), 300, "clean after the load")
    reader = Reader(io, names)
    reader.thread.start()

    def counts():
        p = command(r, prefix="osd pool get", pool=pool, var="all")
        return p["pg_num"], p["pgp_num"]

    for frm, to in [(a.frm, a.to), (a.to, a.frm)]:
        base = reader.measure(lambda: time.sleep(a.base))
        t0 = time.time()
        command(r, prefix="osd pool set", pool=pool, var="pg_num", val=str(to))
        during = reader.measure(
            lambda: wait(lambda: counts() == (to, to) and all_clean(r), 3600, "%d PGs and clean" % to))
        clean = time.time() - t0
        say("%d -> %d PGs with %d objects: clean %.2fs; reads %.0f ops/s before, %.0f during (%d errors)"
            % (frm, to, a.objects, clean, base, during, reader.errors))
        print("ceph,%d,%d,%d,%.2f,%.1f,%.1f" % (a.objects, frm, to, clean, base, during), flush=True)
    reader.stop.set()
    reader.thread.join()
    # Every read in flight answered before the context goes (a callback
    # after it crashed the binding).
    for _ in range(16):
        reader.slots.acquire()
    io.close()
    command(r, prefix="osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    r.shutdown()


if __name__ == "__main__":
    main()
