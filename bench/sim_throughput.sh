#!/usr/bin/env bash
# Simulator throughput on one core: events/s and request lifecycles/s of
# `kvsim sweep` (median of 3 runs) on two workloads:
#   faults  generated scenarios as CI sweeps them: 1-4 P and D, every
#           connector configuration, fault plans (about 12 requests each);
#   steady  P/D serving traffic without faults (sim_gen_steady: 256 requests
#           per scenario, each D batching tens at once);
# and peak RSS of a short sweep against a sweep of at least REQS request
# lifecycles (flat RSS = no growth with run count).
# Usage: bench/sim_throughput.sh [build-dir] [seeds]   (env REQS, default 1000000;
#        STEADY_SEEDS, default seeds/10)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; N=${2:-2000}; REQS=${REQS:-1000000}
K="$B/bin/kvsim"
[ -x "$K" ] || { echo "bench: build first ($K missing)" >&2; exit 1; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['$1'])"; }
ev=(); rq=(); per=0
for i in 1 2 3; do
  j=$(taskset -c 0 "$K" sweep --seeds "1..$N" --json)
  ev+=("$(echo "$j" | field events_per_s)"); rq+=("$(echo "$j" | field requests_per_s)")
  per=$(echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin)['totals']; print(d['requests']/d['runs'])")
  fper=$(echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin)['totals']; print(round(d['events']/d['requests'], 1))")
done
SN=${STEADY_SEEDS:-$(( N / 10 > 0 ? N / 10 : 1 ))}
sev=(); srq=(); sper=0
for i in 1 2 3; do
  j=$(taskset -c 0 "$K" sweep --workload steady --seeds "1..$SN" --json)
  sev+=("$(echo "$j" | field events_per_s)"); srq+=("$(echo "$j" | field requests_per_s)")
  sper=$(echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin)['totals']; print(round(d['events']/d['requests'], 1))")
done
med() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
big=$(python3 -c "import math; print(math.ceil($REQS / $per))")
rss() { /usr/bin/time -f '%M' taskset -c 0 "$K" sweep --seeds "1..$1" --json 2>&1 >/dev/null | tail -1; }
r1=$(rss 1000)
jb=$( { /usr/bin/time -f 'RSS %M' taskset -c 0 "$K" sweep --seeds "1..$big" --json; } 2>&1 || true) # a finding exits non-zero
r2=$(echo "$jb" | sed -n 's/^RSS //p'); reqs=$(echo "$jb" | grep -v '^RSS ' | field requests)
viol=$(echo "$jb" | grep -v '^RSS ' | field violations)
printf '| metric | value |\n|---|---|\n'
printf '| faults: scenarios per timed run | %s |\n' "$N"
printf '| faults: events/s (median of 3, one core) | %s |\n' "$(med "${ev[@]}")"
printf '| faults: request lifecycles/s (median of 3) | %s |\n' "$(med "${rq[@]}")"
printf '| faults: events per lifecycle | %s |\n' "$fper"
printf '| steady: scenarios per timed run (256 requests each) | %s |\n' "$SN"
printf '| steady: events/s (median of 3, one core) | %s |\n' "$(med "${sev[@]}")"
printf '| steady: request lifecycles/s (median of 3) | %s |\n' "$(med "${srq[@]}")"
printf '| steady: events per lifecycle | %s |\n' "$sper"
printf '| peak RSS, 1000 scenarios | %s KiB |\n' "$r1"
printf '| peak RSS, %s scenarios (%s request lifecycles, %s violations) | %s KiB |\n' "$big" "$reqs" "$viol" "$r2"
