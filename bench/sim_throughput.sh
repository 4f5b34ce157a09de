#!/usr/bin/env bash
# Simulator throughput on one core: events/s and request lifecycles/s of
# `kvsim sweep` over generated scenarios (median of 3 runs), and peak RSS of
# a short sweep against a sweep of at least REQS request lifecycles (flat RSS
# = no growth with run count).
# Usage: bench/sim_throughput.sh [build-dir] [seeds]   (env REQS, default 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; N=${2:-2000}; REQS=${REQS:-1000000}
K="$B/bin/kvsim"
[ -x "$K" ] || { echo "bench: build first ($K missing)" >&2; exit 1; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
ev=(); rq=(); per=0
for i in 1 2 3; do
  j=$(taskset -c 0 "$K" sweep --seeds "1..$N" --json)
  ev+=("$(echo "$j" | field events_per_s)"); rq+=("$(echo "$j" | field requests_per_s)")
  per=$(echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['requests']/d['runs'])")
done
med() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
big=$(python3 -c "import math; print(math.ceil($REQS / $per))")
rss() { /usr/bin/time -f '%M' taskset -c 0 "$K" sweep --seeds "1..$1" --json 2>&1 >/dev/null | tail -1; }
r1=$(rss 1000)
jb=$( { /usr/bin/time -f 'RSS %M' taskset -c 0 "$K" sweep --seeds "1..$big" --json; } 2>&1 || true) # a finding exits non-zero
r2=$(echo "$jb" | sed -n 's/^RSS //p'); reqs=$(echo "$jb" | grep '^{' | field requests)
viol=$(echo "$jb" | grep '^{' | field violations)
printf '| metric | value |\n|---|---|\n'
printf '| scenarios per timed run | %s |\n' "$N"
printf '| events/s (median of 3, one core) | %s |\n' "$(med "${ev[@]}")"
printf '| request lifecycles/s (median of 3) | %s |\n' "$(med "${rq[@]}")"
printf '| peak RSS, 1000 scenarios | %s KiB |\n' "$r1"
printf '| peak RSS, %s scenarios (%s request lifecycles, %s violations) | %s KiB |\n' "$big" "$reqs" "$viol" "$r2"
