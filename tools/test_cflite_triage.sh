#!/usr/bin/env bash
# tools/cflite_triage.sh as CI runs it after a fuzzing crash, for two bugs
# (the corpus repro-* seeds, with their switches): the crash file and one
# that runs clean go in; out comes one case, shrunk, with a .kvs that
# replays to the same invariant and a trace that parses.
# Also: no violating input -> exit 3; a missing directory -> exit 3.
set -uo pipefail
cd "$(dirname "$0")/.."
K=$(realpath "${KVSIM:-build/bin/kvsim}")
[ -x "$K" ] || { echo "cflite_triage: FAILED — no $K" >&2; exit 1; }
root=$PWD
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "cflite_triage: FAILED — $*" >&2; exit 1; }
# one artifact directory per fuzzing job, as CI has them: the job's crash and a clean input
printf 'x' > "$tmp/clean-input" # a one-byte input: a scenario with no violation under either switch
n=0
for bug in err_early_return recv_map_race; do
  n=$((n+1)); art=$tmp/art-$bug; out=$tmp/out-$bug
  mkdir -p "$art"
  cp corpus/fuzz_scenario/repro-$bug-* "$art/crash-$n"
  cp "$tmp/clean-input" "$art/crash-clean"
  KVSIM=$K tools/cflite_triage.sh "$art" "$out" --bug $bug > "$tmp/log" 2>&1 ||
    { cat "$tmp/log" >&2; fail "$bug: triage exit $?"; }
  grep -q "1 new cases, 0 known, 0 already imported, 1 clean" "$out/import.txt" || fail "$bug: $(cat "$out/import.txt")"
  [ "$(grep -c '^case ' "$out/SUMMARY.txt")" = 1 ] || fail "$bug: want 1 case: $(cat "$out/SUMMARY.txt")"
  inv=$(sed -n 's/^case 1: VIOLATION \([A-Z-]*\) .*/\1/p' "$out/SUMMARY.txt")
  [ -n "$inv" ] || fail "$bug: no invariant in the summary"
  grep -q '^# signature' "$out/case-1.kvs" || fail "$bug: the .kvs is not the shrunk form"
  grep -q 'directives [0-9]* -> [0-9]*' "$out/case-1.shrink.txt" || fail "$bug: not shrunk"
  (cd "$tmp" && "$K" replay "$out/case-1.kvs" > r.txt 2>&1); rc=$?
  [ "$rc" = 1 ] || [ "$rc" = 2 ] || fail "$bug: the .kvs replays with exit $rc"
  grep -q "^VIOLATION $inv" "$tmp/r.txt" || fail "$bug: the .kvs gives $(grep -m1 VIOLATION "$tmp/r.txt"), want $inv"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['traceEvents']" "$out/case-1.trace.json" ||
    fail "$bug: the trace is not Perfetto JSON"
  if [ -f tools/check_trace.py ]; then python3 tools/check_trace.py "$out/case-1.trace.json" > /dev/null || fail "$bug: trace check"; fi
  echo "  $bug: its crash and a clean input -> case 1 ($inv), shrunk; the .kvs replays to $inv; the trace parses"
done
mkdir "$tmp/clean"; cp "$tmp/clean-input" "$tmp/clean/crash-clean"
KVSIM=$K tools/cflite_triage.sh "$tmp/clean" "$tmp/out2" > "$tmp/log" 2>&1; rc=$?
[ "$rc" = 3 ] || fail "only clean inputs: exit $rc, want 3"
KVSIM=$K tools/cflite_triage.sh "$tmp/none" "$tmp/out3" > "$tmp/log" 2>&1; rc=$?
[ "$rc" = 3 ] || fail "a missing directory: exit $rc, want 3"
echo "  only clean inputs, or no directory: exit 3"
echo "cflite_triage: ok"
