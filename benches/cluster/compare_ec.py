#!/usr/bin/env python3
"""Erasure-coded pools, Loligo against Ceph 16.2 on the same machine, one
right after the other.

Each system gets a cluster of 7 OSDs (the 7th is marked out for the
benchmarks, so a 4+2 pool runs on 6 OSDs; it is put back in for recovery,
so a failed OSD's shards have somewhere to go):

  bench     per pool (Ceph: jerasure 4+2 and isa 4+2; Loligo: RS 4+2 and
            Zigzag 4+2), 32 PGs: `rados bench`-style write, seq and rand
            with 4 MiB objects, 16 in flight, SECS seconds each; the page
            cache dropped before each read phase (and SETTLE_S seconds
            after the writes), so reads come from the device.
  recovery  per pool: TOTAL_MIB of 4 MiB objects written, one OSD killed,
            marked down and out; seconds from `osd out` until every PG is
            active+clean again, and the bytes the OSD processes read from
            the block layer meanwhile (/proc/PID/io read_bytes).

  raw disk  before each system: STREAMS parallel O_DIRECT streams writing,
            then reading, 4 MiB blocks in the same file system (`dd`), so
            the write and read bandwidths are set against what the disk
            gives in the same sitting; each write phase also records the
            bytes the block device wrote (/proc/diskstats).

Writes OUT/results.json and OUT/RESULTS.md (tables and Loligo/Ceph ratios).
Usage: compare_ec.py [--secs 10] [--total-mib 1024] [--out DIR]
                     [--skip-ceph] [--skip-loligo] [--skip-bench]
                     [--skip-recovery]
Ceph comes from Debian's packages (apt-get install -y ceph); without
`ceph-osd` its side is skipped and said so.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
B = os.path.join(ROOT, "target", "release", "loligo")
LAB = os.path.join(ROOT, "benches", "ceph", "lab.sh")
OSDS = 7
SPARE = 6
PGS = 32
OBJ = 4 << 20
# Seconds between a pool's write phase and its first read phase.
SETTLE_S = 5


def say(*a):
    print("[compare_ec %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def sh(cmd, check=True, env=None, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s%s" % (" ".join(cmd), p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def wait(what, cond, limit, every=0.5):
    t0 = time.time()
    while True:
        try:
            if cond():
                return time.time() - t0
        except (RuntimeError, ValueError, KeyError, subprocess.TimeoutExpired):
            pass
        if time.time() - t0 > limit:
            raise RuntimeError("%s not reached in %ss" % (what, limit))
        time.sleep(every)


def proc_read_bytes(pids):
    """read_bytes of each live process in `pids`, by pid."""
    out = {}
    for pid in pids:
        try:
            for line in open("/proc/%d/io" % pid):
                if line.startswith("read_bytes:"):
                    out[pid] = int(line.split()[1])
        except OSError:
            pass
    return out


def read_since(before, after):
    """Bytes read between two `proc_read_bytes` readings, over the
    processes in both (a killed OSD still being reaped at the first
    reading would otherwise count negative)."""
    return sum(after[p] - before[p] for p in before if p in after)


def disk_of(path):
    """The /proc/diskstats name of the device holding `path` (its whole
    disk when it is a partition), or None."""
    try:
        st = os.stat(path)
        dev = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)))
        if os.path.exists(os.path.join(dev, "partition")):
            dev = os.path.dirname(dev)
        return os.path.basename(dev)
    except OSError:
        return None


def disk_written(disk):
    """Bytes the block device `disk` has written since boot."""
    for line in open("/proc/diskstats"):
        f = line.split()
        if len(f) > 9 and f[2] == disk:
            return int(f[9]) * 512
    return 0


STREAMS = 6


def raw_disk(dirpath, mib=512):
    """Parallel O_DIRECT write then read bandwidth (MB/s) of STREAMS
    streams of `mib` MiB each in `dirpath`'s file system."""
    files = [os.path.join(dirpath, "raw%d.tmp" % i) for i in range(STREAMS)]
    out = {}
    for phase, args in (("write", lambda f: ["if=/dev/zero", "of=" + f, "oflag=direct"]),
                        ("read", lambda f: ["if=" + f, "of=/dev/null", "iflag=direct"])):
        t0 = time.time()
        ps = [subprocess.Popen(["dd", "bs=4M", "count=%d" % (mib // 4)] + args(f),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for f in files]
        for p in ps:
            p.wait()
        out[phase + "_mb_per_s"] = round(STREAMS * mib * 2**20 / (time.time() - t0) / 1e6, 1)
    for f in files:
        os.remove(f)
    return out


def drop_caches():
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


class Ceph:
    name = "ceph"

    def __init__(self, out):
        self.data = tempfile.mkdtemp(prefix="loligo-cephlab.")
        self.env = dict(os.environ, CEPHLAB_DATA=os.path.join(self.data, "lab"),
                        CEPH_CONF=os.path.join(self.data, "lab", "ceph.conf"))
        self.out = out

    def lab(self, *a, timeout=900):
        return sh(["bash", LAB] + list(a), env=self.env, timeout=timeout)

    def ceph(self, *a, check=True):
        return sh(["ceph"] + list(a), env=self.env, check=check, timeout=120)

    def up(self):
        self.lab("up", str(OSDS))

    def down(self):
        try:
            self.lab("down")
        finally:
            shutil.rmtree(self.data, ignore_errors=True)

    def status(self):
        return json.loads(self.ceph("status", "-f", "json"))

    def clean(self, up):
        s = self.status()
        o, p = s["osdmap"], s["pgmap"]
        n = sum(x["count"] for x in p.get("pgs_by_state", []) if x["state_name"] == "active+clean")
        return o["num_up_osds"] == up and p.get("num_pgs", 0) > 0 and n == p["num_pgs"]

    def osd_out(self, i):
        self.ceph("osd", "out", str(i))

    def osd_in(self, i):
        self.ceph("osd", "in", str(i))

    def pools(self):
        return [("jerasure", "plugin=jerasure technique=reed_sol_van"),
                ("isa", "plugin=isa technique=reed_sol_van")]

    def make_pool(self, name, spec):
        self.ceph("osd", "erasure-code-profile", "set", name, "k=4", "m=2",
                  "crush-failure-domain=osd", *spec.split(), "--force")
        self.ceph("osd", "pool", "create", name, str(PGS), str(PGS), "erasure", name)
        self.ceph("osd", "pool", "set", name, "pg_autoscale_mode", "off", check=False)
        self.ceph("osd", "pool", "application", "enable", name, "rados", check=False)

    def rm_pool(self, name):
        self.ceph("osd", "pool", "rm", name, name, "--yes-i-really-really-mean-it", check=False)

    def bench(self, pool, secs, mode):
        args = ["rados", "-p", pool, "bench", str(secs), mode, "-t", "16", "--run-name", "b"]
        if mode == "write":
            args += ["-b", str(OBJ), "--no-cleanup"]
        text = sh(args, env=self.env, timeout=secs * 10 + 120)
        with open(os.path.join(self.out, "ceph_%s_%s.log" % (pool, mode)), "w") as f:
            f.write(text)
        v = {}
        for line in text.splitlines():
            if ":" in line:
                k, _, x = line.partition(":")
                v[k.strip()] = x.strip()
        mib = float(v["Bandwidth (MB/sec)"])  # rados bench prints MiB/s
        return {"ops_per_s": float(v["Average IOPS"]), "mb_per_s": mib * 1.048576,
                "avg_ms": float(v["Average Latency(s)"]) * 1000}

    def put_all(self, pool, blob, n):
        for i in range(n):
            sh(["rados", "-p", pool, "put", "obj%d" % i, blob], env=self.env)

    def used(self, pool):
        """Raw bytes the pool takes on the OSDs (`ceph df`)."""
        d = json.loads(self.ceph("df", "-f", "json"))
        return next(p["stats"]["bytes_used"] for p in d["pools"] if p["name"] == pool)

    def victim(self, pool):
        m = json.loads(self.ceph("osd", "map", pool, "obj0", "-f", "json"))
        return m["acting"][1]

    def pids(self):
        run = os.path.join(self.env["CEPHLAB_DATA"], "run")
        out = []
        for i in range(OSDS):
            try:
                out.append(int(open(os.path.join(run, "osd.%d.pid" % i)).read()))
            except (OSError, ValueError):
                pass
        return out

    def kill(self, i):
        self.lab("stop-osd", str(i))
        self.ceph("osd", "down", str(i), check=False)

    def restart(self, i):
        self.lab("start-osd", str(i))


class Loligo:
    name = "loligo"

    def __init__(self, out):
        self.tmp = tempfile.mkdtemp(prefix="loligo-compare-ec.")
        self.data = os.path.join(self.tmp, "c")
        self.conf = os.path.join(self.data, "loligo.conf")
        self.out = out

    def cli(self, *a, check=True, timeout=600):
        return sh([B, "-c", self.conf] + list(a), check=check, timeout=timeout)

    def up(self):
        # 4 GiB per OSD: a removed pool's space comes back in the
        # background, and the next pool's writes must not find OSDs full.
        sh([B, "up", "--detach", "--osds", str(OSDS), "--pg-num", "8", "--osd-size",
            str(4 << 30), "--data-dir", self.data])
        wait("all up", lambda: self.clean(OSDS), 180)

    def down(self):
        try:
            sh([B, "down", "--data-dir", self.data], check=False)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def status(self):
        return json.loads(self.cli("status", "--json"))

    def clean(self, up):
        s = self.status()
        pgs, o = s["pgs"], s["osdmap"]
        return o["num_up_osds"] == up and pgs["by_state"].get("active+clean", 0) == pgs["total"]

    def osd_out(self, i):
        self.cli("osd", "out", str(i))

    def osd_in(self, i):
        self.cli("osd", "in", str(i))

    def pools(self):
        return [("rs", ["--plugin", "rs"]), ("zigzag", ["--plugin", "zigzag", "--s", "1"])]

    def make_pool(self, name, spec):
        self.cli("ec-profile", "set", name, "--k", "4", "--m", "2", *spec)
        self.cli("pool", "create", name, "--pg-num", str(PGS), "--erasure", name)

    def rm_pool(self, name):
        self.cli("pool", "rm", name, name, check=False)

    def bench(self, pool, secs, mode):
        args = ["-p", pool, "bench", str(secs), mode, "-t", "16", "--json"]
        if mode == "write":
            args += ["-b", str(OBJ), "--no-cleanup"]
        d = json.loads(self.cli(*args, timeout=secs * 10 + 120))
        with open(os.path.join(self.out, "loligo_%s_%s.json" % (pool, mode)), "w") as f:
            json.dump(d, f)
        return {"ops_per_s": d["ops_per_s"], "mb_per_s": d["mb_per_s"],
                "avg_ms": d["latency_ms"]["avg"], "p99_ms": d["latency_ms"]["p99"]}

    def put_all(self, pool, blob, n):
        for i in range(n):
            self.cli("-p", pool, "put", "obj%d" % i, blob)

    def device_reads(self):
        """Bytes the OSDs' stores asked their block files for (buffered
        reads: some may come from the page cache)."""
        return sum(c["device_read_bytes"] for c in self.status().get("osd_counters", []))

    def used(self, pool):
        """Bytes the OSDs' stores have allocated (all pools: measure a
        difference)."""
        return sum(c["bytes_used"] for c in self.status().get("osd_counters", []))

    def victim(self, pool):
        return json.loads(self.cli("osd", "map", pool, "obj0", "--json"))["acting"][1]

    def pids(self):
        out = []
        for i in range(OSDS):
            try:
                out.append(int(open(os.path.join(self.data, "osd.%d.pid" % i)).read()))
            except (OSError, ValueError):
                pass
        return out

    def kill(self, i):
        sh([B, "stop", "osd.%d" % i, "--kill", "--data-dir", self.data])
        self.cli("osd", "down", str(i), check=False)

    def restart(self, i):
        sh([B, "start", "osd.%d" % i, "--data-dir", self.data])


def run_system(sysm, a, rows):
    if not a.skip_bench:
        scratch = tempfile.mkdtemp(prefix="loligo-raw.")
        raw = raw_disk(scratch)
        os.rmdir(scratch)
        say("%s sitting: raw disk %s" % (sysm.name, raw))
        rows.append(dict(system=sysm.name, pool="-", phase="raw", **raw))
    say("%s: starting %d OSDs" % (sysm.name, OSDS))
    sysm.up()
    try:
        if not a.skip_bench:
            sysm.osd_out(SPARE)
            wait("clean with osd.%d out" % SPARE, lambda: sysm.clean(OSDS), 300, 1)
            for pool, spec in sysm.pools():
                sysm.make_pool(pool, spec)
                wait("pool %s clean" % pool, lambda: sysm.clean(OSDS), 300, 1)
                for mode in ["write", "seq", "rand"]:
                    if mode != "write":
                        # Reads from the device, not the page cache, once
                        # the writes' background work has settled.
                        time.sleep(SETTLE_S if mode == "seq" else 0)
                        drop_caches()
                    w0 = disk_written(a.disk) if a.disk else 0
                    r = sysm.bench(pool, a.secs, mode)
                    if mode == "write" and a.disk and r["mb_per_s"] > 0:
                        dev = disk_written(a.disk) - w0
                        r["device_bytes_per_byte"] = round(
                            dev / (r["mb_per_s"] * 1e6 * a.secs), 2)
                    say("%s %s %s: %.1f MB/s, %.1f ms avg" % (sysm.name, pool, mode,
                                                            r["mb_per_s"], r["avg_ms"]))
                    rows.append(dict(system=sysm.name, pool=pool, phase="bench", mode=mode, **r))
                sysm.rm_pool(pool)
            sysm.osd_in(SPARE)
        if not a.skip_recovery:
            blob = os.path.join(a.out, "blob.tmp")
            with open(blob, "wb") as f:
                f.write(os.urandom(OBJ))
            n = max(1, a.total_mib // 4)
            for pool, spec in sysm.pools():
                sysm.make_pool(pool, spec)
                wait("pool %s clean" % pool, lambda: sysm.clean(OSDS), 300, 1)
                time.sleep(3)  # usage is reported periodically
                u0 = sysm.used(pool) if sysm.name == "loligo" else 0
                sysm.put_all(pool, blob, n)
                wait("clean after writes", lambda: sysm.clean(OSDS), 300, 1)
                time.sleep(3)
                overhead = (sysm.used(pool) - u0) / (n * OBJ)
                victim = sysm.victim(pool)
                drop_caches()
                pids = sysm.pids()
                sysm.kill(victim)
                wait("osd.%d down" % victim,
                     lambda: sysm.status()["osdmap"]["num_up_osds"] == OSDS - 1, 120)
                r0 = proc_read_bytes(pids)
                d0 = sysm.device_reads() if sysm.name == "loligo" else 0
                t0 = time.time()
                sysm.osd_out(victim)
                # A status from before the out may still say clean: wait
                # for it to say otherwise first (briefly), then for clean.
                try:
                    wait("recovery start", lambda: not sysm.clean(OSDS - 1), 10, 0.2)
                except RuntimeError:
                    pass
                wait("clean after out", lambda: sysm.clean(OSDS - 1), 3600, 0.5)
                secs = time.time() - t0
                rd = read_since(r0, proc_read_bytes(pids))
                dev = rd  # Ceph reads with O_DIRECT: the block layer's count
                if sysm.name == "loligo":
                    time.sleep(3)  # counters are reported periodically
                    dev = sysm.device_reads() - d0
                say("%s %s: recovered osd.%d's shards of %d MiB in %.1fs, read %.1f MiB" % (
                    sysm.name, pool, victim, n * 4, secs, rd / 2**20))
                rows.append(dict(system=sysm.name, pool=pool, phase="recovery", mib=n * 4,
                                 victim=victim, recovery_s=round(secs, 2), proc_read_bytes=rd, store_read_bytes=dev,
                                 stored_per_byte=round(overhead, 3)))
                # The next pool starts from a whole cluster again.
                sysm.rm_pool(pool)
                sysm.restart(victim)
                sysm.osd_in(victim)
                wait("whole again", lambda: sysm.clean(OSDS), 600, 1)
            os.remove(blob)
    finally:
        sysm.down()


def report(rows, a):
    by = {(r["system"], r["pool"], r.get("mode", r["phase"])): r for r in rows}
    lines = ["# Erasure-coded 4+2: Loligo against Ceph, same sitting", "",
             "7 OSDs on one machine; the benchmarks run with the 7th out (a 4+2 pool on 6 OSDs),",
             "32 PGs per pool, 4 MiB objects, 16 in flight, %ds per phase." % a.secs, "",
             "| system | pool | mode | MB/s | ops/s | avg ms |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["phase"] == "bench":
            lines.append("| %s | %s | %s | %.1f | %.1f | %.1f |" % (
                r["system"], r["pool"], r["mode"], r["mb_per_s"], r["ops_per_s"], r["avg_ms"]))
    raw = [r for r in rows if r["phase"] == "raw"]
    if raw:
        lines += ["", "The disk in the same sitting (%d parallel O_DIRECT streams of 4 MiB"
                  " blocks, measured just before each system's run), and each system's"
                  " 4 MiB EC writes as a fraction of raw write bandwidth / 1.5 (a 4+2"
                  " pool writes 1.5 bytes per byte) and its device bytes per byte"
                  " written:" % STREAMS, "",
                  "| system | raw write MB/s | raw read MB/s | pool | write / (raw / 1.5) |"
                  " device bytes per byte |", "|---|---|---|---|---|---|"]
        for rr in raw:
            for r in rows:
                if r["phase"] == "bench" and r["system"] == rr["system"] and r["mode"] == "write":
                    lines.append("| %s | %.0f | %.0f | %s | %.2f | %s |" % (
                        r["system"], rr["write_mb_per_s"], rr["read_mb_per_s"], r["pool"],
                        r["mb_per_s"] / (rr["write_mb_per_s"] / 1.5),
                        r.get("device_bytes_per_byte", "-")))
    ratios = {}
    for lp in ["rs", "zigzag"]:
        for mode in ["write", "seq", "rand"]:
            lo = by.get(("loligo", lp, mode))
            for cp in ["jerasure", "isa"]:
                ce = by.get(("ceph", cp, mode))
                if lo and ce and ce["mb_per_s"] > 0:
                    ratios["%s/%s %s" % (lp, cp, mode)] = round(lo["mb_per_s"] / ce["mb_per_s"], 2)
    if ratios:
        lines += ["", "Throughput ratios, Loligo / Ceph:", "",
                  "| Loligo pool / Ceph pool, mode | ratio |", "|---|---|"]
        lines += ["| %s | %.2fx |" % (k, v) for k, v in ratios.items()]
    rec = [r for r in rows if r["phase"] == "recovery"]
    if rec:
        lines += ["", "Recovery of one OSD's shards (%d MiB of 4 MiB objects written; seconds from"
                  " `osd out` to all PGs active+clean; bytes the OSD processes read from the"
                  " block layer meanwhile):" % rec[0]["mib"], "",
                  "| system | pool | seconds | MiB read (block layer) | MiB read (store) |"
                  " raw bytes stored per byte written |",
                  "|---|---|---|---|---|---|"]
        for r in rec:
            lines.append("| %s | %s | %.1f | %.1f | %.1f | %.3f |" % (
                r["system"], r["pool"], r["recovery_s"], r["proc_read_bytes"] / 2**20,
                r["store_read_bytes"] / 2**20, r["stored_per_byte"]))
        t = {(r["system"], r["pool"]): r["recovery_s"] for r in rec}
        for lp in ["rs", "zigzag"]:
            for cp in ["jerasure", "isa"]:
                if ("loligo", lp) in t and ("ceph", cp) in t and t[("ceph", cp)] > 0:
                    ratios["recovery time %s/%s" % (lp, cp)] = round(
                        t[("loligo", lp)] / t[("ceph", cp)], 2)
        if ("loligo", "rs") in t and ("loligo", "zigzag") in t and t[("loligo", "rs")] > 0:
            ratios["recovery time zigzag/rs"] = round(t[("loligo", "zigzag")] / t[("loligo", "rs")], 2)
        lines += [""] + ["- %s: %.2fx" % (k, v) for k, v in ratios.items() if k.startswith("recovery")]
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"rows": rows, "ratios": ratios}, f, indent=1)
    with open(os.path.join(a.out, "RESULTS.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--secs", type=int, default=10)
    ap.add_argument("--total-mib", type=int, default=1024)
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-ceph", action="store_true")
    ap.add_argument("--skip-loligo", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--skip-recovery", action="store_true")
    ap.add_argument("--loligo-first", action="store_true")
    a = ap.parse_args()
    a.out = a.out or tempfile.mkdtemp(prefix="loligo-compare-ec-out.")
    os.makedirs(a.out, exist_ok=True)
    # Both systems keep their data under the temporary directory.
    a.disk = disk_of(tempfile.gettempdir())
    systems = []
    if not a.skip_ceph:
        if shutil.which("ceph-osd"):
            systems.append(Ceph(a.out))
        else:
            say("no ceph-osd here (apt-get install -y ceph): Ceph's side is skipped")
    if not a.skip_loligo:
        sh(["cargo", "build", "--release", "-p", "loligo-cli", "--manifest-path",
            os.path.join(ROOT, "Cargo.toml")], timeout=3600)
        systems.append(Loligo(a.out))
    if a.loligo_first:
        systems.reverse()
    rows = []
    for i, s in enumerate(systems):
        if i:
            subprocess.run(["sync"], check=False)
            time.sleep(5)
        run_system(s, a, rows)
    report(rows, a)
    say("results in %s" % a.out)


if __name__ == "__main__":
    main()
