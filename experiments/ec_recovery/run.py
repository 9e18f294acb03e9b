#!/usr/bin/env python3
"""Erasure-coded recovery on a local Loligo cluster, Reed-Solomon against
Zigzag (and Pyramid LRC), measured at the device.

Each case is a code (RS; Zigzag with the basic or the optimal row order;
LRC), k, r, Zigzag's duplication s, an object size and the kind of shard
lost (data or parity). One run of a case:
  1. a fresh cluster of width + 1 OSD processes; an EC pool of one PG (so
     the failed OSD holds a shard of every object; the extra OSD is the
     spare CRUSH puts in its place). Objects are laid out as in the paper:
     one stripe per object (the profile's stripe unit is the object's
     share of a chunk, rounded up to whole 4 KiB elements), so elements
     have the sizes of the paper's Table 5.1
  2. objects written through the Python binding (`loligo.Ioctx`), the
     cluster left to settle
  3. the victim chosen so that marking it out moves its own position only
     (CRUSH's `indep` choice can move a second position when a retry
     lands on an OSD another position drew in an earlier round: that
     shard would be copied whole, adding the same bytes to both codes);
     `loligo crush test` predicts the new mapping offline and the run
     checks it afterwards (`moved`)
  4. the page cache dropped, the victim killed (SIGKILL), marked down and
     out: the spare is backfilled, each of its shards rebuilt by the code's
     plan
  5. until every PG is active+clean: seconds from `osd out`; bytes the
     surviving OSD processes read from and wrote to the block layer
     (/proc/PID/io read_bytes and write_bytes: what reached the device,
     readahead included), beside the stores' own read-request counters,
     the plans' theory, and the shard bytes sent between OSDs
Every case runs `--repeats` times (RS and Zigzag alternate in order).
Offline, from `loligo ec plan`: the paper's Table 5.3 (blocks read per
failed block, in unpadded stripes), Table 5.2 (optimal against basic
construction) and aggressive against conservative coalescing (Fig. 5.6);
the code `zigzag-agg` runs Fig. 5.6 in the cluster (the pool's
read_coalesce aggressive).

Writes OUT/results.csv, OUT/plans.json, OUT/summary.json, OUT/*.png and
OUT/RESULTS.md (via summarize.py).
"""
import argparse
import csv
import json
import os
import re
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
sys.path.insert(0, os.path.join(HERE, ".."))
from lib import run  # noqa: E402

# The paper's Table 5.1: (k, r) -> duplication factors evaluated, the
# starred one (an optimal construction exists) first where there is one.
TABLE_5_1 = {(6, 2): [1, 2, 3], (6, 3): [2, 1, 3], (8, 2): [2, 1, 3], (8, 3): [3, 2, 4],
             (8, 4): [3, 2, 4], (10, 3): [4, 2, 3, 5], (10, 4): [4, 3, 5]}
STARRED = {(6, 3): 2, (8, 2): 2, (8, 3): 3, (8, 4): 3, (10, 3): 4, (10, 4): 4}
# The default run: each (k, r) with its starred s (k=6, r=2 has none: s=2,
# the paper's 64 MiB recovery-time figure), RS, basic and optimal Zigzag, LRC.
DEFAULT_S = {(6, 2): 2, **STARRED}
SCALE = [(4, 2, 1), (8, 2, 2)]
SCALE_MIB = 2048
SCALE_REPEATS = 4


