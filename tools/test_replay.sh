#!/usr/bin/env bash
# The findings database through kvsim's command line, as README's
# "Findings database" section uses it:
#  - sweep --db (2 jobs) records and dedupes findings; shards merge to the
#    same cases; list / show / verify;
#  - replay of a database row, of an exported .kvs and of a fuzzer input:
#    the verdict's exit code, the trace, the recorded trace hash checked;
#  - shrink to <= 10 directives, export --corpus gives a file that follows
#    tests/test_corpus.c's rules;
#  - verify's exit codes: 9 when a fixed case came back, 10 when an open case
#    no longer reproduces as recorded;
#  - a corrupt file, a wrong schema version, a read-only file and a truncated
#    scenario blob: each its own exit code and message, nothing changed;
#  - old and unknown scenario format versions;
#  - with the fuzz build (build-fuzz/bin/fuzz_scenario): a fuzzer finding goes
#    KVCONN_DB -> import -> list -> shrink -> replay -> export -> corpus file.
# KVSIM and FUZZ_SCENARIO override the binaries' paths.
set -uo pipefail
cd "$(dirname "$0")/.."
K=${KVSIM:-build/bin/kvsim}
F=${FUZZ_SCENARIO:-build-fuzz/bin/fuzz_scenario}
[ -x "$K" ] || { echo "replay: FAILED — $K missing" >&2; exit 1; }
K=$(realpath "$K")
[ -x "$F" ] && F=$(realpath "$F")
tmp=$(mktemp -d); trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "replay: FAILED — $*" >&2; exit 1; }
expect_rc() { # WANT WHAT CMD...: runs CMD, output in out.txt / err.txt
  local want=$1 what=$2; shift 2
  "$@" > out.txt 2> err.txt; local rc=$?
  [ "$rc" = "$want" ] || { cat out.txt err.txt >&2; fail "$what: exit $rc, want $want"; }
}
sql() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); print('\n'.join('|'.join(map(str,x)) for x in r))" "$@"; }
dump() { python3 -c "import sqlite3,sys; print('\n'.join(sqlite3.connect(sys.argv[1]).iterdump()))" "$1" | sha256sum; }

# ---- sweep --db: record, dedupe, merge -------------------------------------------------
expect_rc 2 "sweep --db" "$K" sweep --seeds 1..300 --bug err_early_return --jobs 2 --db f.db
grep -q "findings database f.db: run 1, [0-9]* findings recorded, [0-9]* new cases" out.txt || fail "sweep --db summary: $(cat out.txt)"
cases=$(sql f.db "SELECT count(*) FROM cases"); hits=$(sql f.db "SELECT sum(hits) FROM cases")
[ "$cases" -ge 1 ] && [ "$hits" -gt "$cases" ] || fail "sweep recorded $cases cases, $hits hits"
[ "$hits" = "$(sql f.db "SELECT count(*) FROM hits")" ] || fail "hits counts disagree"
expect_rc 2 "second sweep" "$K" sweep --seeds 1..300 --bug err_early_return --db f.db --json
python3 -c "import json,sys; json.load(open('out.txt'))" || fail "--json output is not one JSON object with --db"
[ "$(sql f.db "SELECT count(*) FROM cases")" = "$cases" ] || fail "the same findings made new cases"
[ "$(sql f.db "SELECT sum(hits) FROM cases")" = $((hits * 2)) ] || fail "the same findings were not counted as hits"
echo "  sweep --db: $cases cases from $hits findings; a second sweep adds hits, no cases"
expect_rc 2 "shard 0" "$K" sweep --seeds 1..300 --bug err_early_return --shard 0/2 --db s0.db
expect_rc 2 "shard 1" "$K" sweep --seeds 1..300 --bug err_early_return --shard 1/2 --db s1.db
expect_rc 0 "merge" "$K" db --db m.db merge s0.db s1.db
[ "$(sql m.db "SELECT signature FROM cases ORDER BY signature")" = "$(sql f.db "SELECT signature FROM cases ORDER BY signature")" ] \
  || fail "merged shards have other cases than one sweep"
