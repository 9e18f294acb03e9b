#!/usr/bin/env python3
"""The BlueStore slides' evaluation on the same OSD code: Loligo's block
store (BlueStore's design) against its FileStore-like store (a journal
and a file per object), and Ceph 16.2's BlueStore against its FileStore on
the same machine, in one run.

Each cluster is 3 OSD processes (one host), a size-3 replicated pool of 32
PGs; each workload runs in a pool of its own, made for it and removed
after:
  - write-SIZE: `bench write` (rados bench) of SIZE-byte objects, from 4 KiB
    to 4 MiB, --threads in flight;
  - randwrite-4K: 4 KiB writes at random aligned offsets of 16 objects of
    4 MiB written first (the slides' RBD random writes, as `rbd bench`
    does them);
  - ec-randwrite-4K: the same on an erasure-coded pool, k=2 m=1 (the
    slides' "overwriting EC data"); Ceph allows EC overwrites on BlueStore
    only, so its FileStore row is absent (as it was in the slides).
Device bytes per user byte, two ways, each divided by the bytes the
clients wrote:
  - disk: sectors written to the block device holding the clusters
    (/sys/block/DEV/stat), from a `sync` before the workload to a `sync`
    after it and a few seconds' wait (deferred and checkpointed writes
    land then): what reached the device, everything on the machine
    included (it is otherwise quiet);
  - proc: the OSD processes' /proc/PID/io write_bytes less
    cancelled_write_bytes over the same time: what their writes dirtied
    or sent, page by page (a small append to a page written back since
    counts its whole page again, so logs of small records count high).

Cases run in rounds; each round runs every cluster kind once, and each
system's BlueStore and FileStore take turns at going first.

Writes out/results.csv (a row per workload per run), out/summary.json,
out/*.png and out/RESULTS.md (via summarize.py).
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from lib import ROOT, run, wait_clean  # noqa: E402
LAB = os.path.join(ROOT, "benches", "ceph", "lab.sh")
CEPH_DATA = os.environ.get("CEPHLAB_DATA", "/tmp/loligo-cephlab")
CEPH_PY = os.environ.get("CEPH_PY", "/usr/bin/python3")
SETTLE = 6.0
FIELDS = ["round", "system", "store", "workload", "size", "ops", "seconds", "ops_s",
          "mb_s", "lat_avg_ms", "lat_p99_ms", "user_bytes", "disk_write_bytes",
          "disk_per_user", "dev_write_bytes", "dev_per_user"]


def say(*a):
    print("[objectstore %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def written(pids):
    """Bytes the processes' writes sent to the block layer so far."""
    total = 0
    for pid in pids:
        try:
            f = dict(line.split(":", 1) for line in open("/proc/%s/io" % pid))
            total += int(f["write_bytes"]) - int(f["cancelled_write_bytes"])
        except (OSError, KeyError, ValueError):
            pass
    return total


def block_device(path):
    """The /sys/block name of the disk holding `path` (its partition's
    parent), or None."""
    dev = os.stat(path).st_dev
    node = "/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))
    try:
        real = os.path.realpath(node)
    except OSError:
        return None
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    name = os.path.basename(real)
    return name if os.path.exists("/sys/block/%s/stat" % name) else None


def disk_written(dev):
    """Bytes written to block device `dev` since boot."""
    if dev is None:
        return 0
    return int(open("/sys/block/%s/stat" % dev).read().split()[6]) * 512


def pids_in(run_dir, n):
    out = []
    for o in range(n):
        try:
            out.append(open(os.path.join(run_dir, "osd.%d.pid" % o)).read().strip())
        except OSError:
            pass
    return out


def size_name(n):
    return "%dK" % (n >> 10) if n < 1 << 20 else "%dM" % (n >> 20)