def say(*a):
    print("[ec_recovery %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


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


def wait(conf, what, cond, limit, poll=0.2):
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
        time.sleep(poll)


def all_clean(s, up=None):
    pgs, o = s["pgs"], s["osdmap"]
    clean = pgs["by_state"].get("active+clean", 0) == pgs["total"]
    return clean and o["num_up_osds"] == (o["num_osds"] if up is None else up)


def counters(s):
    return {c["osd"]: c for c in s.get("osd_counters", [])}


def proc_io(data_dir, n):
    """Per OSD process: (read_bytes, write_bytes) from /proc/PID/io, the
    bytes its reads fetched from and its writes sent to the block layer."""
    out = {}
    for o in range(n):
        try:
            pid = open(os.path.join(data_dir, "osd.%d.pid" % o)).read().strip()
            f = dict(line.split(":", 1) for line in open("/proc/%s/io" % pid))
            out[o] = (int(f["read_bytes"]), int(f["write_bytes"]))
        except (OSError, KeyError, ValueError):
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
        # Longer than the OSDs' report interval (2 s): two equal polls
        # have a report between them.
        time.sleep(2.5)
        s = status(conf)
        now = {o: tuple(c[k] for k in keys) for o, c in counters(s).items()}
        if now == last or time.time() - t0 > limit:
            return s
        last = now


def delta(c0, c1):
    """Per counter of KEYS, how much all OSDs' counters grew from c0 to c1."""
    return {key: sum(c1[o][key] - c0.get(o, {}).get(key, 0) for o in c1) for key in KEYS}


KEYS = ["device_read_bytes", "device_reads", "rebuilt_shards", "rebuild_theory_bytes",
        "rebuild_fetched_bytes", "shard_bytes_sent", "recovery_bytes"]


class Code:
    """One code of a case: its profile flags, width and stripe grain."""

    def __init__(self, name, k, r, s):
        self.name, self.k, self.r, self.s = name, k, r, s
        self.plugin = {"rs": "rs", "zigzag": "zigzag", "zigzag-opt": "zigzag", "zigzag-agg": "zigzag",
                       "lrc": "lrc"}[name]
        # zigzag-agg: the basic construction, the pool's read_coalesce
        # aggressive (one read per shard from the first element needed to
        # the last) where the others plan conservatively.
        self.coalesce = "aggressive" if name == "zigzag-agg" else "conservative"
        # Pyramid: RS(k, r) with one global parity split into two local ones.
        self.width = k + r + (1 if name == "lrc" else 0)

    def flags(self):
        f = ["--plugin", self.plugin, "--k", str(self.k), "--m", str(self.r)]
        if self.plugin == "zigzag":
            f += ["--s", str(self.s)]
        if self.plugin == "lrc":
            f += ["--l", "2"]
        return f

    def plan(self, object_size, coalesce="conservative"):
        f = self.flags()
        if self.name == "zigzag-opt":
            f += ["--construction", "optimal"]
        return plan(f + ["--object-size", str(object_size), "--coalesce", coalesce])

    def unit(self, object_size):
        """The paper's layout: one stripe per object, elements whole 4 KiB
        sectors (the chunk is the object's share rounded up)."""
        rows = self.plan(object_size)["rows"]
        grain = rows * 4096
        share = -(-object_size // self.k)
        return -(-share // grain) * grain, rows


def start(code, n, pgs, obj_mib, objects, osd_size, unit):
    """A fresh cluster of n OSDs with an EC pool `ec` of `pgs` PGs holding
    `objects` objects of `obj_mib` MiB. Returns (tmp, data dir, conf)."""
    tmp = tempfile.mkdtemp(prefix="loligo-ecrec.")
    data = os.path.join(tmp, "c")
    conf = os.path.join(data, "loligo.conf")
    try:
        fill(code, pgs, obj_mib, objects, osd_size, n, unit, data, conf)
    except BaseException:
        stop(data, tmp)
        raise
    return tmp, data, conf


def fill(code, pgs, obj_mib, objects, osd_size, n, unit, data, conf):
    run("up", "--detach", "--osds", str(n), "--pg-num", "1", "--osd-size", str(osd_size),
        "--data-dir", data)
    wait(conf, "all up", all_clean, 120)
    prof = ["ec-profile", "set", "p"] + code.flags()
    if code.name == "zigzag-opt":
        prof.append("--optimal")
    if unit:
        prof += ["--stripe-unit", str(unit)]
    run(*prof, conf=conf)
    run("pool", "create", "ec", "--pg-num", str(pgs), "--erasure", "p", conf=conf)
    if code.coalesce != "conservative":
        run("pool", "set", "ec", "read_coalesce", code.coalesce, conf=conf)
    # Only the measured pool: the replicated pools `up` makes would each
    # re-peer when the victim goes out and wait out its read leases, and
    # the time until every PG is clean would be theirs, not the rebuild's.
    for pool in run("pool", "ls", conf=conf).split():
        if pool != "ec":
            run("pool", "rm", pool, pool, conf=conf)
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


def acting(conf, obj="obj0"):
    return json.loads(run("osd", "map", "ec", obj, "--json", conf=conf))["acting"]


def predicted_out(conf, tmp, width, victim):
    """CRUSH's mapping of the pool's one PG with `victim` out, offline
    (`loligo crush test` on the cluster's map, x = PG 0 of the pool)."""
    path = os.path.join(tmp, "crush.json")
    if not os.path.exists(path):
        run("crush", "get", "-o", path, conf=conf)
    dump = run("osd", "dump", conf=conf)
    m = re.search(r"^pool (\d+) 'ec' .* crush_rule (\d+)", dump, re.M)
    if not m:
        raise RuntimeError("pool 'ec' not in osd dump")
    pool, rule = m.group(1), m.group(2)
    args = ["crush", "test", "-i", path, "--rule", rule, "--num-rep", str(width),
            "--x", "0", "--pool-id", pool, "--show-mappings"]
    if victim is not None:
        args += ["--weight", str(victim), "0"]
    line = run(*args).strip().splitlines()[-1]
    return json.loads(line[line.index("["):])


def choose_victim(conf, tmp, code, kind, first=()):
    """A member at a data position (not the primary's) or a parity
    position whose going out moves no other position, if there is one
    (else the one that moves fewest); the positions `first` are tried
    first, in their order."""
    now = acting(conf)
    if predicted_out(conf, tmp, code.width, None) != now:
        raise RuntimeError("crush test does not reproduce the PG's mapping %s" % now)
    positions = list(range(1, code.k) if kind == "data" else range(code.k, code.width))
    positions = [p for p in first if p in positions] + [p for p in positions if p not in first]
    best = None
    for pos in positions:
        after = predicted_out(conf, tmp, code.width, now[pos])
        moved = [i for i in range(code.width) if after[i] != now[i]]
        if best is None or len(moved) < len(best[2]):
            best = (now[pos], pos, moved)
        if moved == [pos]:
            break
    return best


def one(code, obj_mib, total_mib, kind, layout, first=()):
    n = code.width + 1
    objects = max(1, total_mib // obj_mib)
    obj = obj_mib << 20
    unit, rows = code.unit(obj) if layout == "paper" else (None, code.plan(obj)["rows"])
    # One PG: every OSD holds a shard of every object.
    osd_size = max(256 << 20, 3 * (unit or obj // code.k + (1 << 20)) * objects)
    tmp, data, conf = start(code, n, 1, obj_mib, objects, osd_size, unit)
    try:
        before = settle(conf, KEYS)
        c0 = counters(before)
        victim, position, predicted = choose_victim(conf, tmp, code, kind, first)
        was = acting(conf)
        dropped = drop_caches()
        p0 = proc_io(data, n)
        t0 = fail(conf, data, victim, n)

        # Done once every object's lost shard is rebuilt and every PG is
        # clean again (a status from before the out may still say clean).
        def done(x):
            c = counters(x)
            rebuilt = sum(c[o]["rebuilt_shards"] - c0.get(o, {}).get("rebuilt_shards", 0) for o in c)
            return rebuilt >= objects and all_clean(x, up=n - 1)
        wait(conf, "clean after out", done, 1800, poll=0.05)
        secs = time.time() - t0
        p1 = proc_io(data, n)
        after = settle(conf, KEYS)
        c1 = counters(after)
        d = delta(c0, c1)
        now = acting(conf)
        moved = [i for i in range(code.width) if now[i] != was[i]]
        surv = [o for o in p1 if o != victim and o in p0]
        shard = unit if unit else -(-obj // code.k)
        row = {
            "code": code.name, "k": code.k, "r": code.r, "s": code.s if code.plugin == "zigzag" else 0,
            "layout": layout, "unit": unit or 0, "rows": rows,
            "element_kib": round((unit or 0) / rows / 1024, 1),
            "object_mib": obj_mib, "objects": objects, "victim": victim, "lost": kind,
            "position": position, "moved": len(moved), "predicted_moved": len(predicted),
            "recovery_s": round(secs, 3),
            "rebuilt_shards": d["rebuilt_shards"],
            "theory_bytes": d["rebuild_theory_bytes"],
            "dev_read_bytes": sum(p1[o][0] - p0[o][0] for o in surv),
            "dev_write_bytes": sum(p1[o][1] - p0[o][1] for o in surv),
            "expected_write_bytes": objects * shard,
            "store_read_bytes": d["device_read_bytes"],
            "store_reads": d["device_reads"],
            "fetched_bytes": d["rebuild_fetched_bytes"],
            "net_bytes": d["shard_bytes_sent"] + d["recovery_bytes"],
            "caches_dropped": int(dropped),
        }
        say("%s k=%d r=%d s=%d %d MiB x %d, %s shard (pos %d, %d moved) lost: %.2fs, dev read %.1f MiB "
            "(store %.1f, theory %.1f), written %.1f MiB" % (
                code.name, code.k, code.r, row["s"], obj_mib, objects, kind, position, len(moved), secs,
                row["dev_read_bytes"] / 2**20, row["store_read_bytes"] / 2**20,
                row["theory_bytes"] / 2**20, row["dev_write_bytes"] / 2**20))
        return row
    finally:
        stop(data, tmp)


def scale_one(plugin, k, r, s, pgs, obj_mib, total_mib):
    """One failure in a pool of many PGs: the failed OSD holds data
    shards in some PGs and parity shards in others (about k : r), and
    every PG it was in backfills at once. Seconds from `osd out` to all
    PGs active+clean, with the stores' device reads beside the plans'
    theory."""
    code = Code(plugin, k, r, s)
    n = k + r + 1
    objects = max(1, total_mib // obj_mib)
    osd_size = max(1 << 30, 3 * total_mib * (1 << 20) // n)
    tmp, data, conf = start(code, n, pgs, obj_mib, objects, osd_size, None)
    try:
        c0 = counters(settle(conf, KEYS))
        victim = acting(conf)[1]
        drop_caches()
        p0 = proc_io(data, n)
        t0 = fail(conf, data, victim, n)
        # A status from before the out may still say clean.
        try:
            wait(conf, "recovery start", lambda x: not all_clean(x, up=n - 1), 10)
        except RuntimeError:
            pass
        wait(conf, "clean after out", lambda x: all_clean(x, up=n - 1), 1800)
        secs = time.time() - t0
        p1 = proc_io(data, n)
        c1 = counters(settle(conf, KEYS))
        d = delta(c0, c1)
        row = {"plugin": plugin, "k": k, "r": r, "s": s if plugin == "zigzag" else 0, "pgs": pgs,
               "object_mib": obj_mib, "objects": objects, "recovery_s": round(secs, 3),
               "rebuilt_shards": d["rebuilt_shards"], "theory_bytes": d["rebuild_theory_bytes"],
               "dev_read_bytes": sum(p1[o][0] - p0[o][0] for o in p1 if o != victim and o in p0),
               "store_read_bytes": d["device_read_bytes"],
               "net_bytes": d["shard_bytes_sent"] + d["recovery_bytes"]}
        say("scale %s k=%d r=%d, %d PGs, %d x %d MiB: %.2fs, %d shards, dev read %.1f MiB (theory %.1f)" % (
            plugin, k, r, pgs, objects, obj_mib, secs, row["rebuilt_shards"],
            row["dev_read_bytes"] / 2**20, row["theory_bytes"] / 2**20))
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
    except (RuntimeError, loligo.Error) as e:
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


def offline(sizes):
    rows = []
    # Table 5.3: (n, k, s) of the paper; blocks read per failed block. The
    # paper's unit is the unpadded block: an object that fills its stripe
    # exactly (k x rows elements of 4 KiB). Beside it, a 4 MiB object's
    # plan per padded chunk (its last data chunk partly empty, so read
    # less of): not the paper's unit.
    for n, k, s in [(8, 6, 1), (9, 6, 1), (10, 8, 1), (11, 8, 2), (12, 8, 2), (13, 10, 2),
                    (14, 10, 3)]:
        r = n - k
        zf = ["--plugin", "zigzag", "--k", str(k), "--m", str(r), "--s", str(s)]
        rows_z = plan(zf)["rows"]
        zz = plan(zf + ["--object-size", str(k * rows_z * 4096)])
        z4 = plan(zf)
        lf = ["--plugin", "lrc", "--k", str(k), "--m", str(r), "--l", "2"]
        lrc = plan(lf + ["--object-size", str(k * 4096 * 64)])
        rows.append({"table": "5.3", "n": n, "k": k, "s": s, "rs": k,
                     "zigzag": round(zz["avg_bytes_read"] / zz["chunk_size"], 2),
                     "zigzag_4mib_padded": round(z4["avg_bytes_read"] / z4["chunk_size"], 2),
                     "pyramid": round(lrc["avg_bytes_read"] / lrc["chunk_size"], 2),
                     "pyramid_normalized": round(lrc["avg_bytes_read"] / lrc["chunk_size"]
                                                 * (n + 1) / n, 2)})
    # Table 5.2 and Fig. 5.6: plan bytes read against RS's, basic and
    # optimal construction, conservative and aggressive coalescing.
    for (k, r), ss in sorted(TABLE_5_1.items()):
        for s in ss:
            for mib in sizes:
                for cons in (["basic", "optimal"] if STARRED.get((k, r)) == s else ["basic"]):
                    for co in ["conservative", "aggressive"]:
                        zz = plan(["--plugin", "zigzag", "--k", str(k), "--m", str(r), "--s", str(s),
                                   "--construction", cons, "--object-size", str(mib << 20),
                                   "--coalesce", co])
                        rows.append({"table": "5.6", "k": k, "r": r, "s": s, "object_mib": mib,
                                     "construction": cons, "coalesce": co,
                                     "bytes_read_vs_rs": round(zz["bytes_read_vs_rs"], 4),
                                     "avg_ios": round(zz["avg_ios"], 1),
                                     "element_kib": round(zz["element_size"] / 1024, 1)})
    return rows


def cases(a):
    """The (code, k, r, s) of a run."""
    if a.configs:
        chosen = [tuple(int(x) for x in c.split(",")) for c in a.configs.split(";")]
    elif a.quick:
        chosen = [(8, 2, 2)]
    elif a.all:
        chosen = [(k, r, s) for (k, r), ss in sorted(TABLE_5_1.items()) for s in ss]
    else:
        chosen = [(k, r, s) for (k, r), s in sorted(DEFAULT_S.items())]
    codes = a.codes.split(",")
    out, seen = [], set()
    for k, r, s in chosen:
        for name in codes:
            if name == "zigzag-opt" and STARRED.get((k, r)) != s:
                continue
            # RS and LRC do not depend on s: one case per (k, r).
            key = (name, k, r, s if name.startswith("zigzag") else 0)
            if key not in seen:
                seen.add(key)
                out.append(Code(name, k, r, s if name.startswith("zigzag") else 1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="k=8 r=2 s=2, 16 MiB objects, RS and basic Zigzag, 3 repeats")
    ap.add_argument("--all", action="store_true", help="every row of the paper's Table 5.1")
    ap.add_argument("--configs", help="k,r,s[;k,r,s...] instead of the default set")
    ap.add_argument("--codes", default=None,
                    help="comma-separated: rs,zigzag,zigzag-opt,zigzag-agg (basic, aggressive coalescing),lrc")
    ap.add_argument("--sizes", default=None, help="object sizes in MiB, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lost", default="data,parity", help="kinds of shard lost: data,parity")
    ap.add_argument("--data-positions", type=lambda s: [int(x) for x in s.split(",")], default=[],
                    help="data positions to try first, in order, for the shard lost (the first whose "
                         "going out moves no other position is lost)")
    ap.add_argument("--total-mib", type=int, default=None, help="data per run (MiB)")
    ap.add_argument("--layout", choices=["paper", "default"], default="paper",
                    help="paper: one stripe per object (Table 5.1's elements); default: the pool's default stripe unit")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--append", action="store_true", help="keep results.csv's rows and add to them")
    ap.add_argument("--scale", action="store_true",
                    help="only the many-PG runs (out/scale.csv), then summarize")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.scale:
        scale(a.out)
        subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), a.out], check=True)
        return
    if a.codes is None:
        a.codes = "rs,zigzag" if a.quick else "rs,zigzag,zigzag-opt,lrc"
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else ([16] if a.quick else [4, 16, 64])
    total = a.total_mib or (512 if a.quick else 1024)
    path = os.path.join(a.out, "results.csv")
    if os.path.exists(path) and not a.append:
        os.remove(path)
    todo = cases(a)
    for rep in range(a.repeats):
        for mib in sizes:
            for kind in a.lost.split(","):
                # The order alternates between repeats.
                for code in (todo if rep % 2 == 0 else list(reversed(todo))):
                    row = retried(one, code, mib, total, kind, a.layout,
                                  a.data_positions if kind == "data" else ())
                    row["repeat"] = rep
                    append_row(path, row)
    plans = offline([4, 16, 64])
    with open(os.path.join(a.out, "plans.json"), "w") as f:
        json.dump(plans, f, indent=1)
    subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), a.out], check=True)


if __name__ == "__main__":
    main()
