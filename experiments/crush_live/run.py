#!/usr/bin/env python3
"""Table 2 of the linear-bucket CRUSH proposal, on a running cluster.

Two clusters run in turn, alike but for placement: CRUSH's straw2
buckets, and the proposal's linear buckets with the balance parameter
the adaptive search picks for each pool (`pool set NAME balance_param
auto`). Each has --osds OSD processes under one host bucket, failure
domain the OSD.

Each case (the proposal's two: 128 KiB objects in a size-2 pool, 10 MiB
objects in a size-3 pool) runs in rounds; a round makes the pool, writes
its objects (`bench write --max-objects`: write ops/s), then reads them
with the page cache dropped (`bench seq`: read ops/s), then removes the
pool. This machine has one disk: as in the proposal's cluster, where each
OSD is a disk of its own, each OSD process's reads from it are capped
alike (a blkio cgroup per OSD, --read-mbps each), so an OSD that is the
primary of more PGs than its share serves more reads at the same speed
and the clients wait on it. (Writes are not capped: the kernel does not
throttle buffered writes per cgroup.)

Per OSD and case: PGs, primaries, bytes used after the writes (`osd df`)
and bytes read from the device in the read phase (the cgroup's counter).
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from lib import run, wait_clean  # noqa: E402
CG = "/sys/fs/cgroup/blkio"


def say(*a):
    print("[crush_live %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def device_of(path):
    """major:minor of the whole disk holding `path`."""
    dev = os.stat(path).st_dev
    node = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev)))
    if os.path.exists(os.path.join(node, "partition")):
        node = os.path.dirname(node)
    return open(os.path.join(node, "dev")).read().strip()


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


class Cluster:
    def __init__(self, layout, osds, osd_size, read_bps):
        self.layout, self.osds = layout, osds
        self.tmp = tempfile.mkdtemp(prefix="loligo-crushlive.")
        self.data = os.path.join(self.tmp, "c")
        self.conf = os.path.join(self.data, "loligo.conf")
        run("up", "--detach", "--insecure", "--osds", osds, "--pg-num", 8, "--s3", "off",
            "--osd-size", osd_size, "--data-dir", self.data)
        self.wait_clean()
        for pool in run("pool", "ls", conf=self.conf).split():
            run("pool", "rm", pool, pool, conf=self.conf)
        if layout == "linear":
            text = run("crush", "get", "--text", conf=self.conf)
            path = os.path.join(self.tmp, "linear.txt")
            with open(path, "w") as f:
                f.write(text.replace("alg straw2", "alg linear"))
            run("crush", "set", "-i", path, conf=self.conf)
        self.dev = device_of(self.tmp)
        self.groups = []
        for o in range(osds):
            g = os.path.join(CG, "loligo-crushlive-osd%d" % o)
            os.makedirs(g, exist_ok=True)
            with open(os.path.join(g, "blkio.throttle.read_bps_device"), "w") as f:
                f.write("%s %d\n" % (self.dev, read_bps))
            pid = open(os.path.join(self.data, "osd.%d.pid" % o)).read().strip()
            with open(os.path.join(g, "cgroup.procs"), "w") as f:
                f.write(pid + "\n")
            self.groups.append(g)

    def wait_clean(self):
        wait_clean(self.conf, poll=1)

    def read_bytes(self):
        """Bytes each OSD read from the disk so far."""
        out = []
        for g in self.groups:
            n = 0
            for line in open(os.path.join(g, "blkio.throttle.io_service_bytes")):
                f = line.split()
                if len(f) == 3 and f[0] == self.dev and f[1] == "Read":
                    n += int(f[2])
            out.append(n)
        return out

    def placement(self, pool):
        """Per OSD: PGs (copies) and primaries of `pool`."""
        d = json.loads(run("pg", "dump", "pgs_brief", "--json", conf=self.conf))
        rows = d.get("pg_stats", d) if isinstance(d, dict) else d
        pgs, prim = [0] * self.osds, [0] * self.osds
        for r in rows:
            pgid = str(r.get("pgid", ""))
            if not pgid.startswith("%s." % pool):
                continue
            for o in r["acting"]:
                if 0 <= o < self.osds:
                    pgs[o] += 1
            p = r.get("acting_primary", r.get("primary"))
            if p is not None and 0 <= p < self.osds:
                prim[p] += 1
        return pgs, prim

    def used(self):
        v = json.loads(run("osd", "df", "--json", conf=self.conf))
        per = {n["id"]: n["kb_used"] * 1024 for n in v["nodes"]}
        return [per.get(o, 0) for o in range(self.osds)]

    def steady_used(self, limit=60):
        last, t0 = None, time.time()
        while time.time() - t0 < limit:
            u = self.used()
            if u == last:
                return u
            last = u
            time.sleep(2.5)
        return last

    def stop(self):
        run("down", "--data-dir", self.data, check=False)
        for g in self.groups:
            try:
                os.rmdir(g)
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def bench(c, pool, secs, mode, size, threads, objects=None):
    args = ["bench", secs, mode, "-p", pool, "-t", threads, "--json"]
    if mode == "write":
        args += ["-b", size, "--no-cleanup", "--max-objects", objects]
    b = json.loads(run(*args, conf=c.conf).strip().splitlines()[-1])
    return b["ops"], b["seconds"], b["latency_ms"]["avg"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--osds", type=int, default=8)
    ap.add_argument("--read-mbps", type=float, default=12.0)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    a = ap.parse_args()
    rounds = 1 if a.quick else 3
    # (name, object bytes, size, pg_num, objects, read seconds)
    cases = [
        ("128K", 128 << 10, 2, 512, 6000 if a.quick else 16000, 20 if a.quick else 30),
        ("10M", 10 << 20, 3, 256, 100 if a.quick else 300, 20 if a.quick else 30),
    ]
    os.makedirs(a.out, exist_ok=True)
    rows, per_osd = [], []
    for layout in ("straw2", "linear"):
        say("cluster:", layout)
        c = Cluster(layout, a.osds, 3 << 30, int(a.read_mbps * 1e6))
        try:
            for r in range(rounds):
                for name, size, rep, pg_num, objects, read_secs in cases:
                    pool = "t%s%d" % (name.lower(), r)
                    run("pool", "create", pool, "--pg-num", pg_num, "--size", rep,
                        conf=c.conf)
                    if layout == "linear":
                        run("pool", "set", pool, "balance_param", "auto", conf=c.conf)
                    c.wait_clean()
                    pool_id = json.loads(run("pool", "get", pool, conf=c.conf))["id"]
                    pgs, prim = c.placement(pool_id)
                    base = c.steady_used()
                    wops, wsecs, wlat = bench(c, pool, 600, "write", size, 32, objects)
                    used = [u - b for u, b in zip(c.steady_used(), base)]
                    drop_caches()
                    r0 = c.read_bytes()
                    rops, rsecs, rlat = bench(c, pool, read_secs, "seq", size, 32)
                    reads = [x - y for x, y in zip(c.read_bytes(), r0)]
                    row = dict(layout=layout, case=name, round=r, osds=a.osds, size=rep,
                               pg_num=pg_num, objects=objects,
                               write_ops_s=round(wops / wsecs, 2), write_lat_ms=wlat,
                               read_ops_s=round(rops / rsecs, 2), read_lat_ms=rlat,
                               pgs_stdev=round(statistics.pstdev(pgs), 3),
                               primaries_stdev=round(statistics.pstdev(prim), 3),
                               used_max_over_mean=round(max(used) / statistics.mean(used), 4),
                               used_cv_pct=round(100 * statistics.pstdev(used)
                                                 / statistics.mean(used), 2),
                               reads_max_over_mean=round(max(reads) / max(1, statistics.mean(reads)), 4))
                    say(row)
                    rows.append(row)
                    for o in range(a.osds):
                        per_osd.append(dict(layout=layout, case=name, round=r, osd=o,
                                            pgs=pgs[o], primaries=prim[o], used_bytes=used[o],
                                            read_bytes=reads[o]))
                    run("pool", "rm", pool, pool, conf=c.conf)
                    time.sleep(5)
        finally:
            c.stop()
    for fname, data in (("results.csv", rows), ("per_osd.csv", per_osd)):
        with open(os.path.join(a.out, fname), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0].keys()))
            w.writeheader()
            w.writerows(data)
    with open(os.path.join(a.out, "params.json"), "w") as f:
        json.dump(dict(quick=a.quick, rounds=rounds, osds=a.osds, read_mbps=a.read_mbps), f)


if __name__ == "__main__":
    main()
