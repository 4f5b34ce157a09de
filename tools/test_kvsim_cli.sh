#!/usr/bin/env bash
# kvsim through its command line, as a user runs it:
#  - 20,000 generated seeds with every switch off: no violation; 2,000 of the
#    load workload (overload with faults) likewise;
#  - each bug switch (P2P and store): a sweep of at most 10,000 seeds finds the right
#    invariant, and `kvsim run` of the printed scenario (as .kvs) reproduces it
#    with the same exit code;
#  - bad input and usage errors get their own exit codes and a message.
set -uo pipefail
cd "$(dirname "$0")/.."
K=build/bin/kvsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "kvsim cli: FAILED — $*" >&2; exit 1; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

j=$($K sweep --seeds 1..20000 --jobs 2 --json) || fail "clean sweep exited $?"
[ "$(echo "$j" | field "['totals']['violations']")" = 0 ] || fail "clean sweep found violations: $j"
[ "$(echo "$j" | field "['totals']['runs']")" = 20000 ] || fail "clean sweep ran $(echo "$j" | field "['totals']['runs']") seeds"
echo "  20000 seeds, switches off: 0 violations ($(echo "$j" | field "['totals']['events_per_s']") events/s on 2 jobs)"

for spec in err_early_return:INV-LIVE:2 recv_map_race:INV-OWNER:1 empty_pull_completion:SCHED-ASSERT:1 \
            store_empty_block_table:INV-SAVE:1 store_rejected_load_save:INV-SAVE:1; do
  IFS=: read -r bug inv code <<<"$spec"
  j=$($K sweep --seeds 1..10000 --bug "$bug" --stop --json); rc=$?
  seed=$(echo "$j" | field "['first_violation']['seed']" 2>/dev/null) || seed=None
  [ "$seed" != None ] || fail "$bug not found in 10000 seeds"
  [ "$(echo "$j" | field "['invariants']['$inv']['violations']")" -ge 1 ] || fail "$bug found as another invariant: $j"
  [ "$rc" = "$code" ] || fail "$bug sweep exit $rc, want $code"
  $K run --seed "$seed" --bug "$bug" > "$tmp/run.txt"; rc=$?
  [ "$rc" = "$code" ] || fail "$bug run --seed $seed exit $rc, want $code"
  grep -q "VIOLATION $inv" "$tmp/run.txt" || fail "$bug run --seed $seed: no $inv"
  sed -n '/^kvs [0-9]/,$p' "$tmp/run.txt" > "$tmp/repro.kvs"
  $K run "$tmp/repro.kvs" > "$tmp/replay.txt"; rc=$?
  [ "$rc" = "$code" ] || fail "$bug replay of the printed scenario exit $rc, want $code"
  grep -q "VIOLATION $inv" "$tmp/replay.txt" || fail "$bug replay: no $inv"
  echo "  $bug: found at seed $seed as $inv, reproduced by run --seed and by the printed .kvs"
done

printf 'kvs 1\ntopology p=1 pooll=3\n' > "$tmp/bad.kvs"
$K run "$tmp/bad.kvs" 2> "$tmp/err.txt"; rc=$?
[ "$rc" = 3 ] || fail "bad .kvs exit $rc, want 3"
grep -q "bad.kvs:2:" "$tmp/err.txt" || fail "bad .kvs error does not name file:line: $(cat "$tmp/err.txt")"
$K sweep --seeds 5..1 2>/dev/null; [ $? = 4 ] || fail "bad --seeds is not a usage error"
$K frobnicate 2>/dev/null; [ $? = 4 ] || fail "unknown command is not a usage error"
# the serving workload of the lifecycle benchmark: clean, every request ok
j=$($K sweep --workload steady --seeds 1..20 --json) || fail "steady sweep exit $?"
echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin); t=d['totals']; assert t['violations']==0 and t['requests']==20*256, d" \
  || fail "steady sweep: $j"
$K run --seed 3 --workload steady | grep -q "256 ok / 0 error / 0 aborted" || fail "steady seed 3 is not all ok"
# the overload workload: clean; a finding's reproduce line names the workload and reproduces it
j=$($K sweep --workload load --seeds 1..2000 --jobs 2 --json) || fail "load sweep exit $?"
echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin); t=d['totals']; assert t['violations']==0 and t['runs']==2000 and t['requests']>=2000*64, d" \
  || fail "load sweep: $j"
line=$($K sweep --workload load --seeds 1..50 --bug empty_pull_completion --stop | sed -n 's/^reproduce: //p')
case "$line" in *"--workload load"*"--bug empty_pull_completion"*) ;; *) fail "load finding's reproduce line does not name the workload and the switch: $line" ;; esac
bash -c "$line" >/dev/null; [ $? = 1 ] || fail "'$line' does not reproduce"
$K sweep --workload nonesuch --seeds 1..2 2>/dev/null; [ $? = 4 ] || fail "bad --workload is not a usage error"
# the staged block-memory provider (KV apart from the transport's memory):
# the same runs, hash for hash, on both workloads
for wl in faults steady; do
  n=300; [ $wl = steady ] && n=20
  [ "$($K sweep --workload $wl --seeds 1..$n --hashes | sha256sum)" = \
    "$($K sweep --workload $wl --seeds 1..$n --hashes --kvmem staged | sha256sum)" ] \
    || fail "--kvmem staged changed a $wl trace"
done
$K sweep --kvmem gpu --seeds 1..2 2>/dev/null; [ $? = 4 ] || fail "bad --kvmem is not a usage error"
$K run --help | grep -q "kvsim run" || fail "run --help"
echo "kvsim cli: ok"
