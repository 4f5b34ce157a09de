#!/usr/bin/env bash
# The libFuzzer targets, as CI runs them (build-fuzz: clang, libFuzzer,
# ASan+UBSan; KVCONN_FUZZ_BIN overrides the directory):
#  - fuzz_canary crashes on its known input, and finds that input from its
#    seed corpus within 30 s (the engine's mutation and feedback work);
#  - every seed of corpus/<target>/ runs clean with every switch off;
#  - each corpus/fuzz_scenario/repro-<switch>-* violates with KVCONN_BUG=<switch>
#    (the minimized repro of every known bug is still a repro);
#  - fuzz_wire, fuzz_scenario_text and fuzz_scenario fuzz KVCONN_FUZZ_SECONDS
#    (default 30) each from their seed corpus, with their options and
#    dictionaries, without a finding.
# That the fuzzer finds each bug from an empty corpus is tools/test_selftest.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${KVCONN_FUZZ_BIN:-build-fuzz/bin}
secs=${KVCONN_FUZZ_SECONDS:-30}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset KVCONN_BUG KVCONN_DB
fail() { echo "fuzz: FAILED — $*" >&2; exit 1; }
for t in fuzz_canary fuzz_wire fuzz_scenario_text fuzz_scenario; do [ -x "$B/$t" ] || fail "$B/$t missing"; done

printf 'KVCANARY' > "$tmp/canary"
"$B/fuzz_canary" "$tmp/canary" > "$tmp/canary.log" 2>&1 && fail "fuzz_canary did not crash on its known input"
grep -q "deadly signal" "$tmp/canary.log" || fail "fuzz_canary crashed without libFuzzer's report"
mkdir "$tmp/canary-corpus"; cp corpus/fuzz_canary/* "$tmp/canary-corpus/"
"$B/fuzz_canary" $(tools/fuzz_options.sh fuzz_canary) -max_total_time=30 -seed=1 -artifact_prefix="$tmp/canary-" \
  "$tmp/canary-corpus" > "$tmp/canary-find.log" 2>&1 && fail "fuzz_canary did not find KVCANARY in 30 s"
grep -q "deadly signal" "$tmp/canary-find.log" || fail "fuzz_canary failed, but not by finding its input"
echo "  fuzz_canary: crashes on its known input and finds it from its corpus ($(grep -o '^#[0-9]*' "$tmp/canary-find.log" | tail -1 | tr -d '#') execs)"

for t in fuzz_wire fuzz_scenario_text fuzz_scenario; do
  n=$(find "corpus/$t" -type f | wc -l)
  [ "$n" -gt 0 ] || fail "corpus/$t is empty"
  "$B/$t" $(tools/fuzz_options.sh "$t") -runs=0 "corpus/$t" > "$tmp/$t.seeds.log" 2>&1 \
    || { tail -30 "$tmp/$t.seeds.log" >&2; fail "a seed of corpus/$t fails with every switch off"; }
  echo "  $t: $n seeds run clean"
done

nrepro=0; frames=""
for f in corpus/fuzz_scenario/repro-*; do
  [ -e "$f" ] || continue
  name=$(basename "$f"); bug=${name#repro-}; bug=${bug%-*}
  KVCONN_BUG=$bug "$B/fuzz_scenario" "$f" > "$tmp/repro.log" 2>&1 && fail "$name does not violate with KVCONN_BUG=$bug"
  grep -q '^VIOLATION ' "$tmp/repro.log" || fail "$name crashes without a VIOLATION line"
  # the crash's stack names the invariant's own frame (crash deduplication keys on it)
  inv=$(sed -n 's/^VIOLATION \([A-Z-]*\) .*/\1/p' "$tmp/repro.log" | head -1)
  frame=violation_$(echo "$inv" | tr 'A-Z-' 'a-z_')
  grep -q "in $frame " "$tmp/repro.log" || fail "$name: $inv crashed without the frame $frame: $(grep -m3 ' in ' "$tmp/repro.log")"
  frames="$frames $frame"
  nrepro=$((nrepro+1))
done
[ "$nrepro" -gt 0 ] || fail "no repro-* seeds in corpus/fuzz_scenario"
kvsim=$B/kvsim; [ -x "$kvsim" ] || kvsim=build/bin/kvsim
for b in $("$kvsim" --help 2>&1 | sed -n 's/^bugs: //p'); do
  ls corpus/fuzz_scenario/repro-"$b"-* > /dev/null 2>&1 || fail "no corpus/fuzz_scenario/repro-$b-* for the switch $b"
done
echo "  fuzz_scenario: $nrepro repro-* seeds violate with their switch (one per switch kvsim knows); crash frames:$(echo $frames | tr ' ' '\n' | sort -u | tr '\n' ' ')"

# Anything found with every switch off fails the run: a crash (ASan,
# UBSan, any abort) or a simulator VIOLATION (a model finding). The input is
# kept under $KVCONN_FINDINGS_DIR (default findings/ beside the repository)
# so CI's temporary directory does not take it along.
for t in fuzz_wire fuzz_scenario_text fuzz_scenario; do
  mkdir "$tmp/c-$t"; cp corpus/"$t"/* "$tmp/c-$t/"
  if ! "$B/$t" $(tools/fuzz_options.sh "$t") -max_total_time="$secs" -seed=1 -print_final_stats=1 \
    -artifact_prefix="$tmp/$t-" "$tmp/c-$t" > "$tmp/$t.log" 2>&1; then
    fd=${KVCONN_FINDINGS_DIR:-findings}; mkdir -p "$fd"; cp "$tmp/$t"-crash-* "$fd/" 2>/dev/null
    grep -m1 -A40 -E '^VIOLATION|ERROR:' "$tmp/$t.log" >&2
    fail "$t found something with every switch off (input copied to $fd/; replay: kvsim replay --fuzz FILE)"
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$t.log")
  echo "  $t: ${runs:-?} runs in $secs s from its corpus, clean"
done
echo "fuzz: ok"
