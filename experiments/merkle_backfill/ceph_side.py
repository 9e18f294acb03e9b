#!/usr/bin/env python3
"""Ceph 16.2's side of the Merkle backfill experiment: the paper's base,
Ceph's own backfill, on the workload of Loligo's side. On the 3-OSD cluster
benches/ceph/lab.sh started: a size-3 pool (min_size 2) of one PG, N
objects of 1 KiB, PG logs of one or two entries (the OSD that was away is
backfilled); then for each stale fraction P and rep r: a replica (never the
PG's primary) stopped and marked down, P% of the objects overwritten (a
seeded sample), the replica started again.

Printed per backfill, as CSV on stdout (progress on stderr):
`ceph,OBJECTS,PCT,REP,BACKFILL_MS,CLEAN_S`. BACKFILL_MS is the time the
primary's PG spent in its Backfilling state, from Ceph's own log line
(`exit Started/Primary/Active/Backfilling SECONDS ...`, written at
debug_osd 5): the scans and the copies, as Loligo's backfill time is.
CLEAN_S is from the start command to the PG clean (boot included).
"""
import argparse
import os
import random
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "recovery"))
import rados  # noqa: E402  (Debian's python3-rados)
from ceph_side import SHORT_LOG, all_clean, command, say, status, wait, write_all  # noqa: E402

EXIT = re.compile(r"exit Started/Primary/Active/Backfilling ([0-9.]+)")


def pg_map(r, pgid):
    acting = command(r, prefix="pg map", pgid=pgid)["acting"]
    return acting[0], acting


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=20000)
    ap.add_argument("--pcts", default="1 5 10 20")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--lab", required=True, help="benches/ceph/lab.sh")
    a = ap.parse_args()
    data = os.environ.get("CEPHLAB_DATA", "/tmp/loligo-cephlab")
    conf = os.environ.get("CEPH_CONF") or os.path.join(data, "ceph.conf")
    r = rados.Rados(conffile=conf)
    r.connect(timeout=30)
    for k, v in SHORT_LOG.items():
        command(r, prefix="config set", who="osd", name=k, value=v)
    # The PG state machine logs each state's time on leaving it at level 5.
    command(r, prefix="config set", who="osd", name="debug_osd", value="5/5")
    pool = "merkle"
    try:
        command(r, prefix="osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    except RuntimeError:
        pass
    command(r, prefix="osd pool create", pool=pool, pg_num=1, pgp_num=1, pool_type="replicated")
    for var, val in [("size", "3"), ("min_size", "2"), ("pg_autoscale_mode", "off")]:
        command(r, prefix="osd pool set", pool=pool, var=var, val=val)
    command(r, prefix="osd pool application enable", pool=pool, app="rados")
    wait(r, all_clean, 300, "clean after pool create")
    # (A pool of this name may have just been removed: the client's map
    # must name the new one before it writes.)
    r.wait_for_latest_osdmap()
    pgid = "%d.0" % r.pool_lookup(pool)
    io = r.open_ioctx(pool)
    names = ["benchmark_data_%d" % i for i in range(a.objects)]
    t0 = time.time()
    write_all(io, names, bytes(random.Random(5).getrandbits(8) for _ in range(a.size)), 32)
    say("wrote %d x %d B in %.1fs" % (a.objects, a.size, time.time() - t0))
    wait(r, all_clean, 300, "clean after the load")
    command(r, prefix="osd set", key="noout")
    for pct in a.pcts.split():
        for rep in range(1, a.reps + 1):
            primary, acting = pg_map(r, pgid)
            victim = next(o for o in acting if o != primary)
            log = os.path.join(data, "log", "osd.%d.log" % primary)
            subprocess.check_call(["bash", a.lab, "stop-osd", str(victim)])
            try:
                command(r, prefix="osd down", ids=[str(victim)])
            except RuntimeError:
                pass
            wait(r, lambda s: s["osdmap"]["num_up_osds"] == s["osdmap"]["num_osds"] - 1, 120,
                 "victim down")
            n = round(a.objects * float(pct) / 100)
            stale = sorted(random.Random(7 + rep).sample(range(a.objects), n))
            payload = bytes(random.Random(6 + rep).getrandbits(8) for _ in range(a.size))
            write_all(io, [names[i] for i in stale], payload, 32)
            seen = os.path.getsize(log)
            t0 = time.time()
            subprocess.check_call(["bash", a.lab, "start-osd", str(victim)])
            wait(r, all_clean, 900, "clean after the restart")
            clean = time.time() - t0
            # The exit line follows the clean state's report by a moment.
            times = []
            for _ in range(50):
                with open(log, errors="replace") as f:
                    f.seek(seen)
                    times = EXIT.findall(f.read())
                if times:
                    break
                time.sleep(0.2)
            if not times:
                raise RuntimeError("no Backfilling exit line in %s" % log)
            ms = float(times[-1]) * 1000
            say("%s%% rep %d: osd.%d backfilled by osd.%d in %.1f ms, clean %.2fs after the start"
                % (pct, rep, victim, primary, ms, clean))
            print("ceph,%d,%s,%d,%.1f,%.2f" % (a.objects, pct, rep, ms, clean), flush=True)
    command(r, prefix="osd unset", key="noout")
    io.close()
    command(r, prefix="osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    r.shutdown()


if __name__ == "__main__":
    main()
