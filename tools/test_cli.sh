#!/usr/bin/env bash
# The command lines of kvsim, kvdemo and kvnode as a first-time user meets
# them (issue 22, "Repro lines" and "CLI"):
#  - --help on stdout with exit 0, --version (version, commit, build, bug
#    switches) for all three;
#  - --opt=value as well as --opt value; strict numbers (--seed -1, a 20-digit
#    seed); an option that does not apply to the command, an extra argument:
#    usage errors, exit 4, the message naming the flag or the value;
#  - a sweep finding's "reproduce:" line, pasted into a shell, gives the same
#    violation (faults with a switch, load, --kvmem staged);
#  - replay of a corpus .kvs applies its '# expect-bug' switch and says so;
#  - db show ID --min prints the shrunk scenario, which replays as recorded;
#  - run of a fuzzer artifact says it runs it as replay --fuzz, with the same
#    verdict; '-' as a file name means stdout.
# KVSIM, KVDEMO, KVNODE override the binaries' paths.
set -uo pipefail
cd "$(dirname "$0")/.."
K=$(realpath "${KVSIM:-build/bin/kvsim}"); D=$(realpath "${KVDEMO:-build/bin/kvdemo}"); N=$(realpath "${KVNODE:-build/bin/kvnode}")
for b in "$K" "$D" "$N"; do [ -x "$b" ] || { echo "cli: FAILED — $b missing" >&2; exit 1; }; done
root=$PWD
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "cli: FAILED — $*" >&2; exit 1; }
expect_rc() { # WANT WHAT CMD...: runs CMD, output in out.txt / err.txt
  local want=$1 what=$2; shift 2
  "$@" > out.txt 2> err.txt; local rc=$?
  [ "$rc" = "$want" ] || { cat out.txt err.txt >&2; fail "$what: exit $rc, want $want"; }
}
usage_err() { # WHAT WORD CMD...: exit 4, stderr names WORD
  local what=$1 word=$2; shift 2
  expect_rc 4 "$what" "$@"
  grep -qF -- "$word" err.txt || fail "$what: the message does not name '$word': $(cat err.txt)"
}

# ---- --help and --version ----------------------------------------------------------------------
for c in "" run sweep gen replay shrink db selftest report; do
  expect_rc 0 "kvsim $c --help" "$K" $c --help
  [ -s out.txt ] && [ ! -s err.txt ] || fail "kvsim $c --help: not on stdout"
  grep -q "kvsim ${c:-run}" out.txt || fail "kvsim $c --help: $(head -3 out.txt)"
done
expect_rc 0 "kvsim help sweep" "$K" help sweep
grep -q "^kvsim sweep" out.txt || fail "kvsim help sweep: $(head -2 out.txt)"
grep -q "^exit: 0 clean" <("$K" --help) || fail "kvsim --help does not list the exit codes"
for t in "$K" "$D" "$N"; do
  name=$(basename "$t")
  expect_rc 0 "$name --help" "$t" --help
  [ -s out.txt ] && [ ! -s err.txt ] || fail "$name --help: not on stdout"
  expect_rc 0 "$name --version" "$t" --version
  grep -q "^$name (kvconn) [0-9]" out.txt && grep -q "^commit [0-9a-f]\{7,\}\|^commit unknown" out.txt &&
    grep -q "^build " out.txt && grep -q "^bug switches:" out.txt || fail "$name --version: $(cat out.txt)"
done
grep -q "^bug switches: .*err_early_return" <("$K" --version) || fail "kvsim --version does not list the switches"
echo "  --help on stdout (exit 0) and --version for kvsim, its commands, kvdemo and kvnode"

