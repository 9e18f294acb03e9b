#!/usr/bin/env bash
# Re-run Ceph's crushtool and osdmaptool on the sources of every test case and
# rewrite (or, with --check, compare) the expected outputs. Needs crushtool and
# osdmaptool on PATH (Debian: apt-get install ceph-base).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
check=0
[ "${1:-}" = "--check" ] && check=1
for tool in crushtool osdmaptool; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install ceph-base)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

# out NAME FILE: compare or install a freshly made output.
out() {
    local made="$1" file="$2"
    if [ "$check" = 1 ]; then
        if ! cmp -s "$made" "$file"; then
            echo "differs: ${file#"$here"/}"
            bad=1
        fi
    else
        cp "$made" "$file"
    fi
}

for case in "$here"/crush/*/; do
    case="${case%/}"
    crushtool -c "$case/map.txt" -o "$tmp/map.bin"
    crushtool -i "$tmp/map.bin" --dump -f json-pretty >"$tmp/map.json"
    : >"$tmp/mappings.txt"
    while read -r line; do
        # shellcheck disable=SC2086 # the args line is a word list on purpose
        crushtool -i "$tmp/map.bin" $line >>"$tmp/mappings.txt"
    done <"$case/args"
    out "$tmp/map.bin" "$case/map.bin"
    out "$tmp/map.json" "$case/map.json"
    out "$tmp/mappings.txt" "$case/mappings.txt"
done

for case in "$here"/placement/*/; do
    case="${case%/}"
    pool=$(sed -n 's/.*"pool_id": \([0-9]*\).*/\1/p' "$case/case.json")
    args=$(cat "$case/args")
    : >"$tmp/objects.txt"
    # objects.txt holds the tool's own lines; the name is between the quotes.
    while read -r name; do
        # shellcheck disable=SC2086
        osdmaptool "$case/osdmap.bin" $args --test-map-object "$name" --pool "$pool" 2>/dev/null \
            | grep "^ object" >>"$tmp/objects.txt"
    done < <(sed -n "s/^ object '\([^']*\)'.*/\1/p" "$case/objects.txt")
    # shellcheck disable=SC2086
    osdmaptool "$case/osdmap.bin" $args --test-map-pgs-dump-all --pool "$pool" 2>/dev/null \
        | grep -E "^[0-9]+\.[0-9a-f]+ raw" >"$tmp/pgs.txt"
    osdmaptool "$case/osdmap.bin" --export-crush "$tmp/crush.bin" >/dev/null 2>&1
    crushtool -d "$tmp/crush.bin" -o "$tmp/crush.txt"
    # pool.txt also holds creation times: only its pool line is compared.
    osdmaptool "$case/osdmap.bin" --dump plain 2>/dev/null | grep "^pool " >"$tmp/pool.line"
    grep "^pool " "$case/pool.txt" >"$tmp/pool.want"
    out "$tmp/pool.line" "$tmp/pool.want"
    out "$tmp/objects.txt" "$case/objects.txt"
    out "$tmp/pgs.txt" "$case/pgs.txt"
    out "$tmp/crush.txt" "$case/crush.txt"
done

if [ "$check" = 1 ]; then
    [ "$bad" = 0 ] && echo "every output matches the installed tools" || exit 1
fi
