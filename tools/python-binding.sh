#!/usr/bin/env bash
# Build Loligo's Python binding (crates/python) into a wheel with maturin
# and install it into a virtualenv, with any PyPI packages named as
# arguments (boto3 for the S3 tests, matplotlib for experiments' plots).
# The virtualenv's interpreter is then VENV/bin/python.
#
#   bash tools/python-binding.sh [--release] [--venv DIR] [PACKAGE...]
#
# Exit status 3: PyPI could not give a package (the wheel is installed
# only if it was maturin's turn that passed); 4: no virtualenv can be made
# (Debian: apt-get install python3-venv).
# --release builds an optimised wheel (experiments); without it the wheel
# shares the dev build with `cargo test`. VENV defaults to target/pyenv;
# the wheel lands in target/wheels.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
venv="$ROOT/target/pyenv"
profile=()
pkgs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --release) profile=(--release) ;;
        --venv) venv="$2"; shift ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) pkgs+=("$1") ;;
    esac
    shift
done
# A virtualenv with pip (a half-made one, from a Python without venv
# support, is made again). Exit status 4: none can be made.
if [ ! -x "$venv/bin/pip" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" || { rm -rf "$venv"; exit 4; }
    [ -x "$venv/bin/pip" ] || { rm -rf "$venv"; exit 4; }
fi
# Any wheel installed before is taken out first, so a failure below
# never leaves an older build to be tested.
"$venv/bin/pip" uninstall -q -y loligo >/dev/null 2>&1 || true
# maturin (a Rust binary on PyPI) builds the wheel. Exit status 3: a
# package could not be had from PyPI.
if ! "$venv/bin/python" -c "import maturin" 2>/dev/null; then
    "$venv/bin/pip" install -q "maturin>=1.16,<2" || exit 3
fi
rm -rf "$ROOT/target/wheels"
"$venv/bin/maturin" build --quiet ${profile[@]+"${profile[@]}"} \
    -m "$ROOT/crates/python/Cargo.toml" --out "$ROOT/target/wheels" >&2
"$venv/bin/pip" install -q --force-reinstall --no-deps "$ROOT"/target/wheels/loligo-*.whl
"$venv/bin/python" -c "import loligo"
# The other packages, missing ones in one pip call so their pins agree
# (boto3 and awscli each pin botocore).
missing=()
for p in ${pkgs[@]+"${pkgs[@]}"}; do
    "$venv/bin/python" -c "import $p" 2>/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    "$venv/bin/pip" install -q "${missing[@]}" || exit 3
fi
