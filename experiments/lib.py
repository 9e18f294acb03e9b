"""Python helpers the experiments share: running the loligo binary and
waiting for a cluster to settle. A script imports it after putting this
directory on its path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import lib

It only drives a running cluster through the CLI; it never starts or stops
one, and never reads or writes an experiment's output.
"""
import json
import os
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# The release binary every run.sh builds before its script starts.
B = os.path.join(ROOT, "target", "release", "loligo")


def run(*args, conf=None, check=True, env=None):
    """`loligo [-c conf] args...`: its stdout; with `check`, a nonzero exit
    raises with the command and everything it printed."""
    cmd = [B] + (["-c", conf] if conf else []) + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def status(conf):
    """The cluster's `status --json`, or {} while it does not answer."""
    out = run("status", "--json", conf=conf, check=False)
    try:
        return json.loads(out) if out else {}
    except ValueError:
        return {}


def all_clean(s, osds=None):
    """Every PG of status `s` active+clean and every OSD up (and, given
    `osds`, that many of them)."""
    pgs, o = s.get("pgs", {}), s.get("osdmap", {})
    if pgs.get("by_state", {}).get("active+clean", -1) != pgs.get("total"):
        return False
    if o.get("num_up_osds") != o.get("num_osds"):
        return False
    return osds is None or o.get("num_osds") == osds


def wait_clean(conf, limit=300, poll=0.5, osds=None):
    """Wait until `all_clean`; raise after `limit` seconds."""
    t0 = time.time()
    while time.time() - t0 < limit:
        if all_clean(status(conf), osds):
            return
        time.sleep(poll)
    raise RuntimeError("cluster of %s not clean in %ss" % (conf, limit))
