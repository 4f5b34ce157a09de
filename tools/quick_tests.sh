#!/usr/bin/env bash
# `make test-quick`: the quick tier, about a minute on two cores after the
# checked build. Every suite of the checked build (unit suites, the corpus
# replays with their bug switches, the mutant tests) and determinism on 50
# seeds of each workload: the same trace hashes from one job and from two.
# `make test` runs all of this and much more (every build, every script).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
echo "== ctest in build"
(cd build && ctest --output-on-failure -j 2) || fail=1
for wl in faults steady load; do
  one=$(build/bin/kvsim sweep --workload "$wl" --seeds 1..50 --hashes)
  two=$(build/bin/kvsim sweep --workload "$wl" --seeds 1..50 --hashes --jobs 2)
  if [ "$(printf '%s\n' "$one" | grep -c .)" -ne 50 ] || [ "$one" != "$two" ]; then
    echo "quick: $wl seeds 1..50: the trace hashes of one and two jobs differ (or are missing)" >&2
    fail=1
  else
    echo "== determinism: $wl seeds 1..50, one job and two: same hashes"
  fi
done
[ "$fail" -eq 0 ] && echo "quick tier: ok" || { echo "quick tier: FAILED" >&2; exit 1; }
