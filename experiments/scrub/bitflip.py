#!/usr/bin/env python3
"""One flipped byte under valid checksums, found and mended: Loligo and
Ceph 16.2 through their own operator tools, one after the other.

On a fresh 3-OSD cluster with a size-3 pool, a 1 MiB object is written;
one replica's OSD is stopped and one byte of its copy is changed with the
store tool (Loligo: `loligo store set-bytes`; Ceph: `ceph-objectstore-tool
... get-bytes`, the byte flipped, `set-bytes`), so the store's own
checksums still pass and only a digest comparison can tell; the OSD is
started again. Then, timed from the command to the PG's deep-scrub stamp
moving:

  1. `pg deep-scrub PG`, and what `list-inconsistent-obj PG` reports
     (the object, the OSD, the error kinds, the authoritative copy);
  2. `pg repair PG`;
  3. `pg deep-scrub PG` again: nothing inconsistent left;
  4. the object read back whole and compared with what was written.

Writes OUT/bitflip.csv (system, step, seconds, detail). Usage:

  bitflip.py loligo --bin target/release/loligo --out OUT
  bitflip.py ceph --lab benches/ceph/lab.sh --out OUT   (the lab is up)
"""
import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

OFFSET = 1000
SIZE = 1 << 20


def say(*a):
    print("[bitflip %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def wait(cond, limit, what):
    t0 = time.time()
    while time.time() - t0 < limit:
        if cond():
            return
        time.sleep(0.2)
    raise RuntimeError("%s not reached in %ds" % (what, limit))


def flipped(data):
    """`data`'s byte at OFFSET with one bit changed, as a file's bytes."""
    return bytes([data[OFFSET] ^ 0x04])


class Loligo:
    name = "loligo"

    def __init__(self, binary, folder):
        self.b, self.dir = binary, os.path.join(folder, "c")
        self.conf = os.path.join(self.dir, "loligo.conf")
        self.folder = folder
        run(self.b, "up", "--detach", "--insecure", "--osds", "3", "--pg-num", "16",
            "--osd-size", str(1 << 30), "--data-dir", self.dir)
        self.wait_clean()

    def cli(self, *args):
        return run(self.b, "-c", self.conf, *args)

    def wait_clean(self):
        def clean():
            s = json.loads(self.cli("status", "--json"))
            pgs, o = s["pgs"], s["osdmap"]
            return (pgs["by_state"].get("active+clean", 0) == pgs["total"]
                    and o["num_up_osds"] == o["num_osds"])
        wait(clean, 300, "all clean")

    def put(self, path):
        self.cli("put", "a", path)

    def get(self, path):
        self.cli("get", "a", path)

    def placement(self):
        v = json.loads(self.cli("osd", "map", "default", "a", "--json"))
        return v["pgid"], v["acting"]

    def set_byte(self, osd, data, work):
        d = self.dir
        self.cli("stop", "osd.%d" % osd, "--data-dir", d)
        f = os.path.join(work, "byte")
        open(f, "wb").write(flipped(data))
        run(self.b, "store", "set-bytes", os.path.join(d, "osd.%d" % osd), "a", str(OFFSET), f)
        self.cli("start", "osd.%d" % osd, "--data-dir", d)
        self.wait_clean()

    def stamp(self, pg):
        rows = json.loads(self.cli("pg", "ls", "--json"))
        return next(r["last_deep_scrub_stamp"] for r in rows if r["pg"] == pg)

    def ask(self, verb, pg):
        self.cli("pg", verb, pg)

    def inconsistent(self, pg):
        return json.loads(self.cli("list-inconsistent-obj", pg, "--json"))["inconsistents"]

    def down(self):
        run(self.b, "down", "--data-dir", self.dir)
        shutil.rmtree(self.folder, ignore_errors=True)


class Ceph:
    name = "ceph"

    def __init__(self, lab):
        self.lab = lab
        self.data = os.environ.get("CEPHLAB_DATA", "/tmp/loligo-cephlab")
        os.environ.setdefault("CEPH_CONF", os.path.join(self.data, "ceph.conf"))
        self.ceph("osd", "pool", "create", "flip", "16", "16", "replicated")
        for var, val in [("size", "3"), ("min_size", "2"), ("pg_autoscale_mode", "off")]:
            self.ceph("osd", "pool", "set", "flip", var, val)
        self.ceph("osd", "pool", "application", "enable", "flip", "rados")
        self.wait_clean()

    def ceph(self, *args):
        return run("ceph", *args)

    def wait_clean(self):
        run("bash", self.lab, "wait-clean")

    def put(self, path):
        run("rados", "-p", "flip", "put", "a", path)

    def get(self, path):
        run("rados", "-p", "flip", "get", "a", path)

    def placement(self):
        v = json.loads(self.ceph("osd", "map", "flip", "a", "-f", "json"))
        return v["pgid"], v["acting"]

    def set_byte(self, osd, data, work):
        run("bash", self.lab, "stop-osd", str(osd))
        tool = ["ceph-objectstore-tool", "--no-mon-config", "--data-path",
                os.path.join(self.data, "osd.%d" % osd), "--pgid", self.pg, "a"]
        got = os.path.join(work, "got")
        run(*tool, "get-bytes", got)
        copy = bytearray(open(got, "rb").read())
        assert bytes(copy) == data, "osd.%d's copy is not what was written" % osd
        copy[OFFSET:OFFSET + 1] = flipped(data)
        f = os.path.join(work, "wrong")
        open(f, "wb").write(copy)
        run(*tool, "set-bytes", f)
        run("bash", self.lab, "start-osd", str(osd))
        self.wait_clean()

    def stamp(self, pg):
        return json.loads(self.ceph("pg", pg, "query", "-f", "json"))["info"]["stats"][
            "last_deep_scrub_stamp"]

    def ask(self, verb, pg):
        self.ceph("pg", verb, pg)

    def inconsistent(self, pg):
        out = run("rados", "list-inconsistent-obj", pg, "--format=json")
        return json.loads(out)["inconsistents"]

    def down(self):
        run("ceph", "osd", "pool", "rm", "flip", "flip", "--yes-i-really-really-mean-it")


def report(found, osd):
    """`list-inconsistent-obj`'s findings in a line: the object, the
    errors it names for `osd`'s copy, and the rule that chose the good
    copy (where the tool says one)."""
    if not found:
        return "nothing found"
    o = found[0]
    errs = [s for s in o.get("shards", []) if s.get("osd") == osd]
    kinds = errs[0].get("errors", []) if errs else []
    auth = o.get("selected_object_info", {})
    rule = auth.get("rule") if isinstance(auth, dict) else None
    return "%d object(s); %s on osd.%d: %s%s" % (
        len(found), o["object"]["name"], osd, "+".join(kinds) or "no error named",
        "; chosen by %s" % rule if rule else "")


def timed(sys_, verb, pg):
    before = sys_.stamp(pg)
    t0 = time.time()
    sys_.ask(verb, pg)
    wait(lambda: sys_.stamp(pg) != before, 600, "%s of %s" % (verb, pg))
    return round(time.time() - t0, 2)


def flip_run(sys_, out):
    work = tempfile.mkdtemp(prefix="bitflip.")
    data = random.Random(7).randbytes(SIZE)
    src = os.path.join(work, "a.bin")
    open(src, "wb").write(data)
    sys_.put(src)
    sys_.wait_clean()
    sys_.pg, acting = sys_.placement()
    pg, replica = sys_.pg, acting[1]
    say("%s: pg %s on %s; changing one byte of osd.%d's copy" % (sys_.name, pg, acting, replica))
    sys_.set_byte(replica, data, work)
    rows = []
    s = timed(sys_, "deep-scrub", pg)
    found = sys_.inconsistent(pg)
    rows.append(("deep-scrub", s, report(found, replica)))
    s = timed(sys_, "repair", pg)
    rows.append(("repair", s, "%d inconsistent after" % len(sys_.inconsistent(pg))))
    s = timed(sys_, "deep-scrub", pg)
    rows.append(("deep-scrub again", s, "%d inconsistent" % len(sys_.inconsistent(pg))))
    back = os.path.join(work, "back.bin")
    sys_.get(back)
    rows.append(("read back", "", "equal" if open(back, "rb").read() == data else "DIFFERENT"))
    shutil.rmtree(work, ignore_errors=True)
    for r in rows:
        say("%s: %s %ss: %s" % (sys_.name, *r))
    with open(out, "a", newline="") as f:
        w = csv.writer(f)
        for r in rows:
            w.writerow((sys_.name, *r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=["loligo", "ceph"])
    ap.add_argument("--bin")
    ap.add_argument("--lab")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = os.path.join(a.out, "bitflip.csv")
    if not os.path.exists(out):
        open(out, "w").write("system,step,seconds,detail\n")
    if a.system == "loligo":
        folder = tempfile.mkdtemp(prefix="loligo-bitflip.")
        sys_ = Loligo(a.bin, folder)
    else:
        sys_ = Ceph(a.lab)
    try:
        flip_run(sys_, out)
    finally:
        sys_.down()


if __name__ == "__main__":
    main()