[ "$(sql m.db "SELECT sum(hits) FROM cases")" = "$hits" ] || fail "merged shards have other hits than one sweep"
expect_rc 0 "merge again" "$K" db --db m.db merge s0.db s1.db
[ "$(sql m.db "SELECT sum(hits) FROM cases")" = "$hits" ] || fail "merging twice added hits"
echo "  shards 0/2 and 1/2 merge to the same $cases cases and $hits hits (twice: no change)"

expect_rc 0 "list" "$K" db --db f.db list
grep -q "INV-LIVE world request # did not end" out.txt || fail "list: $(cat out.txt)"
expect_rc 0 "list --runs" "$K" db --db f.db list --runs
grep -q "kvsim sweep" out.txt || fail "list --runs: $(cat out.txt)"
expect_rc 0 "show" "$K" db --db f.db show 1
grep -q "^kvs " out.txt && grep -q "trace hash" out.txt || fail "show: $(cat out.txt)"
expect_rc 0 "verify" "$K" db --db f.db verify
grep -q "$cases cases: $cases same" out.txt || fail "verify: $(tail -1 out.txt)"

# ---- replay, shrink, export ------------------------------------------------------------------
expect_rc 2 "replay db:f.db:1" "$K" replay db:f.db:1
grep -q "PROXY_SUBMIT" out.txt || fail "replay printed no trace"
grep -q "(recorded [0-9a-f]*: same)" out.txt || fail "replay did not check the trace hash"
expect_rc 2 "replay --trace-json" "$K" replay db:f.db:1 --trace-json t.json
python3 -c "import json; json.load(open('t.json'))" || fail "--trace-json is not JSON"
grep -q PROXY_SUBMIT out.txt && fail "--trace-json still printed the text trace"
expect_rc 0 "shrink" "$K" shrink db:f.db:1 -o s.kvs
read -r before after < <(sed -n 's/^directives \([0-9]*\) -> \([0-9]*\),.*/\1 \2/p' out.txt)
[ -n "${after:-}" ] && [ "$after" -le 10 ] && [ "$after" -lt "$before" ] || fail "shrink: $(cat out.txt)"
grep -q "stored as the minimized scenario of case 1" out.txt || fail "shrink did not store the result"
expect_rc 2 "replay shrunk .kvs" "$K" replay s.kvs --quiet
grep -q "VIOLATION INV-LIVE" out.txt && grep -q ": same)" out.txt || fail "replay s.kvs: $(cat out.txt)"
expect_rc 2 "replay --min" "$K" replay db:f.db:1 --min --quiet
echo "  case 1: directives $before -> $after; replays from the database and from the .kvs with its trace hash"
expect_rc 0 "export" "$K" db --db f.db export 1 e.kvs
expect_rc 2 "replay export" "$K" replay e.kvs --quiet
# the header describes the shrunk run (the one this file gives), and names the original too
hdr=$(sed -n '1s/.*, minimized: \(INV-[A-Z]* at event [0-9]*\),.*/\1/p' e.kvs)
got=$(grep -m1 '^VIOLATION' out.txt | sed 's/^VIOLATION \(INV-[A-Z]* at event [0-9]*\),.*/\1/')
[ -n "$hdr" ] && [ "$hdr" = "$got" ] || fail "export header '$hdr' is not the shrunk run's '$got': $(head -2 e.kvs)"
grep -q '^# minimized: directives [0-9]* -> [0-9]*; the original: INV-LIVE at event' e.kvs || fail "export header: $(head -3 e.kvs)"
sed 's/^# trace-hash .*/# trace-hash 0123456789abcdef/' e.kvs > bad-hash.kvs
expect_rc 10 "replay with a wrong recorded hash" "$K" replay bad-hash.kvs --quiet
grep -q "not bit-for-bit" err.txt || fail "hash mismatch message: $(cat err.txt)"
expect_rc 0 "export --corpus" "$K" db --db f.db export 1 corpus.kvs --corpus
grep -q "^bugs none" corpus.kvs && grep -q "^# expect-bug err_early_return INV-LIVE" corpus.kvs || fail "corpus form: $(cat corpus.kvs)"
expect_rc 0 "corpus file clean" "$K" run corpus.kvs
expect_rc 2 "corpus file with its switch" "$K" run corpus.kvs --bug err_early_return
expect_rc 0 "export --bin" "$K" db --db f.db export 1 e.bin
expect_rc 2 "replay binary export" "$K" replay e.bin --quiet
echo "  export: .kvs and binary replay it, the header describes the shrunk run; the --corpus form runs clean and fails with its switch"

