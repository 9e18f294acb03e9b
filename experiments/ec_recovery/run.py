#!/usr/bin/env python3
"""Erasure-coded recovery on a local Loligo cluster, Reed-Solomon against
Zigzag, measured at the disk.

For each configuration (k, r = m, Zigzag duplication s) and object size:
  1. a fresh cluster of k + r + 1 OSD processes; an EC pool of one PG (so
     the failed OSD holds a shard of every object; the extra OSD is the
     spare CRUSH puts in its place)
  2. objects written through the Python binding (`loligo.Ioctx`), the
     cluster left to settle
  3. one member of the PG killed (SIGKILL), marked down and out: the spare
     is backfilled, each of its shards rebuilt by the code's plan
  4. until every PG is active+clean: seconds from `osd out`; bytes the
     OSDs' stores read from their devices (store counters), the bytes the
     plans read in theory, the bytes fetched, the shard bytes sent between
     OSDs, and the OSD processes' /proc read_bytes (reads that reached
     the block layer)
Then, offline from `loligo ec plan`: the paper's Table 5.3 (blocks read
per failed block, RS / Zigzag / Pyramid LRC) and aggressive against
conservative coalescing (its Fig. 5.6).

The driver speaks to the cluster through the Python binding (run.sh
builds it into target/pyenv): writes and the status polls that time the
recovery, without a process per poll taking CPU from the OSDs measured.

Writes OUT/results.csv, OUT/plans.json, OUT/summary.json, OUT/*.png and
OUT/RESULTS.md (via summarize.py).
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

try:
    import loligo
except ImportError:
    sys.exit("the Python binding is missing: run this through run.sh (it builds it)")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
B = os.path.join(ROOT, "target", "release", "loligo")

# The paper's evaluated configurations with its best duplication factor
# (the starred rows of its Table 5.1: those with an optimal construction).
FULL = [(8, 2, 2), (8, 3, 3), (8, 4, 3), (10, 3, 4), (10, 4, 4)]
QUICK = [(8, 2, 2)]
ONLY = os.environ.get("ECREC_ONLY")
# --scale: a pool of 32 PGs, 16 MiB objects, SCALE_MIB in all.
SCALE = [(4, 2, 1), (8, 2, 2)]
SCALE_MIB = 2048
SCALE_REPEATS = 4


def say(*a):
    print("[ec_recovery %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def run(*args, conf=None, check=True):
    cmd = [B] + (["-c", conf] if conf else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


# One binding handle per cluster config, kept while the cluster runs.
_handles = {}


def handle(conf):
    c = _handles.get(conf)
    if c is None:
        c = loligo.Rados(conffile=conf, op_timeout=10)
        c.connect()
        _handles[conf] = c
    return c


def status(conf):
    return handle(conf).status()


def wait(conf, what, cond, limit):
    t0 = time.time()
    while True:
        try:
            s = status(conf)
            if cond(s):
                return time.time() - t0
        except (RuntimeError, ValueError, loligo.Error):
            pass
        if time.time() - t0 > limit:
            raise RuntimeError("%s not reached in %ss" % (what, limit))
        time.sleep(0.2)


def all_clean(s, up=None):
    pgs, o = s["pgs"], s["osdmap"]
    clean = pgs["by_state"].get("active+clean", 0) == pgs["total"]
    return clean and o["num_up_osds"] == (o["num_osds"] if up is None else up)


def counters(s):
    return {c["osd"]: c for c in s.get("osd_counters", [])}


def proc_read_bytes(data_dir, n):
    out = {}
    for o in range(n):
        try:
            pid = open(os.path.join(data_dir, "osd.%d.pid" % o)).read().strip()
            for line in open("/proc/%s/io" % pid):
                if line.startswith("read_bytes:"):
                    out[o] = int(line.split()[1])
        except OSError:
            pass
    return out


def drop_caches():
    try:
        subprocess.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def settle(conf, keys, limit=30):
    """Wait until the reported counters stop moving (reports are
    periodic), and return the last status."""
    last, t0 = None, time.time()
    while True:
        time.sleep(1.5)
        s = status(conf)
        now = {o: tuple(c[k] for k in keys) for o, c in counters(s).items()}
        if now == last or time.time() - t0 > limit:
            return s
        last = now


KEYS = ["device_read_bytes", "device_reads", "rebuilt_shards", "rebuild_theory_bytes",
        "rebuild_fetched_bytes", "shard_bytes_sent", "recovery_bytes"]


def start(plugin, k, r, s, n, pgs, obj_mib, objects, osd_size):
    """A fresh cluster of n OSDs with an EC pool `ec` of `pgs` PGs holding
    `objects` objects of `obj_mib` MiB. Returns (tmp, data dir, conf)."""
    tmp = tempfile.mkdtemp(prefix="loligo-ecrec.")
    data = os.path.join(tmp, "c")
    conf = os.path.join(data, "loligo.conf")
    try:
        fill(plugin, k, r, s, pgs, obj_mib, objects, osd_size, n, tmp, data, conf)
    except BaseException:
        stop(data, tmp)
        raise
    return tmp, data, conf


def fill(plugin, k, r, s, pgs, obj_mib, objects, osd_size, n, tmp, data, conf):
    run("up", "--detach", "--osds", str(n), "--pg-num", "1", "--osd-size", str(osd_size),
        "--data-dir", data)
    wait(conf, "all up", all_clean, 120)
    prof = ["ec-profile", "set", "p", "--plugin", plugin, "--k", str(k), "--m", str(r)]
    if plugin == "zigzag":
        prof += ["--s", str(s)]
    run(*prof, conf=conf)
    run("pool", "create", "ec", "--pg-num", str(pgs), "--erasure", "p", conf=conf)
    wait(conf, "pool clean", all_clean, 120)
    blob = os.urandom(obj_mib << 20)
    c = handle(conf)
    c.wait_for_latest_osdmap()
    with c.open_ioctx("ec") as io:
        for i in range(objects):
            io.write_full("obj%d" % i, blob)
    wait(conf, "clean after writes", all_clean, 300)


def fail(conf, data, victim, n):
    """Kill `victim` like a crash, mark it down, wait until the map says
    so, and mark it out: the time from here is the recovery time."""
    run("stop", "osd.%d" % victim, "--kill", "--data-dir", data)
    run("osd", "down", str(victim), conf=conf, check=False)
    wait(conf, "victim down", lambda x: x["osdmap"]["num_up_osds"] == n - 1, 60)
    t0 = time.time()
    run("osd", "out", str(victim), conf=conf)
    return t0


def stop(data, tmp):
    c = _handles.pop(os.path.join(data, "loligo.conf"), None)
    if c is not None:
        c.shutdown()
    run("down", "--data-dir", data, check=False)
    if not os.environ.get("ECREC_KEEP"):
        shutil.rmtree(tmp, ignore_errors=True)


def one(plugin, k, r, s, obj_mib, total_mib, kind):
    n = k + r + 1
    objects = max(1, total_mib // obj_mib)
    tmp, data, conf = start(plugin, k, r, s, n, 1, obj_mib, objects, 256 << 20)
    try:
        before = settle(conf, KEYS)
        c0 = counters(before)
        # The failed OSD holds a data shard (position 1: not the primary)
        # or the first parity shard (position k) of every object.
        where = json.loads(run("osd", "map", "ec", "obj0", "--json", conf=conf))
        position = 1 if kind == "data" else k
        victim = where["acting"][position]
        dropped = drop_caches()
        p0 = proc_read_bytes(data, n)
        t0 = fail(conf, data, victim, n)
        # Done once every object's lost shard is rebuilt and every PG is
        # clean again (a status from before the out may still say clean).
        def done(x):
            c = counters(x)
            rebuilt = sum(c[o]["rebuilt_shards"] - c0.get(o, {}).get("rebuilt_shards", 0) for o in c)
            return rebuilt >= objects and all_clean(x, up=n - 1)
        wait(conf, "clean after out", done, 1800)
        secs = time.time() - t0
        after = settle(conf, KEYS)
        c1 = counters(after)
        p1 = proc_read_bytes(data, n)
        d = {key: sum(c1[o][key] - c0.get(o, {}).get(key, 0) for o in c1) for key in KEYS}

        row = {
            "plugin": plugin, "k": k, "r": r, "s": s if plugin == "zigzag" else 0,
            "object_mib": obj_mib, "objects": objects, "victim": victim, "lost": kind,
            "position": position,
            "recovery_s": round(secs, 3),
            "rebuilt_shards": d["rebuilt_shards"],
            "theory_bytes": d["rebuild_theory_bytes"],
            "device_read_bytes": d["device_read_bytes"],
            "device_reads": d["device_reads"],
            "fetched_bytes": d["rebuild_fetched_bytes"],
            "net_bytes": d["shard_bytes_sent"] + d["recovery_bytes"],
            "proc_read_bytes": sum(p1.get(o, 0) - p0.get(o, 0) for o in p1 if o != victim),
            "caches_dropped": int(dropped),
        }
        say("%s k=%d r=%d s=%d %d MiB x %d, %s shard lost: %.1fs, read %.1f MiB (theory %.1f), sent %.1f MiB" % (
            plugin, k, r, row["s"], obj_mib, objects, kind, secs, row["device_read_bytes"] / 2**20,
            row["theory_bytes"] / 2**20, row["net_bytes"] / 2**20))
        return row
    finally:
        stop(data, tmp)


def scale_one(plugin, k, r, s, pgs, obj_mib, total_mib):
    """One failure in a pool of many PGs: the failed OSD holds data
    shards in some PGs and parity shards in others (about k : r), and
    every PG it was in backfills at once. Seconds from `osd out` to all
    PGs active+clean, with the stores' device reads beside the plans'
    theory."""
    n = k + r + 1
    objects = max(1, total_mib // obj_mib)
    osd_size = max(1 << 30, 3 * total_mib * (1 << 20) // n)
    tmp, data, conf = start(plugin, k, r, s, n, pgs, obj_mib, objects, osd_size)
    try:
        c0 = counters(settle(conf, KEYS))
        victim = json.loads(run("osd", "map", "ec", "obj0", "--json", conf=conf))["acting"][1]
        drop_caches()
        t0 = fail(conf, data, victim, n)
        # A status from before the out may still say clean.
        try:
            wait(conf, "recovery start", lambda x: not all_clean(x, up=n - 1), 10)
        except RuntimeError:
            pass
        wait(conf, "clean after out", lambda x: all_clean(x, up=n - 1), 1800)
        secs = time.time() - t0
        c1 = counters(settle(conf, KEYS))
        d = {key: sum(c1[o][key] - c0.get(o, {}).get(key, 0) for o in c1) for key in KEYS}
        row = {"plugin": plugin, "k": k, "r": r, "s": s if plugin == "zigzag" else 0, "pgs": pgs,
               "object_mib": obj_mib, "objects": objects, "recovery_s": round(secs, 3),
               "rebuilt_shards": d["rebuilt_shards"], "theory_bytes": d["rebuild_theory_bytes"],
               "device_read_bytes": d["device_read_bytes"],
               "net_bytes": d["shard_bytes_sent"] + d["recovery_bytes"]}
        say("scale %s k=%d r=%d, %d PGs, %d x %d MiB: %.2fs, %d shards, read %.1f MiB (theory %.1f)" % (
            plugin, k, r, pgs, objects, obj_mib, secs, row["rebuilt_shards"],
            row["device_read_bytes"] / 2**20, row["theory_bytes"] / 2**20))
        return row
    finally:
        stop(data, tmp)


def scale(out):
    """`--scale`: RS against Zigzag with many PGs and more data, each
    pair in the same sitting, repeated (the order alternates)."""
    path = os.path.join(out, "scale.csv")
    if os.path.exists(path):
        os.remove(path)
    for k, r, s in SCALE:
        for rep in range(SCALE_REPEATS):
            order = ["rs", "zigzag"] if rep % 2 == 0 else ["zigzag", "rs"]
            for plugin in order:
                row = retried(scale_one, plugin, k, r, s, 32, 16, SCALE_MIB)
                row["repeat"] = rep
                append_row(path, row)


def retried(case, *args):
    """Run one case; a cluster that does not come up (up to 15 OSD
    processes on 2 cores) gets one more try."""
    try:
        return case(*args)
    except RuntimeError as e:
        say("retrying once: %s" % str(e).splitlines()[0][:300])
        return case(*args)


def append_row(path, row):
    """Each row as it comes: a long run that stops keeps what it measured."""
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def plan(args):
    """`loligo ec plan --json` averages for one code."""
    return json.loads(run("ec", "plan", "--json", *args))


def offline(sizes, configs):
    rows = []
    # Table 5.3: (n, k, s) of the paper; blocks read per failed block.
    for n, k, s in [(8, 6, 1), (9, 6, 1), (10, 8, 1), (11, 8, 2), (12, 8, 2), (13, 10, 2),
                    (14, 10, 3)]:
        r = n - k
        zz = plan(["--plugin", "zigzag", "--k", str(k), "--m", str(r), "--s", str(s)])
        lrc = plan(["--plugin", "lrc", "--k", str(k), "--m", str(r), "--l", "2"])
        rows.append({"table": "5.3", "n": n, "k": k, "s": s, "rs": k,
                     "zigzag": round(zz["avg_bytes_read"] / zz["chunk_size"], 2),
                     "pyramid": round(lrc["avg_bytes_read"] / lrc["chunk_size"], 2),
                     "pyramid_normalized": round(lrc["avg_bytes_read"] / lrc["chunk_size"]
                                                 * (n + 1) / n, 2)})
    # Fig. 5.6: aggressive against conservative coalescing, vs RS.
    for k, r, s in configs:
        for mib in sizes:
            for co in ["conservative", "aggressive"]:
                zz = plan(["--plugin", "zigzag", "--k", str(k), "--m", str(r), "--s", str(s),
                           "--object-size", str(mib << 20), "--coalesce", co])
                rows.append({"table": "5.6", "k": k, "r": r, "s": s, "object_mib": mib,
                             "coalesce": co, "bytes_read_vs_rs": round(zz["bytes_read_vs_rs"], 4),
                             "avg_ios": round(zz["avg_ios"], 1)})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--scale", action="store_true",
                    help="only the many-PG runs (out/scale.csv), then summarize")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.scale:
        scale(a.out)
        subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), a.out], check=True)
        return
    configs = QUICK if a.quick else FULL
    sizes = [16] if a.quick else [4, 16, 64]
    total = 64 if a.quick else 256
    path = os.path.join(a.out, "results.csv")
    if os.path.exists(path):
        os.remove(path)
    for k, r, s in configs:
        for mib in sizes:
            for kind in ["data", "parity"]:
                for plugin in ([ONLY] if ONLY else ["rs", "zigzag"]):
                    append_row(path, retried(one, plugin, k, r, s, mib, total, kind))
    plans = offline(sizes, configs)
    with open(os.path.join(a.out, "plans.json"), "w") as f:
        json.dump(plans, f, indent=1)
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), a.out], check=True)


if __name__ == "__main__":
    main()
