#!/usr/bin/python3
"""Per-op latencies on a Ceph pool, for the percentiles `rados bench`
does not print (it gives the mean and the maximum only).

Reads the objects a `rados bench write --no-cleanup` left in POOL, T in
flight through librados's asynchronous reads, for SECS seconds: in name
order (`seq`, as `rados bench seq` does) or at random (`rand`). Or writes
new objects of SIZE bytes (`write`, as `rados bench write` does, whole
objects named `latency_data_N`, left in the pool for the caller to
remove with it). Each op's latency is from the call to its completion.
Writes OUT (JSON): ops/s, MB/s, mean, p50, p99 and max in ms, and the
object count.

The client is Python (python3-rados, Debian's python3 only): its own
cost per op lands in every latency, so these figures are, if anything,
higher than a C++ client's. The comparison script prints this mean
beside `rados bench`'s for the same phase, so the difference shows.

    /usr/bin/python3 latency.py --pool bench --size 4096 --mode rand --secs 10 --out lat.json
"""

import argparse
import json
import os
import random
import re
import sys
import threading
import time

try:
    import rados
except ImportError:
    sys.exit("latency.py: needs python3-rados (apt-get install -y python3-rados) and Debian's /usr/bin/python3")


# An op that takes this long means the cluster is stuck (or full), not slow.
STALL_S = 60


def natural(name):
    """`benchmark_data_host_pid_object12` sorts after `..._object2`."""
    m = re.search(r"(\d+)$", name)
    return (name[: m.start()] if m else name, int(m.group(1)) if m else -1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", required=True)
    ap.add_argument("--size", type=int, required=True, help="bytes per object")
    ap.add_argument("--mode", choices=("seq", "rand", "write"), required=True)
    ap.add_argument("--secs", type=float, default=10)
    ap.add_argument("-t", "--concurrency", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--conf", default=os.environ.get("CEPH_CONF", ""))
    a = ap.parse_args()

    cluster = rados.Rados(conffile=a.conf) if a.conf else rados.Rados()
    cluster.connect(timeout=30)
    v = cluster.version()
    version = f"{v.major}.{v.minor}.{v.extra}"
    try:
        io = cluster.open_ioctx(a.pool)
        names = []
        if a.mode != "write":
            names = sorted(
                (o.key for o in io.list_objects() if o.key.startswith("benchmark_data")),
                key=natural,
            )
            if not names:
                sys.exit(f"latency.py: no rados bench objects in pool {a.pool}")
        # Bytes that do not compress (BlueStore compresses nothing by
        # default; this keeps it honest if a pool is set to).
        payload = random.Random(a.seed).randbytes(a.size) if a.mode == "write" else b""
        rng = random.Random(a.seed)
        slots = threading.Semaphore(a.concurrency)
        lock = threading.Lock()
        lats, errors, nbytes = [], [], [0]

        def issue(name):
            t0 = time.perf_counter()

            def done(_completion, data):
                dt = time.perf_counter() - t0
                with lock:
                    if data is None or len(data) != a.size:
                        errors.append(name)
                    else:
                        lats.append(dt)
                        nbytes[0] += len(data)
                slots.release()

            if a.mode == "write":
                def written(c):
                    done(c, payload if c.get_return_value() >= 0 else None)

                io.aio_write_full(name, payload, oncomplete=written)
            else:
                io.aio_read(name, a.size, 0, done)

        start = time.perf_counter()
        end = start + a.secs
        i = 0
        def wait_slot():
            if not slots.acquire(timeout=STALL_S):
                sys.exit(f"latency.py: no op completed in {STALL_S} s")

        while time.perf_counter() < end:
            wait_slot()
            if a.mode == "seq":
                if i >= len(names):
                    # As rados bench seq: stop when every object is read once.
                    slots.release()
                    break
                name = names[i]
            elif a.mode == "write":
                name = f"latency_data_{i}"
            else:
                name = names[rng.randrange(len(names))]
            i += 1
            issue(name)
        for _ in range(a.concurrency):
            wait_slot()
        elapsed = time.perf_counter() - start
        io.close()
    finally:
        cluster.shutdown()

    if errors:
        sys.exit(f"latency.py: {len(errors)} ops failed or came back short (first: {errors[0]})")
    lats.sort()
    ms = [x * 1000 for x in lats]

    def pct(p):
        # The same rank as Loligo's bench takes.
        return ms[min(len(ms) - 1, int(p / 100 * len(ms)))]

    out = {
        "pool": a.pool,
        "size": a.size,
        "mode": a.mode,
        "concurrency": a.concurrency,
        "objects": len(names) if a.mode != "write" else len(ms),
        "ops": len(ms),
        "ops_s": len(ms) / elapsed,
        "mb_s": nbytes[0] / elapsed / 1e6,
        "avg_ms": sum(ms) / len(ms),
        "p50_ms": pct(50),
        "p99_ms": pct(99),
        "max_ms": ms[-1],
        "client": f"python3-rados, librados {version}",
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=2)
    print(
        f"{a.size} {a.mode}: {out['ops_s']:.1f} ops/s, mean {out['avg_ms']:.2f} ms, "
        f"p99 {out['p99_ms']:.2f} ms ({out['ops']} ops)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
