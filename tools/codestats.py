#!/usr/bin/env python3
"""The shape of the code, counted the same way every time.

    python3 tools/codestats.py            # a table
    python3 tools/codestats.py --json     # the same as JSON
    python3 tools/codestats.py --long 20  # and the 20 longest functions

Counts non-test Rust under crates/*/src (a `#[cfg(test)]` item and files
under tests/ or benches/ are left out): functions longer than 70, 100 and
200 lines, the largest files, assertions (`assert!`, `debug_assert!` and
their `_eq`/`_ne` forms), places that route PG effects (files with five or
more `Effect::Variant ... =>` match arms, tests included), comments that cite simulator
seed numbers, and commits whose subject is longer than 72 characters.

It reads rustfmt-formatted code: a function runs from its `fn` line to
the first line after it that closes a brace at the `fn` line's indent.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FN = re.compile(
    r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?"
    r"(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)"
)
ASSERT = re.compile(r"\b(debug_)?assert(_eq|_ne)?!")
ROUTE_ARM = re.compile(r"^\s*Effect::\w+.*=>")
SEED = re.compile(r"//.*\bseeds?\s+\d+", re.IGNORECASE)


def sources():
    crates = os.path.join(ROOT, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        for d, _, files in os.walk(src):
            for f in sorted(files):
                if f.endswith(".rs") and f != "tests.rs" and not f.endswith("_tests.rs"):
                    yield os.path.join(d, f)


def all_rust():
    """Every Rust file of the workspace, tests included."""
    for top in ("crates", "tests"):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x != "target"]
            for f in sorted(files):
                if f.endswith(".rs"):
                    yield os.path.join(d, f)


def without_tests(lines):
    """The lines of a file with its `#[cfg(test)]` items blanked."""
    out = list(lines)
    i = 0
    while i < len(out):
        if out[i].strip() == "#[cfg(test)]":
            indent = len(out[i]) - len(out[i].lstrip())
            j = i + 1
            # The item: to the line closing its brace at the same indent
            # (or a one-line item ending in `;`).
            while j < len(out):
                s = out[j]
                if s.rstrip().endswith(";") and j == i + 1:
                    break
                if s.startswith(" " * indent + "}") and len(s) - len(s.lstrip()) == indent:
                    break
                j += 1
            for k in range(i, min(j + 1, len(out))):
                out[k] = ""
            i = j + 1
        else:
            i += 1
    return out


def functions(path, lines):
    found = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m or line.rstrip().endswith(";"):
            continue
        indent = m.group(1)
        for j in range(i + 1, len(lines)):
            s = lines[j]
            if s.startswith(indent + "}") and not s.startswith(indent + " "):
                found.append((j - i + 1, m.group(8), os.path.relpath(path, ROOT), i + 1))
                break
    return found


def commits():
    try:
        log = subprocess.run(
            ["git", "-C", ROOT, "log", "--format=%s%x00%b%x01"],
            capture_output=True, text=True, check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    entries = [e for e in log.split("\x01") if e.strip()]
    subjects = [e.split("\x00")[0].strip() for e in entries]
    bodies = [e.split("\x00")[1].strip() if "\x00" in e else "" for e in entries]
    return {
        "commits": len(entries),
        "subject_over_72": sum(len(s) > 72 for s in subjects),
        "with_body": sum(bool(b) for b in bodies),
    }


def main():
    fns, files, asserts, routers, seeds = [], [], 0, [], 0
    for path in sources():
        with open(path, encoding="utf-8") as f:
            lines = without_tests(f.read().split("\n"))
        files.append((len(lines), os.path.relpath(path, ROOT)))
        fns += functions(path, lines)
        asserts += sum(len(ASSERT.findall(line)) for line in lines if not line.lstrip().startswith("//"))
        seeds += sum(1 for line in lines if SEED.search(line))
    for path in all_rust():
        with open(path, encoding="utf-8") as f:
            arms = sum(1 for line in f if ROUTE_ARM.match(line))
        if arms >= 5:
            routers.append((arms, os.path.relpath(path, ROOT)))
    fns.sort(reverse=True)
    files.sort(reverse=True)
    stats = {
        "functions": len(fns),
        "functions_over_70": sum(f[0] > 70 for f in fns),
        "functions_over_100": sum(f[0] > 100 for f in fns),
        "functions_over_200": sum(f[0] > 200 for f in fns),
        "largest_files": [{"lines": n, "file": p} for n, p in files[:5]],
        "assertions": asserts,
        "effect_routers": [{"arms": a, "file": p} for a, p in sorted(routers, reverse=True)],
        "seed_comments": seeds,
        "git": commits(),
    }
    long = 0
    if "--long" in sys.argv:
        long = int(sys.argv[sys.argv.index("--long") + 1])
    stats["longest_functions"] = [
        {"lines": n, "fn": name, "at": f"{p}:{line}"} for n, name, p, line in fns[:long]
    ]
    if "--json" in sys.argv:
        print(json.dumps(stats, indent=2))
        return
    print(f"functions (non-test)       {stats['functions']}")
    print(f"  over 70 / 100 / 200 lines {stats['functions_over_70']} / "
          f"{stats['functions_over_100']} / {stats['functions_over_200']}")
    for f in stats["largest_files"]:
        print(f"file                       {f['lines']:6}  {f['file']}")
    print(f"assertions                 {stats['assertions']}")
    for r in stats["effect_routers"]:
        print(f"routes effects             {r['arms']:6} arms  {r['file']}")
    print(f"comments citing seeds      {stats['seed_comments']}")
    g = stats["git"]
    if g:
        print(f"commits                    {g['commits']} ({g['subject_over_72']} subjects over 72, "
              f"{g['with_body']} with a body)")
    for f in stats["longest_functions"]:
        print(f"  {f['lines']:5}  {f['fn']}  {f['at']}")


if __name__ == "__main__":
    main()