class Loligo:
    """A Loligo cluster on one store kind."""

    system = "loligo"

    def __init__(self, store, osd_size):
        self.store = store
        self.tmp = tempfile.mkdtemp(prefix="loligo-objstore.")
        self.data = os.path.join(self.tmp, "c")
        self.conf = os.path.join(self.data, "loligo.conf")
        run("up", "--detach", "--insecure", "--osds", "3", "--pg-num", "32", "--s3", "off",
            "--osd-size", str(osd_size), "--osd-objectstore", store, "--data-dir", self.data)
        self.wait_clean()
        # Only the measured pools.
        for pool in run("pool", "ls", conf=self.conf).split():
            run("pool", "rm", pool, pool, conf=self.conf)
        run("ec-profile", "set", "ec21", "--plugin", "rs", "--k", "2", "--m", "1",
            conf=self.conf)

    def wait_clean(self):
        wait_clean(self.conf, limit=180, osds=3)

    def pids(self):
        return pids_in(self.data, 3)

    def pool(self, name, ec):
        args = ["pool", "create", name, "--pg-num", "32"]
        if ec:
            args += ["--erasure", "ec21"]
        run(*args, conf=self.conf)
        self.wait_clean()

    def drop(self, name):
        run("pool", "rm", name, name, conf=self.conf)
        # Its objects go in the background: not in the next measurement.
        time.sleep(SETTLE)

    def bench(self, pool, secs, size, threads, mode="write", io_size=4096):
        args = ["bench", str(secs), mode, "-p", pool, "-t", str(threads), "--json",
                "--random-data"]
        if mode == "write":
            args += ["-b", str(size), "--no-cleanup"]
        else:
            args += ["--io-size", str(io_size)]
        b = json.loads(run(*args, conf=self.conf).strip().splitlines()[-1])
        lat = b["latency_ms"]
        return b["ops"], b["seconds"], lat["avg"], lat["p99"]

    def prefill(self, pool, objects, size):
        run("bench", "600", "write", "-p", pool, "-b", str(size), "--max-objects",
            str(objects), "--no-cleanup", "-t", "16", "--json", "--random-data",
            conf=self.conf)

    def stop(self):
        run("down", "--data-dir", self.data, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


class Ceph:
    """A Ceph 16.2 lab cluster (benches/ceph/lab.sh) on one store kind."""

    system = "ceph"

    def __init__(self, store, osd_size):
        self.store = store
        self.env = dict(os.environ, CEPHLAB_OBJECTSTORE=store,
                        CEPHLAB_OSD_GB=str(max(1, osd_size >> 30)))
        subprocess.run(["bash", LAB, "up", "3"], check=True, env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.env["CEPH_CONF"] = os.path.join(CEPH_DATA, "ceph.conf")

    def ceph(self, *args, check=True):
        p = subprocess.run(["ceph"] + list(args), capture_output=True, text=True, env=self.env)
        if check and p.returncode != 0:
            raise RuntimeError("ceph %s: %s" % (" ".join(args), p.stderr))
        return p.stdout

    def wait_clean(self):
        subprocess.run(["bash", LAB, "wait-clean"], check=True, env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def pids(self):
        return pids_in(os.path.join(CEPH_DATA, "run"), 3)

    def pool(self, name, ec):
        if ec:
            self.ceph("osd", "erasure-code-profile", "set", "ec21", "k=2", "m=1",
                      "crush-failure-domain=osd", "--force")
            self.ceph("osd", "pool", "create", name, "32", "32", "erasure", "ec21")
            self.ceph("osd", "pool", "set", name, "allow_ec_overwrites", "true")
        else:
            self.ceph("osd", "pool", "create", name, "32", "32", "replicated")
            self.ceph("osd", "pool", "set", name, "size", "3")
        self.ceph("osd", "pool", "set", name, "pg_autoscale_mode", "off")
        self.ceph("osd", "pool", "application", "enable", name, "rados")
        self.wait_clean()

    def drop(self, name):
        self.ceph("osd", "pool", "rm", name, name, "--yes-i-really-really-mean-it")
        time.sleep(SETTLE)

    def bench(self, pool, secs, size, threads, mode="write", io_size=4096):
        if mode == "write":
            p = subprocess.run(["rados", "bench", "-p", pool, str(int(secs)), "write", "-b",
                                str(size), "-t", str(threads), "--no-cleanup"],
                               capture_output=True, text=True, env=self.env, check=True)
            f = {}
            for line in p.stdout.splitlines():
                if ":" in line:
                    k, v = line.split(":", 1)
                    f[k.strip()] = v.strip()
            ops = int(f["Total writes made"])
            return (ops, float(f["Total time run"]), float(f["Average Latency(s)"]) * 1e3,
                    float("nan"))
        p = subprocess.run([CEPH_PY, os.path.join(HERE, "ceph_randwrite.py"), pool, str(secs),
                            str(threads), str(io_size)],
                           capture_output=True, text=True, env=self.env, check=True)
        b = json.loads(p.stdout.strip().splitlines()[-1])
        return b["ops"], b["seconds"], b["lat_avg_ms"], b["lat_p99_ms"]

    def prefill(self, pool, objects, size):
        subprocess.run([CEPH_PY, os.path.join(HERE, "ceph_randwrite.py"), pool, "0", "16",
                        str(size), "--prefill", str(objects)],
                       check=True, env=self.env, stdout=subprocess.DEVNULL)

    def stop(self):
        subprocess.run(["bash", LAB, "down"], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


DISK = block_device(tempfile.gettempdir())


def measure(cluster, rnd, workload, size, user_size, fn):
    pids = cluster.pids()
    subprocess.run(["sync"], check=False)
    d0, w0 = disk_written(DISK), written(pids)
    ops, secs, avg, p99 = fn()
    time.sleep(SETTLE)
    dev = written(pids) - w0
    subprocess.run(["sync"], check=False)
    disk = disk_written(DISK) - d0
    user = ops * user_size
    row = {"round": rnd, "system": cluster.system, "store": cluster.store,
           "workload": workload, "size": size, "ops": ops, "seconds": round(secs, 3),
           "ops_s": round(ops / secs, 1), "mb_s": round(user / secs / 1e6, 2),
           "lat_avg_ms": round(avg, 3), "lat_p99_ms": round(p99, 3), "user_bytes": user,
           "disk_write_bytes": disk, "disk_per_user": round(disk / user, 3) if user else "",
           "dev_write_bytes": dev, "dev_per_user": round(dev / user, 3) if user else ""}
    say("%s %s %s: %.0f ops/s, %.2f MB/s, %.2f disk (%.2f proc) bytes per user byte" % (
        cluster.system, cluster.store, workload, row["ops_s"], row["mb_s"],
        disk / user if user else float("nan"), dev / user if user else float("nan")))
    return row


def workloads(cluster, rnd, a):
    rows = []
    for size in a.sizes:
        name = "w%d" % size
        cluster.pool(name, ec=False)
        rows.append(measure(cluster, rnd, "write-%s" % size_name(size), size, size,
                            lambda: cluster.bench(name, a.secs, size, a.threads)))
        cluster.drop(name)
    for ec in (False, True):
        if ec and cluster.system == "ceph" and cluster.store == "filestore":
            continue  # Ceph allows EC overwrites on BlueStore only.
        name = "ec" if ec else "rw"
        cluster.pool(name, ec=ec)
        cluster.prefill(name, a.prefill_objects, 4 << 20)
        time.sleep(SETTLE)
        wl = ("ec-" if ec else "") + "randwrite-4K"
        rows.append(measure(cluster, rnd, wl, 4096, 4096,
                            lambda: cluster.bench(name, a.secs, 4096, a.threads,
                                                  mode="randwrite")))
        cluster.drop(name)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--secs", type=int)
    ap.add_argument("--threads", type=int, default=128,
                    help="ops in flight (the slides' rados bench queue depth)")
    ap.add_argument("--sizes", help="object sizes in bytes, comma-separated")
    ap.add_argument("--prefill-objects", type=int,
                    help="4 MiB objects the random writes go to (default 256, 64 with --quick)")
    ap.add_argument("--osd-size", type=int, default=8 << 30)
    ap.add_argument("--no-ceph", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    a = ap.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.secs = a.secs or (5 if a.quick else 15)
    a.prefill_objects = a.prefill_objects or (64 if a.quick else 256)
    a.sizes = ([int(s) for s in a.sizes.split(",")] if a.sizes else
               [4096, 65536, 4 << 20] if a.quick else
               [4096, 16384, 65536, 262144, 1 << 20, 4 << 20])
    have_ceph = (not a.no_ceph and shutil.which("ceph-osd") is not None
                 and subprocess.run([CEPH_PY, "-c", "import rados"],
                                    capture_output=True).returncode == 0)
    if not have_ceph and not a.no_ceph:
        say("no Ceph here (apt-get install -y ceph): its rows are skipped")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "results.csv")
    with open(path, "w", newline="") as f:
        csv.DictWriter(f, FIELDS).writeheader()
    kinds = [(Loligo, "bluestore"), (Loligo, "filestore")]
    if have_ceph:
        kinds += [(Ceph, "bluestore"), (Ceph, "filestore")]
    for rnd in range(a.rounds):
        order = kinds if rnd % 2 == 0 else kinds[1::2] + kinds[0::2]
        for kind, store in order:
            say("round %d: %s %s" % (rnd + 1, kind.system, store))
            c = kind(store, a.osd_size)
            try:
                rows = workloads(c, rnd + 1, a)
            finally:
                c.stop()
            with open(path, "a", newline="") as f:
                w = csv.DictWriter(f, FIELDS)
                for r in rows:
                    w.writerow(r)
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), a.out], check=True)


if __name__ == "__main__":
    main()
