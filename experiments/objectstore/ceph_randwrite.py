#!/usr/bin/env python3
"""Ceph's side of the random-overwrite workloads (rados bench has no
overwrite mode): with python3-rados, against $CEPH_CONF's cluster.

  ceph_randwrite.py POOL 0 THREADS SIZE --prefill N
      write objects obj0..obj(N-1) of SIZE bytes, THREADS in flight, and
      record N and SIZE in the pool's object `meta`
  ceph_randwrite.py POOL SECS THREADS IO_SIZE
      for SECS seconds keep THREADS writes of IO_SIZE bytes in flight, each
      at a random IO_SIZE-aligned offset of a random prefilled object;
      prints one JSON line: ops, seconds, lat_avg_ms, lat_p99_ms
"""
import json
import os
import random
import sys
import threading
import time

import rados  # Debian's python3-rados


def main():
    pool, secs, threads, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    r = rados.Rados(conffile=os.environ["CEPH_CONF"])
    r.connect(timeout=30)
    io = r.open_ioctx(pool)
    if "--prefill" in sys.argv:
        n = int(sys.argv[sys.argv.index("--prefill") + 1])
        blob = os.urandom(size)
        done = [io.aio_write_full("obj%d" % i, blob) for i in range(n)]
        for c in done:
            c.wait_for_complete()
        io.write_full("meta", ("%d %d" % (n, size)).encode())
        return
    n, obj_size = (int(x) for x in io.read("meta").split())
    slots = obj_size // size
    data = b"\x5a" * size
    lock = threading.Lock()
    cv = threading.Condition(lock)
    state = {"inflight": 0, "lat": []}
    rng = random.Random(1)
    deadline = time.time() + secs
    t0 = time.time()

    def done(start):
        def cb(_completion):
            with cv:
                state["lat"].append(time.time() - start)
                state["inflight"] -= 1
                cv.notify()
        return cb

    while time.time() < deadline:
        with cv:
            while state["inflight"] >= threads:
                cv.wait()
            state["inflight"] += 1
        name = "obj%d" % rng.randrange(n)
        off = rng.randrange(slots) * size
        io.aio_write(name, data, off, oncomplete=done(time.time()))
    with cv:
        while state["inflight"] > 0:
            cv.wait()
    took = time.time() - t0
    lat = sorted(state["lat"])
    print(json.dumps({
        "ops": len(lat),
        "seconds": took,
        "lat_avg_ms": sum(lat) / len(lat) * 1e3 if lat else 0.0,
        "lat_p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3 if lat else 0.0,
    }))
    io.close()
    r.shutdown()


if __name__ == "__main__":
    main()
