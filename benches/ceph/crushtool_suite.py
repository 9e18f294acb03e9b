#!/usr/bin/env python3
"""Run Ceph's own crushtool test suite against `loligo crush test`.

Ceph's tests for crushtool are cram files (`src/test/cli/crushtool/*.t` in a
Ceph source tree): shell commands after "  $ ", their expected output after
them. This script takes every `crushtool -i MAP --test ...` command there,
runs `loligo crush test` with the same arguments on the same map (text maps
as they are; binary maps decompiled with the installed `crushtool -d`), and
compares the output with the expected lines. Commands Loligo does not
offer (building, reweighting, reclassifying maps...) are counted, not run.

    git clone --depth 1 https://github.com/ceph/ceph /tmp/ceph
    python3 benches/ceph/crushtool_suite.py /tmp/ceph/src/test/cli/crushtool \
        --loligo target/release/loligo [--show-diffs]

Needs Python 3 and, for binary maps, crushtool (apt-get install ceph-base).
Writes a one-line summary per file and a total; exits 1 if any compared
command differs.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile


def parse_cram(path):
    """[(command, [expected lines])] in file order."""
    cmds = []
    cur = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("  $ "):
                cur = [line[4:], []]
                cmds.append(cur)
            elif line.startswith("  > ") and cur is not None and not cur[1]:
                cur[0] += "\n" + line[4:]
            elif line.startswith("  ") and cur is not None:
                cur[1].append(line[2:])
            else:
                cur = None
    return cmds


def expand(word, env):
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), word)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("testdir")
    ap.add_argument("--loligo", default="target/release/loligo")
    ap.add_argument("--show-diffs", action="store_true")
    a = ap.parse_args()
    totals = {"match": 0, "differ": 0, "unsupported": 0, "not compared": 0}
    tmp = tempfile.mkdtemp(prefix="loligo-crushsuite-")
    for name in sorted(os.listdir(a.testdir)):
        if not name.endswith(".t"):
            continue
        env = {"TESTDIR": a.testdir}
        compiled = {}  # binary map path -> text source
        counts = {k: 0 for k in totals}
        for cmd, expected in parse_cram(os.path.join(a.testdir, name)):
            m = re.fullmatch(r"(\w+)=(\S*)", cmd.strip())
            if m:
                env[m.group(1)] = expand(m.group(2), env)
                continue
            try:
                words = [expand(w, env) for w in shlex.split(cmd)]
            except ValueError:
                continue
            if not words or words[0] != "crushtool":
                continue
            if "-c" in words and "-o" in words and "--test" not in words:
                src = words[words.index("-c") + 1]
                compiled[words[words.index("-o") + 1]] = src
                continue
            if "--test" not in words or "-i" not in words:
                counts["unsupported"] += 1
                continue
            if any(c in cmd for c in "|><;&`") or any(
                e.endswith(("(re)", "(glob)", "(esc)")) for e in expected
            ):
                counts["not compared"] += 1
                continue
            i = words.index("-i")
            mp = words[i + 1]
            args = words[1:i] + words[i + 2:]
            text = compiled.get(mp)
            if text is None:
                text = os.path.join(tmp, os.path.basename(mp) + ".txt")
                d = subprocess.run(["crushtool", "-d", mp, "-o", text], capture_output=True)
                if d.returncode != 0:
                    counts["not compared"] += 1
                    continue
            r = subprocess.run([a.loligo, "crush", "test", "-i", text] + args,
                               capture_output=True, text=True)
            if r.returncode == 2 and "unknown test argument" in r.stderr:
                counts["unsupported"] += 1
                continue
            got = (r.stderr + r.stdout).splitlines()
            want = [e for e in expected if not re.fullmatch(r"\[\d+\]", e)]
            if got == want:
                counts["match"] += 1
            else:
                counts["differ"] += 1
                if a.show_diffs:
                    first = next((k for k, (x, y) in enumerate(zip(got, want)) if x != y),
                                 min(len(got), len(want)))
                    print(f"  {name}: {cmd}\n    line {first}: got {got[first:first + 1]} "
                          f"want {want[first:first + 1]} ({len(got)} vs {len(want)} lines)")
        if any(counts.values()):
            print(f"{name}: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
        for k, v in counts.items():
            totals[k] += v
    print("total: " + ", ".join(f"{v} {k}" for k, v in totals.items()))
    sys.exit(1 if totals["differ"] else 0)


if __name__ == "__main__":
    main()
