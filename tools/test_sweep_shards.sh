#!/usr/bin/env bash
# tools/sweep_shards.sh on seeds 1..100 in 2 shards, clean and with
# err_early_return: the merged database has as many cases as one unsharded
# `kvsim sweep --db` of the range records, the combined page counts 100
# runs, the exit status is 0 either way and 1 with --fail-on-violation when
# there are violations, and a bad N is a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."
K=${KVSIM:-build/bin/kvsim}
[ -x "$K" ] || { echo "sweep shards: FAILED — $K missing" >&2; exit 1; }
K=$(realpath "$K"); S=$(realpath tools/sweep_shards.sh)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "sweep shards: FAILED — $*" >&2; exit 1; }
cases() { "$K" db --db "$1" list | sed -n 's/^\([0-9]*\) cases in .*/\1/p'; }
for bug in "" err_early_return; do
  extra=(); [ -n "$bug" ] && extra=(--bug "$bug")
  out="$tmp/out${bug:+-$bug}"
  KVSIM=$K bash "$S" 2 1..100 "$out" "${extra[@]}" > "$tmp/log.txt" 2>&1 || fail "sweep_shards.sh ${bug:-clean} exited $?: $(cat "$tmp/log.txt")"
  for f in shard-0.json shard-1.json findings.db sweep.html findings.html; do
    [ -s "$out/$f" ] || fail "${bug:-clean}: $out/$f missing"
  done
  "$K" sweep --seeds 1..100 "${extra[@]}" --db "$tmp/one${bug}.db" > /dev/null 2>&1
  want=$(cases "$tmp/one${bug}.db"); got=$(cases "$out/findings.db")
  [ "$got" = "$want" ] || fail "${bug:-clean}: merged database has $got cases, one unsharded sweep $want"
  [ -n "$bug" ] && [ "$got" -lt 1 ] && fail "$bug: no case recorded"
  grep -Eq "(clean: 100 runs|violations in 100 runs)" "$out/sweep.html" || fail "${bug:-clean}: the combined page does not count 100 runs"
  echo "  ${bug:-clean}: 2 shards, $got cases merged (unsharded: $want), 100 runs on the page"
done
KVSIM=$K bash "$S" --fail-on-violation 2 1..100 "$tmp/strict" --bug err_early_return > /dev/null 2>&1
[ $? = 1 ] || fail "--fail-on-violation with violations did not exit 1"
KVSIM=$K bash "$S" --fail-on-violation 2 1..50 "$tmp/strict" > /dev/null 2>&1 || fail "--fail-on-violation on a clean sweep did not exit 0"
KVSIM=$K bash "$S" 0 1..10 "$tmp/bad" > /dev/null 2>&1; [ $? = 4 ] || fail "N 0 is not a usage error"
echo "sweep shards: ok"
