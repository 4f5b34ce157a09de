#!/usr/bin/env bash
# kvsim's two traces (docs/traces.md), as a user gets them:
#  - the Perfetto JSON of runs of every workload (crashes among them) and of
#    two violating corpus scenarios passes tools/check_trace.py;
#  - check_trace.py fails where it must: invalid JSON, a missing name, an
#    open flow, a finish without a start, a false overlap, an unmatched
#    async slice;
#  - the text trace starts with its legend; a violation seen during an event
#    comes right after that event's line and names actors by name;
#  - traces are outputs only: the trace hash is the same with or without them.
set -uo pipefail
cd "$(dirname "$0")/.."
K=build/bin/kvsim
V="python3 tools/check_trace.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "trace: FAILED — $*" >&2; exit 1; }
[ -x "$K" ] || fail "$K not built"

# seeds 1 and 3 of the fault workload have crashes: mail to a dead process
# is dropped, and its flows must not be left open
for spec in faults:1 faults:2 faults:3 steady:1 steady:2 load:1 load:2; do
  IFS=: read -r wl s <<<"$spec"
  $K run --seed "$s" --workload "$wl" --trace-json "$tmp/t.json" > /dev/null || fail "run --seed $s --workload $wl exit $?"
  $V "$tmp/t.json" > "$tmp/v.txt" 2>&1 || fail "$wl seed $s: $(cat "$tmp/v.txt")"
done
echo "  7 runs of the faults, steady and load workloads: valid Perfetto JSON"

eer=$(ls corpus/scenarios/seed000-err_early_return-*.kvs | head -1)
race=corpus/scenarios/fuzz-recv_map_race-0bd0dff052b2.kvs
$K run "$eer" --bug err_early_return --trace-json "$tmp/eer.json" > /dev/null; rc=$?
[ "$rc" = 2 ] || fail "$eer exit $rc, want 2"
$V "$tmp/eer.json" > "$tmp/v.txt" 2>&1 || fail "$eer: $(cat "$tmp/v.txt")"
python3 - "$tmp/eer.json" <<'EOF' || fail "$eer: the JSON lacks the violation, a request's outcome or a log line"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert any(e["name"] == "VIOLATION INV-LIVE" and e["ph"] == "i" for e in ev), "no violation"
assert any(e["ph"] == "e" and e.get("cat") == "request" and "outcome" in e["args"] for e in ev), "no outcome"
assert any(e["name"] == "log" and e["args"].get("text") for e in ev), "no log text"
assert any(e["ph"] == "i" and "req" in e.get("args", {}) for e in ev), "no request id on an event"
EOF
$K run "$race" --bug recv_map_race --trace-json "$tmp/race.json" > /dev/null; rc=$?
[ "$rc" = 1 ] || fail "$race exit $rc, want 1"
$V "$tmp/race.json" > "$tmp/v.txt" 2>&1 || fail "$race: $(cat "$tmp/v.txt")"
echo "  violating corpus scenarios (INV-LIVE, INV-OWNER): valid, with the violation and outcomes"

# the validator fails on what it checks
ok_meta='{"name":"process_name","ph":"M","pid":1,"args":{"name":"p"}},{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"t"}}'
expect_bad() { # NAME REASON JSON
  printf '%s' "$3" > "$tmp/bad.json"
  $V "$tmp/bad.json" > /dev/null 2> "$tmp/v.txt" && fail "check_trace.py passed $1"
  grep -q "FAILED: .*$2" "$tmp/v.txt" || fail "check_trace.py on $1 said: $(cat "$tmp/v.txt")"
}
expect_bad "invalid JSON" "invalid JSON" '{"traceEvents":[{"ph":"i",}]}'
expect_bad "a missing thread_name" "no thread_name" \
  '{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"args":{"name":"p"}},{"name":"a","ph":"i","s":"t","ts":1,"pid":1,"tid":2}]}'
expect_bad "a missing process_name" "no process_name" '{"traceEvents":[{"name":"a","ph":"i","s":"t","ts":1,"pid":1,"tid":1}]}'
expect_bad "an open flow" "never finishes" \
  "{\"traceEvents\":[$ok_meta,{\"name\":\"m\",\"cat\":\"msg\",\"ph\":\"s\",\"id\":7,\"ts\":1,\"pid\":1,\"tid\":1}]}"
