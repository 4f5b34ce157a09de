#!/usr/bin/env bash
# Runs every test suite in every test build, then the cross-build checks.
# Ends with one summary line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
pass=0; fail=0
for b in build build-asan build-clang; do
  echo "== ctest in $b"
  if (cd "$b" && ctest --output-on-failure -j 2); then pass=$((pass+1)); else fail=$((fail+1)); fi
done
for t in tools/test_*.sh; do
  [ -e "$t" ] || continue
  echo "== $t"
  if bash "$t"; then pass=$((pass+1)); else fail=$((fail+1)); fi
done
echo "suites: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
