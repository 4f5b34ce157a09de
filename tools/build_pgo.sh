#!/usr/bin/env bash
# The profile-guided production build (gcc), in build-pgo:
#   1. configure the `pgo` preset with KVCONN_PGO=generate, build kvsim;
#   2. train: kvsim sweeps of every workload, on seeds that no benchmark
#      or test measures (100001..), one process, so the profile is one
#      deterministic run of each;
#   3. reconfigure the same tree with KVCONN_PGO=use and build everything.
# A stale profile is removed first (gcc adds new counts to old files).
# Usage: tools/build_pgo.sh            (env JOBS, default nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-pgo; JOBS=${JOBS:-$(nproc)}
PROF="$PWD/$B/pgo-profile"
rm -rf "$PROF"
cmake --preset pgo -DKVCONN_PGO=generate -DKVCONN_PGO_DIR="$PROF" >/dev/null
cmake --build --preset pgo -j "$JOBS" --target kvsim
K="$B/bin/kvsim"
train() {
  echo "pgo: training: kvsim sweep $*"
  "$K" sweep --jobs 1 "$@" >/dev/null
}
train --seeds 100001..102000
train --workload steady --seeds 100001..100300
train --workload load --seeds 100001..100200
n=$(find "$PROF" -name '*.gcda' | wc -l)
[ "$n" -gt 0 ] || { echo "pgo: training wrote no profile under $PROF" >&2; exit 1; }
echo "pgo: $n profile files; rebuilding with them"
cmake --preset pgo -DKVCONN_PGO=use -DKVCONN_PGO_DIR="$PROF" >/dev/null
cmake --build --preset pgo -j "$JOBS"
