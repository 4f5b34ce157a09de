#!/usr/bin/env bash
# Determinism across build types and compilers: the same scenarios give the
# same trace hashes from the gcc, clang, ASan+UBSan, production and
# profile-guided production builds.
#  - 200 generated seeds (kvsim sweep --hashes), all switches off, and 40
#    seeds of each other workload (steady, load);
#  - the demo's first three scenarios (the fourth switches a bug on, which a
#    production build compiles out).
set -uo pipefail
cd "$(dirname "$0")/.."
ref_demo=""; ref_seeds=""
for b in build build-clang build-asan build-prod build-pgo; do
  for exe in kvdemo kvsim; do
    [ -x "$b/bin/$exe" ] || { echo "determinism: $b/bin/$exe missing" >&2; exit 1; }
  done
  demo=$("$b/bin/kvdemo" | grep -o 'trace hash [0-9a-f]*' | head -3 | tr '\n' ' ')
  out=$("$b/bin/kvsim" sweep --seeds 1..200 --hashes)
  seeds=$(printf '%s\n' "$out" | sha256sum | cut -c1-16)
  n=$(printf '%s\n' "$out" | grep -c .)
  [ -n "$demo" ] && [ "$n" -eq 200 ] || { echo "determinism: no hashes from $b" >&2; exit 1; }
  for wl in steady load; do
    o=$("$b/bin/kvsim" sweep --workload $wl --seeds 1..40 --hashes)
    [ "$(printf '%s\n' "$o" | grep -c .)" -eq 40 ] || { echo "determinism: no $wl hashes from $b" >&2; exit 1; }
    seeds="$seeds $wl:$(printf '%s\n' "$o" | sha256sum | cut -c1-16)"
  done
  echo "  $b: demo [$demo] seeds [$seeds]"
  if [ -z "$ref_demo" ]; then ref_demo=$demo; ref_seeds=$seeds
  elif [ "$demo" != "$ref_demo" ] || [ "$seeds" != "$ref_seeds" ]; then
    echo "determinism: FAILED — $b differs from build" >&2; exit 1
  fi
done
echo "determinism: ok (same trace hashes in 5 builds)"
