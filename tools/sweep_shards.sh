#!/usr/bin/env bash
# One sweep in N shard processes, then one findings database and two pages:
# what a CI matrix does on N machines (.github/workflows/sweep.yml), on one.
#
# Usage: tools/sweep_shards.sh [--fail-on-violation] N A..B [OUTDIR] [sweep options...]
#   e.g. tools/sweep_shards.sh 2 1..2000 sweep-out --bug err_early_return --jobs 2
# Runs `kvsim sweep --seeds A..B --shard i/N --db OUTDIR/shard-i.db --json >
# OUTDIR/shard-i.json` for i in 0..N-1 in parallel, merges the shard
# databases into OUTDIR/findings.db (kvsim db merge), and writes
# OUTDIR/sweep.html (kvsim report over the shard documents: counts added,
# first seeds the smallest) and OUTDIR/findings.html with its traces in
# OUTDIR/findings.d/. OUTDIR defaults to sweep-out; the outputs of an
# earlier run there are removed first.
#
# Exit: 0 when every step ran, whatever the sweep found (violations are what
# the pages report); 1 when a step failed (a shard exited other than 0, 1 or
# 2, the merge or a report failed) or, with --fail-on-violation, when any
# shard found a violation. 4 for a usage error. KVSIM overrides the binary.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K=${KVSIM:-$root/build/bin/kvsim}
usage() { sed -n '5,6p' "$0" | sed 's/^# //' >&2; exit 4; }
strict=0
[ "${1:-}" = --fail-on-violation ] && { strict=1; shift; }
[ $# -ge 2 ] || usage
N=$1 range=$2; shift 2
[[ "$N" =~ ^[1-9][0-9]*$ ]] && [ "$N" -le 256 ] || { echo "sweep_shards: N '$N' is not a number in 1..256" >&2; usage; }
[[ "$range" =~ ^[0-9]+\.\.[0-9]+$ ]] || { echo "sweep_shards: '$range' is not A..B" >&2; usage; }
out=sweep-out
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then out=$1; shift; fi
[ -x "$K" ] || { echo "sweep_shards: $K missing (make build)" >&2; exit 1; }
mkdir -p "$out" || exit 1
rm -rf "$out"/shard-*.db* "$out"/shard-*.json "$out"/shard-*.err "$out"/findings.db* "$out"/findings.d \
  "$out"/sweep.html "$out"/findings.html

pids=()
for ((i = 0; i < N; i++)); do
  "$K" sweep --seeds "$range" --shard "$i/$N" --db "$out/shard-$i.db" --json "$@" \
    > "$out/shard-$i.json" 2> "$out/shard-$i.err" &
  pids+=($!)
done
failed=0 violated=0
for ((i = 0; i < N; i++)); do
  wait "${pids[$i]}"; rc=$?
  case $rc in
    0) ;;
    1|2) violated=1 ;;
    *) echo "sweep_shards: shard $i/$N exited $rc: $(tail -3 "$out/shard-$i.err")" >&2; failed=1 ;;
  esac
done
[ $failed = 0 ] || exit 1
dbs=(); docs=()
for ((i = 0; i < N; i++)); do dbs+=("$out/shard-$i.db"); docs+=("$out/shard-$i.json"); done
"$K" db --db "$out/findings.db" merge "${dbs[@]}" > "$out/merge.txt" || { echo "sweep_shards: db merge failed" >&2; exit 1; }
"$K" report --sweep "${docs[@]}" -o "$out/sweep.html" || { echo "sweep_shards: report --sweep failed" >&2; exit 1; }
"$K" report --db "$out/findings.db" -o "$out/findings.html" || { echo "sweep_shards: report --db failed" >&2; exit 1; }
echo "sweep_shards: $N shards of $range in $out/: shard-*.json, findings.db ($("$K" db --db "$out/findings.db" list | tail -1)), sweep.html, findings.html"
[ $strict = 1 ] && [ $violated = 1 ] && { echo "sweep_shards: violations found (--fail-on-violation)" >&2; exit 1; }
exit 0
