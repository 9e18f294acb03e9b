#!/usr/bin/env bash
# Bytes the block device holding DIR has read and written since boot
# (/proc/diskstats, 512-byte sectors), as one JSON object:
#   bash benches/disk_bytes.sh DIR   ->  {"device": "vda", "read": N, "written": N}
# Two calls around a benchmark phase give what the phase cost the disk,
# which tells reads served by the device from reads served from memory.
# Prints {} where the device cannot be found (tmpfs, overlay, no /proc).
set -euo pipefail
dir="${1:?usage: disk_bytes.sh DIR}"
src="$(df --output=source "$dir" 2>/dev/null | tail -1)" || src=""
# (/dev/mapper/NAME and /dev/root are links to the kernel's name: dm-0.)
dev="$(basename "$(readlink -f "$src" 2>/dev/null || echo "$src")")"
out="$(awk -v d="$dev" '$3 == d { printf "{\"device\": \"%s\", \"read\": %.0f, \"written\": %.0f}\n", d, $6 * 512, $10 * 512; exit }' \
    /proc/diskstats 2>/dev/null)" || out=""
echo "${out:-{\}}"
