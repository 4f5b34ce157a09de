#!/usr/bin/env bash
# The fuzz targets, as CI runs them (build-fuzz: clang, libFuzzer, ASan+UBSan):
#  - fuzz_canary crashes on its known input (the crash plumbing works);
#  - fuzz_wire, fuzz_scenario_text and fuzz_scenario run 10 s each from an
#    empty corpus without a finding (switches off);
#  - with KVCONN_BUG=<switch>, fuzz_scenario finds each P2P bug from an empty
#    corpus (fixed -seed), and the crash input reproduces the violation.
set -uo pipefail
cd "$(dirname "$0")/.."
B=build-fuzz/bin
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "fuzz: FAILED — $*" >&2; exit 1; }
for t in fuzz_canary fuzz_wire fuzz_scenario_text fuzz_scenario; do [ -x "$B/$t" ] || fail "$B/$t missing"; done

printf 'KVCANARY' > "$tmp/canary"
"$B/fuzz_canary" "$tmp/canary" > "$tmp/canary.log" 2>&1 && fail "fuzz_canary did not crash on its known input"
grep -q "deadly signal" "$tmp/canary.log" || fail "fuzz_canary crashed without libFuzzer's report"
echo "  fuzz_canary: crashes on its known input"

for t in fuzz_wire fuzz_scenario_text fuzz_scenario; do
  mkdir -p "$tmp/$t"
  "$B/$t" -max_total_time=10 -seed=1 -artifact_prefix="$tmp/$t-" "$tmp/$t" > "$tmp/$t.log" 2>&1 \
    || { tail -30 "$tmp/$t.log" >&2; fail "$t found something with every switch off"; }
  runs=$(grep -o 'Done [0-9]* runs' "$tmp/$t.log" | grep -o '[0-9]*' | head -1)
  echo "  $t: ${runs:-?} runs in 10 s, clean"
done

for spec in err_early_return:INV-LIVE recv_map_race:INV-OWNER empty_pull_completion:SCHED-ASSERT; do
  bug=${spec%%:*}; inv=${spec#*:}
  mkdir -p "$tmp/c-$bug"
  KVCONN_BUG=$bug "$B/fuzz_scenario" -max_total_time=120 -seed=1 -artifact_prefix="$tmp/$bug-" "$tmp/c-$bug" > "$tmp/$bug.log" 2>&1 \
    && fail "fuzz_scenario did not find $bug in 120 s"
  grep -q "^VIOLATION $inv" "$tmp/$bug.log" || fail "$bug found as: $(grep -m1 '^VIOLATION' "$tmp/$bug.log")"
  crash=$(ls "$tmp/$bug-"crash-* 2>/dev/null | head -1)
  [ -n "$crash" ] || fail "$bug: no crash artifact"
  KVCONN_BUG=$bug "$B/fuzz_scenario" "$crash" > "$tmp/$bug.re" 2>&1 && fail "$bug: the artifact does not reproduce"
  grep -q "^VIOLATION $inv" "$tmp/$bug.re" || fail "$bug: the artifact reproduces something else"
  echo "  fuzz_scenario finds $bug as $inv from an empty corpus, and its artifact reproduces it"
done
echo "fuzz: ok"
