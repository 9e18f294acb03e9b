#!/usr/bin/env bash
# Build Loligo's container image (deploy/container/Containerfile): the
# binary linked statically with the gnu target's crt-static, then
# `buildah build` from scratch with the vfs storage driver and chroot
# isolation (no daemon, no registry, no root-only overlay mounts).
#
#   tools/image.sh [TAG]     # default tag: localhost/loligo:latest
#
# Needs buildah (Debian: apt-get install buildah). Prints the image id.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/loligo:latest}
if ! command -v buildah >/dev/null 2>&1; then
    echo "buildah not found: apt-get install -y buildah" >&2
    exit 1
fi
target=x86_64-unknown-linux-gnu
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$target" -p loligo-cli >&2
bin=target/$target/release/loligo
# A static binary has no interpreter: it runs on an empty root.
if file "$bin" | grep -q "dynamically linked"; then
    echo "$bin is not linked statically" >&2
    exit 1
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# (Without its debug info: a fifth of the size.)
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug -o "$ctx/loligo" "$bin"
else
    cp "$bin" "$ctx/loligo"
fi
cp deploy/container/Containerfile "$ctx/"
buildah --storage-driver vfs build --isolation chroot --quiet \
    -f "$ctx/Containerfile" -t "$tag" "$ctx"
