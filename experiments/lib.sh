# Shell helpers the experiments share (sourced; $B must name the loligo
# binary and `say` must be defined before `lol_wait` runs).

# The interpreter itself, not a version manager's shim (a shim is a shell
# script: polling through it every 0.2 s takes CPU from the daemons being
# measured).
PY=$(python3 -c 'import sys; print(sys.executable)')

# Seconds since the epoch, with fractions; seconds since $1.
now() { date +%s.%N; }
since() { "$PY" -c "print(round($(now) - $1, 2))"; }

# Wait until `cond` (a python expression over the status JSON: `s`,
# `pgs`, `clean` = active+clean PGs, `o` = the osdmap summary) holds on the
# cluster of config $1; print the seconds it took; fail after $2 seconds.
lol_wait() {
    local conf="$1" limit="$2" cond="$3" t0
    t0=$(now)
    while true; do
        if "$B" -c "$conf" status --json 2>/dev/null | "$PY" -c "
import json, sys
s = json.load(sys.stdin)
pgs = s['pgs']
clean = pgs['by_state'].get('active+clean', 0)
o = s['osdmap']
sys.exit(0 if ($cond) else 1)"; then
            since "$t0"
            return 0
        fi
        if "$PY" -c "import sys; sys.exit(0 if $(now) - $t0 > $limit else 1)"; then
            say "Loligo: condition not reached in ${limit}s: $cond"
            "$B" -c "$conf" status >&2 || true
            return 1
        fi
        sleep 0.2
    done
}

# Every PG active+clean and every OSD up.
ALL_CLEAN="clean == pgs['total'] and o['num_up_osds'] == o['num_osds']"
