#!/usr/bin/env bash
# Runs every test suite in every test build, then the cross-build checks.
# Ends with one summary line "suites: N passed, N failed", then, for each
# failed suite, its name and the last lines it printed (CI shows only the
# tail of the whole output).
set -uo pipefail
cd "$(dirname "$0")/.."
pass=0; fail=0; failed=()
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
# suite NAME CMD...: runs CMD, its output to the terminal and to a log.
suite() {
  local name=$1; shift
  local log="$logs/$((pass + fail)).log"
  echo "== $name"
  "$@" 2>&1 | tee "$log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$name|$log"); fi
}
in_dir() { (cd "$1" && shift && "$@"); }
for b in build build-asan build-clang; do
  suite "ctest in $b" in_dir "$b" ctest --output-on-failure -j 2
done
# RDMA (fake verbs) and CUDA (skips without a GPU) suites in their builds.
for b in build-rdma build-cuda; do
  [ -d "$b" ] || continue
  suite "ctest in $b (rdma/cuda suites)" in_dir "$b" ctest --output-on-failure -R 'test_(rdma_fake|rdma_kvt|cuda_hbm)'
done
# The threaded TCP path under TSan: three kvnode processes (Criterion cannot
# run under TSan; a report makes a process exit 66 and the script fail).
if [ -x build-tsan/bin/kvnode ]; then
  suite "tools/test_kvnode.sh under TSan (build-tsan)" \
    env KVNODE_BUILD=build-tsan KVNODE_REQUESTS=200 bash tools/test_kvnode.sh
fi
for t in tools/test_*.sh; do
  [ -e "$t" ] || continue
  suite "$t" bash "$t"
done
echo "suites: $pass passed, $fail failed"
for f in "${failed[@]}"; do
  echo "-- failed: ${f%%|*}; its last lines:"
  grep -v '^\[[0-9]*/[0-9]*\] ' "${f#*|}" | tail -15 | sed 's/^/   | /'
done
[ "$fail" -eq 0 ]