# ---- options: --opt=value, strict numbers, what does not apply ------------------------------------
expect_rc 0 "run --seed=7" "$K" run --seed=7
grep -q "seed 7:" out.txt || fail "run --seed=7 did not run seed 7: $(head -1 out.txt)"
cmp -s out.txt <("$K" run --seed 7) || fail "--seed=7 and --seed 7 differ"
usage_err "run --seed -1" "'-1'" "$K" run --seed -1
grep -q -- "--seed" err.txt || fail "--seed -1: the message does not name --seed"
usage_err "run --seed=-1" "'-1'" "$K" run --seed=-1
usage_err "20-digit seed" "'99999999999999999999'" "$K" run --seed 99999999999999999999
usage_err "seed with a sign" "'+5'" "$K" run --seed +5
usage_err "hex seed" "'0x10'" "$K" gen --seed 0x10
usage_err "seeds below zero" "'-3..5'" "$K" sweep --seeds -3..5
usage_err "--jobs 0" "--jobs" "$K" sweep --seeds 1..2 --jobs 0
usage_err "--shard -1/2" "'-1/2'" "$K" sweep --seeds 1..2 --shard -1/2
usage_err "run --json" "--json" "$K" run --seed 1 --json
grep -q "kvsim run" err.txt || fail "run --json: the message does not name the command"
usage_err "gen --jobs 3" "--jobs" "$K" gen --seed 1 --jobs 3
usage_err "sweep --trace" "--trace" "$K" sweep --seeds 1..2 --trace
usage_err "run extra argument" "'b.kvs'" "$K" run a.kvs b.kvs
usage_err "sweep extra argument" "'extra'" "$K" sweep --seeds 1..2 extra
usage_err "gen extra argument" "'extra'" "$K" gen --seed 1 extra
usage_err "run --seed and a file" "'x.kvs'" "$K" run --seed 1 x.kvs
usage_err "--hashes --jobs" "--jobs" "$K" sweep --seeds 1..2 --hashes --jobs 2
usage_err "unknown option" "'--frobnicate'" "$K" run --seed 1 --frobnicate
usage_err "flag with a value" "'--json=1'" "$K" sweep --seeds 1..2 --json=1
usage_err "missing value" "--seed" "$K" run --seed
usage_err "bad --bug" "'nonesuch'" "$K" run --seed 1 --bug nonesuch
usage_err "db list --mark-fixed" "--mark-fixed" "$K" db --db x.db list --mark-fixed
usage_err "replay --seed" "--seed" "$K" replay x.kvs --seed 3
usage_err "replay two inputs" "'b.kvs'" "$K" replay a.kvs b.kvs
usage_err "report --seeds" "--seeds" "$K" report --seeds 1..2 -o x.html
usage_err "report without -o" "-o" "$K" report --db x.db
usage_err "report --sweep and --db" "--db" "$K" report --sweep a.json --db x.db -o x.html
usage_err "kvdemo argument" "'--seed'" "$D" --seed 1
usage_err "kvnode bad seed" "'-1'" "$N" --role proxy --seed -1
usage_err "kvnode unknown option" "'--frob'" "$N" --frob
usage_err "kvnode without a role" "--role" "$N"
usage_err "kvnode engine without --proxy" "--proxy" "$N" --role=decode
[ ! -e x.db ] || fail "a refused command created its database"
echo "  --opt=value; strict numbers; options and arguments a command does not take: exit 4, named"

# ---- a finding's reproduce line, pasted ----------------------------------------------------------
for spec in "err_early_return::INV-LIVE:2" "empty_pull_completion:--workload load:SCHED-ASSERT:1" \
            "recv_map_race:--kvmem staged:INV-OWNER:1"; do
  IFS=: read -r bug extra inv code <<<"$spec"
  expect_rc "$code" "sweep --bug $bug $extra" "$K" sweep --seeds 1..50 --bug "$bug" $extra --stop
  line=$(sed -n 's/^reproduce: //p' out.txt)
  [ -n "$line" ] || fail "sweep --bug $bug printed no reproduce line: $(tail -5 out.txt)"
  case "$line" in *"--bug $bug"*) ;; *) fail "the reproduce line leaves out --bug $bug: $line" ;; esac
  [ -z "$extra" ] || case "$line" in *"$extra"*) ;; *) fail "the reproduce line leaves out $extra: $line" ;; esac
  [ "$(python3 -c "import json,sys; print(json.load(sys.stdin)['first_violation']['reproduce'])" < <("$K" sweep --seeds 1..50 --bug "$bug" $extra --stop --json))" = "$line" ] \
    || fail "--json's reproduce differs from the table's"
  bash -c "$line" > pasted.txt 2>&1; rc=$?
  [ "$rc" = "$code" ] || fail "'$line' exited $rc, want $code"
  grep -q "^VIOLATION $inv" pasted.txt || fail "'$line' does not give $inv: $(grep VIOLATION pasted.txt)"
  echo "  $bug${extra:+ ($extra)}: pasting '$line' gives $inv, exit $code"
