#!/usr/bin/env bash
# tools/cflite_triage.sh ARTIFACTS OUT [--bug NAME]...
#
# From fuzzer crash artifacts to what a reviewer opens. CI fuzzing
# (.github/workflows/cflite_*.yml) leaves libFuzzer crash-* files (or AFL++
# crashes/ directories) under ARTIFACTS; this script
#   1. imports them all into OUT/findings.db (kvsim db import: deduplicated
#      by signature; an input that runs clean is reported and skipped),
#   2. shrinks every case (kvsim shrink db:OUT/findings.db:ID),
#   3. writes per case OUT/case-ID.kvs (the shrunk scenario, with its
#      '# reproduce:' line: kvsim replay case-ID.kvs gives the violation),
#      OUT/case-ID.trace.json (its Perfetto trace) and OUT/case-ID.txt (the
#      replay's verdict and reproduce line),
#   4. prints one line per case and OUT/SUMMARY.txt.
# --bug NAME: the switches the fuzzer ran with (KVCONN_BUG), if any.
# KVSIM overrides the kvsim binary (default build/bin/kvsim).
# Exit: 0 when every case was shrunk and replays as recorded; 3 when no
# input was found or none violates; the failing kvsim's code otherwise.
set -uo pipefail
usage() { echo "usage: tools/cflite_triage.sh ARTIFACTS OUT [--bug NAME]..." >&2; exit 4; }
[ $# -ge 2 ] || usage
art=$1 out=$2; shift 2
bugs=()
while [ $# -gt 0 ]; do
  case $1 in
    --bug) [ $# -ge 2 ] || usage; bugs+=(--bug "$2"); shift 2 ;;
    --bug=*) bugs+=("$1"); shift ;;
    *) usage ;;
  esac
done
K=${KVSIM:-$(dirname "$0")/../build/bin/kvsim}
[ -x "$K" ] || { echo "cflite_triage: no kvsim at $K (build it, or set KVSIM)" >&2; exit 4; }
[ -d "$art" ] || { echo "cflite_triage: $art: no such directory" >&2; exit 3; }
mkdir -p "$out" || exit 8
db=$out/findings.db

"$K" db --db "$db" import "$art" "${bugs[@]}" > "$out/import.txt"
rc=$?
cat "$out/import.txt"
[ "$rc" = 0 ] || { echo "cflite_triage: import failed (exit $rc)" >&2; exit "$rc"; }
ids=$("$K" db --db "$db" list | awk '$1 ~ /^[0-9]+$/ && ($2 == "open" || $2 == "fixed") {print $1}')
[ -n "$ids" ] || { echo "cflite_triage: no input in $art violates (with ${bugs[*]:-no switch})" >&2; exit 3; }

status=0
: > "$out/SUMMARY.txt"
for id in $ids; do
  if ! "$K" shrink "db:$db:$id" > "$out/case-$id.shrink.txt" 2>&1; then
    echo "cflite_triage: case $id: shrink failed" >&2; cat "$out/case-$id.shrink.txt" >&2; status=1; continue
  fi
  "$K" db --db "$db" show "$id" --min > "$out/case-$id.kvs" || { status=1; continue; }
  "$K" replay "db:$db:$id" --min --trace-json "$out/case-$id.trace.json" > "$out/case-$id.txt" 2>&1
  rrc=$?
  # a violation is what a case is: 1 safety, 2 liveness; 10 = not as recorded
  if [ "$rrc" != 1 ] && [ "$rrc" != 2 ]; then
    echo "cflite_triage: case $id: replay exit $rrc, want a violation" >&2; status=$rrc
  fi
  line="case $id: $(grep -m1 '^VIOLATION' "$out/case-$id.txt") -> $out/case-$id.kvs, $out/case-$id.trace.json"
  echo "$line" | tee -a "$out/SUMMARY.txt"
done
exit "$status"
