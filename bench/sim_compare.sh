#!/usr/bin/env bash
# Two kvsim builds, run in turns on one core: request lifecycles/s of the
# same sweep, best and median of each, and the median (min-max) of the
# per-pair ratio new/old. On a machine whose speed drifts from run to run,
# the per-pair ratio is what compares the builds.
# (Builds before the kvconn.sweep schema print the totals at the top level.)
# Usage: bench/sim_compare.sh OLD_KVSIM NEW_KVSIM [rounds (21)]
#   (env STEADY_SEEDS, default 1..60; FAULT_SEEDS, default 1..500)
# e.g. git worktree add /tmp/old <rev> && (cd /tmp/old && cmake --preset prod &&
#      cmake --build --preset prod --target kvsim); bench/sim_compare.sh
#      /tmp/old/build-prod/bin/kvsim build-prod/bin/kvsim
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
A=$1; B=$2; N=${3:-21}
for k in "$A" "$B"; do [ -x "$k" ] || { echo "bench: $k is not an executable" >&2; exit 1; }; done
rate() { taskset -c 0 "$1" sweep $2 --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('totals', d)['requests_per_s'])"; }
printf '| workload | old: best / median lifecycles/s | new: best / median | per-pair ratio, median (min-max) |\n'
printf '| --- | --- | --- | --- |\n'
for w in "steady:--workload steady --seeds ${STEADY_SEEDS:-1..60}" "faults:--seeds ${FAULT_SEEDS:-1..500}"; do
  name=${w%%:*}; args=${w#*:}; a=(); b=()
  for _ in $(seq "$N"); do a+=("$(rate "$A" "$args")"); b+=("$(rate "$B" "$args")"); done
  python3 - "$name" "${a[*]}" "${b[*]}" <<'PY'
import statistics as st, sys
name, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
r = [y / x for x, y in zip(a, b)]
print(f"| {name} | {max(a):,.0f} / {st.median(a):,.0f} | {max(b):,.0f} / {st.median(b):,.0f} | "
      f"{st.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |")
PY
done