done
expect_rc 0 "clean sweep" "$K" sweep --seeds 1..20
grep -q "reproduce:" out.txt && fail "a clean sweep printed a reproduce line"

# ---- replay honours '# expect-bug' ----------------------------------------------------------------
f=$root/corpus/scenarios/seed000-err_early_return-f97d94c3c69b.kvs
expect_rc 0 "run of the corpus file" "$K" run "$f"
grep -q "kvsim replay .*applies it" err.txt || fail "run of a corpus file does not point at replay: $(cat err.txt)"
expect_rc 2 "replay of the corpus file" "$K" replay "$f" --quiet
grep -q "^applied bug switch err_early_return from .*'# expect-bug err_early_return INV-LIVE'" out.txt \
  || fail "replay does not say which switch it applied: $(head -2 out.txt)"
grep -q "^VIOLATION INV-LIVE" out.txt || fail "replay of the corpus file: $(cat out.txt)"
sed 's/^# expect-bug err_early_return INV-LIVE/# expect-bug err_early_return INV-OWNER/' "$f" > wrong.kvs
expect_rc 10 "replay, another invariant than expected" "$K" replay wrong.kvs --quiet
grep -q "expects INV-OWNER" err.txt || fail "expect-bug mismatch message: $(cat err.txt)"
expect_rc 1 "replay with --bug" "$K" replay "$f" --quiet --bug recv_map_race
grep -q "not applied" err.txt || fail "--bug did not say the expect-bug line is not applied"
echo "  replay applies '# expect-bug' (and says so), checks its invariant; --bug overrides"

# ---- db show --min --------------------------------------------------------------------------------
expect_rc 2 "sweep --db" "$K" sweep --seeds 1..50 --bug err_early_return --stop --db f.db
expect_rc 3 "show --min before shrink" "$K" db --db f.db show 1 --min
grep -q "no minimized scenario (kvsim shrink db:f.db:1)" err.txt || fail "show --min without one: $(cat err.txt)"
expect_rc 0 "shrink" "$K" shrink db:f.db:1
grep -q "^reproduce: .* replay db:f.db:1 --min$" out.txt || fail "shrink's reproduce line: $(cat out.txt)"
expect_rc 0 "show --min" "$K" db --db f.db show 1 --min
cp out.txt min.kvs
grep -q "^kvs [0-9]" min.kvs && grep -q "^# trace-hash " min.kvs && ! grep -q "^scenario:" min.kvs || fail "show --min: $(cat min.kvs)"
expect_rc 2 "replay of show --min" "$K" replay min.kvs --quiet
grep -q ": same)" out.txt || fail "show --min's scenario does not replay as recorded: $(cat out.txt)"
expect_rc 0 "show" "$K" db --db f.db show 1
grep -q "^reproduce: .* replay db:f.db:1$" out.txt && grep -q "^minimized scenario:" out.txt || fail "show: $(head -12 out.txt)"
expect_rc 0 "export to stdout" "$K" db --db f.db export 1 -
cmp -s <(grep -v '^#' out.txt) <(grep -v '^#' min.kvs) || fail "export - is not the minimized .kvs"
echo "  db show ID --min prints the shrunk scenario as a .kvs that replays as recorded"