# ---- verify's exit codes ----------------------------------------------------------------------------
expect_rc 0 "mark fixed" "$K" db --db f.db mark 1 fixed
expect_rc 9 "verify, fixed case came back" "$K" db --db f.db verify
grep -q "CAME BACK" out.txt || fail "verify: $(cat out.txt)"
expect_rc 0 "mark open" "$K" db --db f.db mark 1 open
sql f.db "UPDATE cases SET trace_hash = '0000000000000001' WHERE id = 1" > /dev/null
expect_rc 10 "verify, open case drifted" "$K" db --db f.db verify
grep -q "REGRESSED  *drift" out.txt || fail "verify: $(cat out.txt)"
expect_rc 10 "replay drifted case" "$K" replay db:f.db:1 --quiet
expect_rc 0 "verify --rehash" "$K" db --db f.db verify --rehash
expect_rc 0 "verify after rehash" "$K" db --db f.db verify
echo "  verify: 0 as recorded, 9 when a fixed case came back, 10 when an open one drifted; --rehash records it"

# ---- bad databases: own exit codes, nothing changed ------------------------------------------------
head -c 8192 /dev/urandom > corrupt.db; h0=$(sha256sum < corrupt.db)
expect_rc 6 "corrupt list" "$K" db --db corrupt.db list
grep -q "corrupt.db" err.txt || fail "corrupt: message does not name the file: $(cat err.txt)"
expect_rc 6 "corrupt import" "$K" db --db corrupt.db import e.bin
expect_rc 6 "corrupt sweep" "$K" sweep --seeds 1..3 --db corrupt.db
[ "$h0" = "$(sha256sum < corrupt.db)" ] || fail "the corrupt file was changed"
cp f.db v99.db; sql v99.db "PRAGMA user_version = 99" > /dev/null; d0=$(dump v99.db); h0=$(sha256sum < v99.db)
expect_rc 7 "schema version list" "$K" db --db v99.db list
grep -q "version 99" err.txt || fail "schema version message: $(cat err.txt)"
expect_rc 7 "schema version import" "$K" db --db v99.db import e.bin
[ "$h0" = "$(sha256sum < v99.db)" ] && [ "$d0" = "$(dump v99.db)" ] || fail "the v99 file was changed"
cp f.db ro.db; chmod 0444 ro.db; d0=$(dump ro.db); h0=$(sha256sum < ro.db)
expect_rc 8 "read-only import" "$K" db --db ro.db import e.bin
grep -q "read-only" err.txt || fail "read-only message: $(cat err.txt)"
expect_rc 8 "read-only mark" "$K" db --db ro.db mark 1 fixed
expect_rc 8 "read-only sweep" "$K" sweep --seeds 1..3 --db ro.db
expect_rc 0 "read-only list" "$K" db --db ro.db list
[ "$h0" = "$(sha256sum < ro.db)" ] && [ "$d0" = "$(dump ro.db)" ] || fail "the read-only file was changed"
cp f.db trunc.db; sql trunc.db "UPDATE cases SET scenario = substr(scenario, 1, 30) WHERE id = 1" > /dev/null
d0=$(dump trunc.db)
expect_rc 3 "truncated blob replay" "$K" replay db:trunc.db:1
grep -q "truncated" err.txt || fail "truncated message: $(cat err.txt)"
expect_rc 3 "truncated blob export" "$K" db --db trunc.db export 1 x.kvs
expect_rc 3 "truncated blob verify" "$K" db --db trunc.db verify
grep -q "UNREADABLE" out.txt || fail "verify did not report the damaged case"
[ "$d0" = "$(dump trunc.db)" ] || fail "the database with the truncated blob was changed"
expect_rc 3 "no such case" "$K" replay db:f.db:999
expect_rc 3 "no such database" "$K" db --db nothere.db list
[ -e nothere.db ] && fail "reading created the database"
# damaged b-tree pages behind a sane header: a writer checks the structure first and refuses (6), untouched
"$K" sweep --seeds 1..300 --bug err_early_return --db bt.db > /dev/null
python3 - bt.db <<'PY'
import os, sys
f = open(sys.argv[1], "r+b"); ps = 4096; n = os.path.getsize(sys.argv[1]) // ps
for p in range(2, n):               # page 1 (the header and the schema) stays sane
    f.seek(p * ps + ps // 2); f.write(b"\xff" * 64)
PY
h0=$(sha256sum < bt.db)
"$K" gen --seed 3 --bug err_early_return > bt.kvs
expect_rc 6 "damaged b-tree add" "$K" db --db bt.db add bt.kvs --bug err_early_return
grep -q "damaged: .*nothing was written" err.txt || fail "damaged b-tree message: $(cat err.txt)"
expect_rc 6 "damaged b-tree sweep" "$K" sweep --seeds 1..3 --bug err_early_return --db bt.db
expect_rc 6 "damaged b-tree verify" "$K" db --db bt.db verify
[ "$h0" = "$(sha256sum < bt.db)" ] || fail "the damaged file was written to"
# a full disk is "cannot be written" (8), not "corrupt" (needs a tmpfs: root where mounts are allowed)
mkdir full
if mount -t tmpfs -o size=256k tmpfs full 2> /dev/null; then
  trap 'umount "$tmp/full" 2> /dev/null; chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
  cp f.db full/f.db
  head -c 10000000 /dev/zero > full/filler 2> /dev/null
  expect_rc 8 "full-disk sweep" "$K" sweep --seeds 1..2000 --bug err_early_return --db full/f.db
  grep -q "cannot be written" err.txt || fail "full disk message: $(cat err.txt)"
  rm full/filler
  expect_rc 0 "verify after a full disk" "$K" db --db full/f.db verify
  umount full
  echo "  a full disk: exit 8 'cannot be written', the file verifies afterwards"
else
  echo "  (no tmpfs mount here: the full-disk case is skipped)"
fi
echo "  corrupt 6, schema version 7, read-only 8 (still readable), truncated blob 3, damaged b-tree pages 6: files unchanged"

# ---- scenario format versions --------------------------------------------------------------------
sed 's/^kvs [0-9]*/kvs 9/' e.kvs > v9.kvs
expect_rc 3 "kvs 9" "$K" replay v9.kvs
grep -q "9" err.txt || fail "format version message: $(cat err.txt)"
printf 'KVS\x09rest' > v9.bin
expect_rc 3 "binary v9" "$K" replay v9.bin
grep -q "format version 9" err.txt || fail "binary format message: $(cat err.txt)"
cp f.db fmt.db; sql fmt.db "UPDATE cases SET format_version = 9 WHERE id = 1" > /dev/null
expect_rc 3 "case format 9" "$K" replay db:fmt.db:1
grep -q "format version 9" err.txt || fail "case format message: $(cat err.txt)"
echo "  unknown scenario format versions are named (.kvs, binary, database case)"

# ---- import: libFuzzer and AFL++ layouts -----------------------------------------------------------
expect_rc 1 "owner sweep" "$K" sweep --seeds 1..200 --bug recv_map_race --stop --db own.db
expect_rc 0 "export own" "$K" db --db own.db export 1 own.bin --original
mkdir -p lf afl/out/default/crashes afl/out/s1/crashes
cp own.bin lf/crash-0001; echo hello > lf/notes.txt
cp own.bin 'afl/out/default/crashes/id:000000,sig:06,src:000000,op:havoc,rep:2'
echo "AFL++ readme" > afl/out/default/crashes/README.txt
printf 'x' > afl/out/s1/crashes/id:000001
expect_rc 0 "import" "$K" db --db imp.db import lf afl --bug recv_map_race
grep -q "3 inputs: 1 new cases, 0 known, 1 already imported, 1 clean" out.txt || fail "import: $(cat out.txt)"
[ "$(sql imp.db "SELECT origin || ' ' || hits FROM cases")" = "import 1" ] || fail "import rows"
echo "  import: crash-* and crashes/ files found (README.txt and other files skipped), the same input once"
# a failed import is rolled back: a case it had recorded and its run row are gone, the file as before
cp own.bin lf/crash-0002-other; printf 'y' >> lf/crash-0002-other
before=$(dump imp.db)
expect_rc 3 "import of a missing path" "$K" db --db imp.db import lf no-such-dir --bug recv_map_race
grep -q "no-such-dir" err.txt && grep -q "rolled back" err.txt || fail "failed import: $(cat err.txt)"
[ "$(dump imp.db)" = "$before" ] || fail "a failed import changed the database"
rm lf/crash-0002-other
echo "  import: a failed import (a missing path after a new finding) leaves the database as it was"

# ---- the fuzzer's finding into a regression test ------------------------------------------------------
if [ -x "$F" ]; then
  mkdir -p fz/corpus
  (cd fz && KVCONN_DB="$tmp/fz/live.db" KVCONN_BUG=recv_map_race "$F" -max_total_time=120 -seed=1 -artifact_prefix="$tmp/fz/" corpus > log.txt 2>&1)
  crash=$(ls fz/crash-* 2>/dev/null | head -1)
  [ -n "$crash" ] || fail "fuzz_scenario found nothing with recv_map_race in 120 s"
  grep -q "KVCONN_DB=.*: case 1 (new)" fz/log.txt || fail "the fuzz target did not record into KVCONN_DB: $(tail -5 fz/log.txt)"
  [ "$(sql fz/live.db "SELECT origin || ' ' || invariant FROM cases")" = "fuzz INV-OWNER" ] || fail "KVCONN_DB row"
  KVCONN_DB="$tmp/fz/live.db" KVCONN_BUG=recv_map_race "$F" "$crash" > fz/re.txt 2>&1 && fail "the artifact does not reproduce"
  grep -q "KVCONN_DB=.*: this input is already recorded" fz/re.txt || fail "re-running the artifact: $(grep KVCONN_DB fz/re.txt)"
  [ "$(sql fz/live.db "SELECT hits FROM cases")" = 1 ] || fail "re-running the artifact added a hit"
  expect_rc 0 "import crash" "$K" db --db w.db import fz --bug recv_map_race
  grep -q "new case 1" out.txt || fail "import: $(cat out.txt)"
  expect_rc 0 "list" "$K" db --db w.db list
  expect_rc 0 "shrink" "$K" shrink db:w.db:1
  expect_rc 1 "replay" "$K" replay db:w.db:1 --min
  expect_rc 1 "replay artifact" "$K" replay --fuzz --bug recv_map_race "$crash" --quiet
  mkdir -p corpus-dir
  expect_rc 0 "export" "$K" db --db w.db export 1 corpus-dir/ --corpus
  cp corpus-dir/import-recv_map_race-*.kvs fuzz-recv_map_race.kvs || fail "export to a directory: $(ls corpus-dir)"
  expect_rc 0 "regression test clean" "$K" run fuzz-recv_map_race.kvs
  expect_rc 1 "regression test with its switch" "$K" run fuzz-recv_map_race.kvs --bug recv_map_race
  grep -q "VIOLATION INV-OWNER" out.txt || fail "the regression test reproduces something else"
  echo "  fuzz_scenario finding: KVCONN_DB row; import -> list -> shrink -> replay -> export --corpus -> a corpus file"
else
  echo "  (no $F: the fuzzer part is skipped)"
fi

# ---- add, migrate ------------------------------------------------------------------------------
expect_rc 0 "add" "$K" db --db man.db add e.kvs
[ "$(sql man.db "SELECT origin || ' ' || hits FROM cases")" = "manual 1" ] || fail "add: $(cat out.txt)"
expect_rc 3 "add a clean scenario" "$K" db --db man.db add corpus.kvs
expect_rc 0 "migrate" "$K" db --db man.db migrate
echo "  add records a manual case (a clean file is refused); migrate is a no-op at the current version"

# ---- usage ------------------------------------------------------------------------------------------
for c in replay shrink db; do "$K" $c --help 2>&1 | grep -q "kvsim $c" || fail "$c --help"; done
expect_rc 4 "db without an action" "$K" db
expect_rc 4 "db unknown action" "$K" db frob
expect_rc 4 "replay without input" "$K" replay
expect_rc 4 "shrink without -o" "$K" shrink e.kvs
echo "replay: ok"
