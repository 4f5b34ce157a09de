#!/usr/bin/env bash
# `make test-quick`: the quick tier, about a minute on two cores after the
# checked build. Every suite of the checked build (unit suites, the corpus
# replays with their bug switches, the mutant tests) and determinism on 50
# seeds of each workload: the same trace hashes from two sweeps, and from a
# run of its own for every tenth seed.
# `make test` runs all of this and much more (every build, every script).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
echo "== ctest in build"
(cd build && ctest --output-on-failure -j 2) || fail=1
for wl in faults steady load; do
  one=$(build/bin/kvsim sweep --workload "$wl" --seeds 1..50 --hashes)
  two=$(build/bin/kvsim sweep --workload "$wl" --seeds 1..50 --hashes)
  ok=1
  [ "$(printf '%s\n' "$one" | grep -c .)" -eq 50 ] && [ "$one" = "$two" ] || ok=0
  # the same hash again from a run of its own (kvsim run), for every tenth seed
  for s in 1 11 21 31 41; do
    h=$(build/bin/kvsim run --seed "$s" --workload "$wl" --trace-hash | sed -n 's/^trace hash //p')
    [ "$(printf '%s\n' "$one" | awk -v s="$s" '$1 == s { print $2 }')" = "$h" ] || ok=0
  done
  if [ "$ok" -eq 1 ]; then
    echo "== determinism: $wl seeds 1..50, two sweeps and single runs: same hashes"
  else
    echo "quick: $wl seeds 1..50: trace hashes differ between two sweeps or a single run (or are missing)" >&2
    fail=1
  fi
done
[ "$fail" -eq 0 ] && echo "quick tier: ok" || { echo "quick tier: FAILED" >&2; exit 1; }