# ---- fuzzer inputs, '-' as stdout ----------------------------------------------------------------
cp "$root/corpus/fuzz_scenario/$(ls "$root/corpus/fuzz_scenario" | head -1)" crash-0001
"$K" replay --fuzz crash-0001 --quiet > want.txt 2>&1; want=$?
"$K" run crash-0001 > out.txt 2> err.txt; rc=$?
[ "$rc" = "$want" ] || fail "run of a fuzzer artifact exited $rc, replay --fuzz $want"
grep -q "fuzz_scenario input" err.txt && grep -q "replay --fuzz" err.txt || fail "run of crash-0001 said nothing: $(cat err.txt)"
[ "$(sed -n 's/.*: \([0-9]* events\).*/\1/p' out.txt)" = "$(sed -n 's/.*: \([0-9]* events\).*/\1/p' want.txt)" ] \
  || fail "run and replay --fuzz of crash-0001 differ"
expect_rc 0 "--trace-json -" "$K" run --seed 3 --trace-json -
python3 -c "import json; json.load(open('out.txt'))" || fail "--trace-json - is not JSON on stdout"
grep -q "^clean" err.txt || fail "--trace-json -: the verdict did not go to stderr"
expect_rc 2 "replay --trace-json -" "$K" replay min.kvs --trace-json -
python3 -c "import json; json.load(open('out.txt'))" || fail "replay --trace-json - is not JSON on stdout"
expect_rc 0 "shrink -o -" "$K" shrink min.kvs -o -
grep -q "^kvs [0-9]" out.txt && ! grep -q "^signature" out.txt || fail "shrink -o -: stdout is not the .kvs alone"
[ ! -e ./- ] || fail "a file named '-' was written"
echo "  run of a fuzzer artifact runs it as replay --fuzz (and says so); '-' is stdout"
# ---- --jobs: one progress bar on a terminal, nothing when piped; signals reach the workers ------
if command -v script > /dev/null; then
  script -qec "$K sweep --seeds 1..600 --jobs 2 --bug err_early_return > /dev/null" /dev/null > tty.txt 2>&1
  bar=$(tr '\r' '\n' < tty.txt | grep -a '600/600')
  case "$bar" in *"runs/s"*"violations "[1-9]*) ;; *) fail "--jobs 2 on a terminal: no aggregated bar: $(tr '\r' '\n' < tty.txt | tail -3)";; esac
  echo "  --jobs 2 on a terminal: one bar over both workers (600/600, rate, violations)"
fi
"$K" sweep --seeds 1..300 --jobs 2 > out.txt 2> err.txt
grep -q $'\r' err.txt out.txt && fail "--jobs 2 piped: a progress bar was written"
"$K" sweep --seeds 1..100000000 --jobs 2 > out.txt 2> err.txt &
parent=$!
kids=""
for _ in $(seq 50); do kids=$(cat /proc/"$parent"/task/*/children 2> /dev/null); [ "$(echo $kids | wc -w)" = 2 ] && break; sleep 0.1; done
[ "$(echo $kids | wc -w)" = 2 ] || fail "--jobs 2: two workers not seen (got '$kids')"
kill -TERM "$parent"; wait "$parent"; rc=$?
[ "$rc" = 143 ] || fail "SIGTERM to a --jobs sweep: exit $rc, want 143 (killed by SIGTERM)"
for p in $kids; do kill -0 "$p" 2> /dev/null && fail "SIGTERM to a --jobs sweep left worker $p running"; done
grep -q "stopped 2 workers" err.txt || fail "SIGTERM: $(cat err.txt)"
echo "  SIGTERM to a --jobs 2 sweep stops both workers, then the sweep dies of it (143)"
# ---- kvnode says what it waits for, once a second ----------------------------------------------
timeout 2.5 "$N" --role decode --index 1 --proxy 127.0.0.1:1 > out.txt 2> err.txt
grep -q '^\[D1\] waiting for a connection to 127.0.0.1:1 (Connection refused): [12] s (gives up at 30 s)$' err.txt ||
  fail "a decode node with no proxy: $(cat err.txt)"
timeout 2.5 "$N" --role proxy --requests 1 > out.txt 2> err.txt
grep -q '^\[proxy\] waiting for actor P0.admin .*: 1 s' err.txt || fail "a proxy with no engines: $(cat err.txt)"
echo "  kvnode says what it waits for once a second (a decode node with no proxy, a proxy with no engines)"
echo "cli: ok"
