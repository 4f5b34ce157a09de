#!/usr/bin/env bash
# Simulator throughput on one core: events/s and request lifecycles/s of
# `kvsim sweep` over generated scenarios (median of 3 runs), and peak RSS at
# two sweep lengths (flat RSS = no growth with run count).
# Usage: bench/sim_throughput.sh [build-dir] [seeds]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; N=${2:-2000}
K="$B/bin/kvsim"
[ -x "$K" ] || { echo "bench: build first ($K missing)" >&2; exit 1; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
ev=(); rq=()
for i in 1 2 3; do
  j=$(taskset -c 0 "$K" sweep --seeds "1..$N" --json)
  ev+=("$(echo "$j" | field events_per_s)"); rq+=("$(echo "$j" | field requests_per_s)")
done
med() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
rss() { /usr/bin/time -f '%M' taskset -c 0 "$K" sweep --seeds "1..$1" --json 2>&1 >/dev/null | tail -1; }
r1=$(rss $((N / 4))); r2=$(rss "$N")
printf '| metric | value |\n|---|---|\n'
printf '| scenarios per run | %s |\n' "$N"
printf '| events/s (median of 3, one core) | %s |\n' "$(med "${ev[@]}")"
printf '| request lifecycles/s (median of 3) | %s |\n' "$(med "${rq[@]}")"
printf '| peak RSS, %s scenarios | %s KiB |\n' "$((N / 4))" "$r1"
printf '| peak RSS, %s scenarios | %s KiB |\n' "$N" "$r2"