expect_bad "a finish without a start" "without a start" \
  "{\"traceEvents\":[$ok_meta,{\"name\":\"m\",\"cat\":\"msg\",\"ph\":\"f\",\"bp\":\"e\",\"id\":7,\"ts\":1,\"pid\":1,\"tid\":1}]}"
expect_bad "a false overlap" "overlap without nesting" \
  "{\"traceEvents\":[$ok_meta,{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":0.1,\"pid\":1,\"tid\":1},{\"name\":\"b\",\"ph\":\"X\",\"ts\":1.05,\"dur\":0.1,\"pid\":1,\"tid\":1}]}"
expect_bad "an unmatched async begin" "never ended" \
  "{\"traceEvents\":[$ok_meta,{\"name\":\"r\",\"cat\":\"request\",\"ph\":\"b\",\"id\":1,\"ts\":1,\"pid\":1,\"tid\":1}]}"
expect_bad "an async end without a begin" "without a begin" \
  "{\"traceEvents\":[$ok_meta,{\"name\":\"r\",\"cat\":\"request\",\"ph\":\"e\",\"id\":1,\"ts\":1,\"pid\":1,\"tid\":1}]}"
# ...and passes what nests: a slice inside another, one after it at its end
printf '%s' "{\"traceEvents\":[$ok_meta,{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":1},{\"name\":\"b\",\"ph\":\"X\",\"ts\":1.5,\"dur\":1,\"pid\":1,\"tid\":1},{\"name\":\"c\",\"ph\":\"X\",\"ts\":3,\"dur\":1,\"pid\":1,\"tid\":1}]}" > "$tmp/good.json"
$V "$tmp/good.json" > /dev/null 2>&1 || fail "check_trace.py failed nested slices: $($V "$tmp/good.json" 2>&1)"
echo "  check_trace.py fails invalid JSON, missing names, open flows, false overlaps, unmatched async slices"

# the text trace: the legend first; a violation after its event's line, actors by name
$K run --seed 7 --trace > "$tmp/t.txt" || fail "run --seed 7 --trace exit $?"
head -1 "$tmp/t.txt" | grep -q "^# kvsim text trace" || fail "the text trace does not start with its legend: $(head -1 "$tmp/t.txt")"
for kind in "KIND len N" "log TEXT" FAULT STORE RESTART VIOLATION; do
  sed -n '/^#/p' "$tmp/t.txt" | grep -q "^#   $kind" || fail "the legend does not explain '$kind'"
done
$K run "$race" --bug recv_map_race --trace > "$tmp/race.txt"
grep -B1 -m1 " VIOLATION INV-OWNER" "$tmp/race.txt" > "$tmp/pair.txt" || fail "no INV-OWNER line in the text trace"
read -r t1 a1 k1 _ < <(head -1 "$tmp/pair.txt")
read -r t2 a2 _ < <(tail -1 "$tmp/pair.txt")
[ "$t1" = "$t2" ] && [ "$a1" = "$a2" ] && [[ "$k1" =~ ^[A-Z0-9_]+$ ]] \
  || fail "the violation does not come right after its event's line: $(cat "$tmp/pair.txt")"
grep " VIOLATION INV-OWNER" "$tmp/race.txt" | grep -qE "actor [0-9]" && fail "INV-OWNER names actor numbers: $(grep ' VIOLATION' "$tmp/race.txt")"
grep " VIOLATION INV-OWNER" "$tmp/race.txt" | grep -q "owned by actor D1.w0.recv touched by actor D1.w0.main" \
  || fail "INV-OWNER does not name its actors: $(grep ' VIOLATION' "$tmp/race.txt")"
echo "  text trace: legend first; the violation after its event's line, actors by name"

# outputs only: the same trace hash with and without the traces
for spec in faults:7 load:3; do
  IFS=: read -r wl s <<<"$spec"
  a=$($K run --seed "$s" --workload "$wl" --trace-hash | grep "^trace hash")
  b=$($K run --seed "$s" --workload "$wl" --trace-hash --trace --trace-json "$tmp/h.json" | grep "^trace hash")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$wl seed $s: tracing changed the run ($a / $b)"
done
echo "  the trace hash is the same with and without the traces"
echo "trace: ok"
