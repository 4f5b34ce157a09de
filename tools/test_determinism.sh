#!/usr/bin/env bash
# Determinism across build types and compilers: the demo's scenarios must
# give the same trace hashes from the gcc, clang, ASan+UBSan and production
# builds (the first three scenarios: the fourth switches a bug on, which a
# production build compiles out).
set -uo pipefail
cd "$(dirname "$0")/.."
ref=""
for b in build build-clang build-asan build-prod; do
  [ -x "$b/bin/kvdemo" ] || { echo "determinism: $b/bin/kvdemo missing" >&2; exit 1; }
  h=$("$b/bin/kvdemo" | grep -o 'trace hash [0-9a-f]*' | head -3 | tr '\n' ' ')
  [ -n "$h" ] || { echo "determinism: no hashes from $b" >&2; exit 1; }
  echo "  $b: $h"
  if [ -z "$ref" ]; then ref=$h
  elif [ "$h" != "$ref" ]; then echo "determinism: FAILED — $b differs" >&2; exit 1; fi
done
echo "determinism: ok (same trace hashes in 4 builds)"
