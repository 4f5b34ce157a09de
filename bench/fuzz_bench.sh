#!/usr/bin/env bash
# bench/fuzz_bench.sh — fuzzing throughput and time-to-detect, as a table
# (markdown, for README.md). Not a test: numbers depend on the machine and on
# what else it runs.
#
#   bench/fuzz_bench.sh [--seconds S] [--runs N] [--bugs a,b] [--no-afl]
#
#  1. exec/s of fuzz_scenario for S seconds (default 30), -seed=1, one
#     process, from the seed corpus and from an empty corpus: without
#     sanitizers (a libFuzzer build of its own, in $KVCONN_BENCH_BUILD,
#     default /tmp/kvconn-bench-fuzz) and with ASan+UBSan (build-fuzz, or
#     $KVCONN_FUZZ_BIN);
#  2. time-to-detect of every bug switch (default: all kvsim knows) from an
#     empty corpus, N runs (default 5) with -seed=1..N, one core each, wall
#     seconds from start to the crash (process start-up included), ASan+UBSan
#     build: median and max, and the median executions;
#  3. AFL++ (build-afl, or $KVCONN_AFL_BIN): afl-fuzz on fuzz_scenario for S
#     seconds from the seed corpus: execs_per_sec and stability; then
#     time-to-detect of every switch under afl-fuzz with the custom mutator
#     (lib/libkvconn_afl_mutator.so), N runs with -s 1..N.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=30 runs=5 bugs="" afl=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --bugs) bugs=$2; shift 2 ;;
    --no-afl) afl=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fuzz_bench: unknown option $1" >&2; exit 4 ;;
  esac
done
ASAN=${KVCONN_FUZZ_BIN:-build-fuzz/bin}
PLAIN_DIR=${KVCONN_BENCH_BUILD:-/tmp/kvconn-bench-fuzz}
AFL=${KVCONN_AFL_BIN:-build-afl/bin}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset KVCONN_BUG KVCONN_DB
die() { echo "fuzz_bench: $*" >&2; exit 1; }
[ -x "$ASAN/fuzz_scenario" ] || die "$ASAN/fuzz_scenario missing (make build-fuzz)"
kvsim=$ASAN/kvsim; [ -x "$kvsim" ] || kvsim=build/bin/kvsim
[ -n "$bugs" ] || bugs=$("$kvsim" --help 2>&1 | sed -n 's/^bugs: //p' | tr ' ' ',')

echo "fuzz_bench: building fuzz_scenario without sanitizers in $PLAIN_DIR" >&2
cmake -S . -B "$PLAIN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DKVCONN_FUZZ=ON -DKVCONN_TESTS=OFF -DKVCONN_SANITIZE= > "$tmp/cmake.log" 2>&1 \
  && cmake --build "$PLAIN_DIR" --target fuzz_scenario > "$tmp/build.log" 2>&1 \
  || { tail -20 "$tmp/build.log" "$tmp/cmake.log" >&2; die "build failed"; }
PLAIN=$PLAIN_DIR/bin
opts=$(tools/fuzz_options.sh fuzz_scenario)

# exec/s: BIN FROM(seed|empty) -> average_exec_per_sec
execs_per_s() {
  local d=$tmp/eps-$RANDOM
  mkdir "$d"
  [ "$2" = seed ] && cp corpus/fuzz_scenario/* "$d/"
  "$1" $opts -max_total_time="$secs" -seed=1 -print_final_stats=1 -artifact_prefix="$d/" "$d" > "$d.log" 2>&1
  local e
  e=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$d.log")
  grep -q '^VIOLATION' "$d.log" && e="$e (stopped: $(grep -m1 -o '^VIOLATION [A-Z-]*' "$d.log"))"
  echo "${e:-?}"
}

echo "fuzz_bench: exec/s, $secs s each" >&2
p_seed=$(execs_per_s "$PLAIN/fuzz_scenario" seed); p_empty=$(execs_per_s "$PLAIN/fuzz_scenario" empty)
a_seed=$(execs_per_s "$ASAN/fuzz_scenario" seed); a_empty=$(execs_per_s "$ASAN/fuzz_scenario" empty)

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
maxof() { sort -g | tail -1; }
# One time-to-detect table row: switch, runs that found it, then median and
# max of the seconds in TIMES and the median of the executions in EXECS.
detect_row() { # bug found TIMES EXECS
  if [ "$2" -gt 0 ]; then
    printf '| %s | %d/%d | %.1f | %.1f | %s |' "$1" "$2" "$runs" "$(median < "$3")" "$(maxof < "$3")" "$(median < "$4")"
  else
    printf '| %s | 0/%d | - | - | - |' "$1" "$runs"
  fi
}

detect_rows=()
for bug in ${bugs//,/ }; do
  echo "fuzz_bench: time-to-detect $bug, $runs runs" >&2
  : > "$tmp/t"; : > "$tmp/x"; found=0
  for s in $(seq 1 "$runs"); do
    d=$tmp/det-$bug-$s; mkdir "$d"
    t0=$(date +%s.%N)
    KVCONN_BUG=$bug timeout 300 "$ASAN/fuzz_scenario" $opts -seed="$s" -max_total_time=240 -print_final_stats=1 \
      -artifact_prefix="$d/" "$d" > "$d.log" 2>&1
    t1=$(date +%s.%N)
    if grep -q '^VIOLATION' "$d.log"; then
      found=$((found + 1))
      echo "$t1 - $t0" | bc -l >> "$tmp/t"
      sed -n 's/^stat::number_of_executed_units: *//p' "$d.log" >> "$tmp/x"
    fi
  done
  detect_rows+=("$(detect_row "$bug" "$found" "$tmp/t" "$tmp/x")")
done

afl_eps="not run" afl_stab="not run" afl_mode="" afl_rows=()
if [ "$afl" = 1 ]; then
  if command -v afl-fuzz > /dev/null && [ -x "$AFL/fuzz_scenario" ]; then
    echo "fuzz_bench: afl-fuzz $secs s" >&2
    mkdir "$tmp/afl-in"
    find corpus/fuzz_scenario -maxdepth 1 -type f ! -name 'repro-*' -exec cp {} "$tmp/afl-in/" \;
    AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 AFL_FAST_CAL=1 \
      timeout $((secs + 120)) afl-fuzz -V "$secs" -i "$tmp/afl-in" -o "$tmp/afl-out" -x fuzz/fuzz_scenario.dict \
      -- "$AFL/fuzz_scenario" > "$tmp/afl.log" 2>&1
    st=$tmp/afl-out/default/fuzzer_stats
    afl_eps=$(sed -n 's/^execs_per_sec *: *//p' "$st" 2>/dev/null)
    afl_stab=$(sed -n 's/^stability *: *//p' "$st" 2>/dev/null)
    afl_mode=$(sed -n 's/^target_mode *: *//p' "$st" 2>/dev/null)
    # time-to-detect under afl-fuzz with the structure-aware custom mutator,
    # from the corpus without its repro-* seeds (afl-fuzz needs an input)
    MUT=${KVCONN_AFL_MUTATOR:-$AFL/../lib/libkvconn_afl_mutator.so}
    if [ -f "$MUT" ]; then
      for bug in ${bugs//,/ }; do
        echo "fuzz_bench: afl-fuzz + custom mutator, time-to-detect $bug, $runs runs" >&2
        : > "$tmp/at"; : > "$tmp/ax"; found=0
        for s in $(seq 1 "$runs"); do
          o=$tmp/afl-det-$bug-$s
          t0=$(date +%s.%N)
          KVCONN_BUG=$bug AFL_CUSTOM_MUTATOR_LIBRARY="$MUT" AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 \
          AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 AFL_FAST_CAL=1 AFL_SKIP_CRASHES=1 \
          AFL_BENCH_UNTIL_CRASH=1 timeout 300 afl-fuzz -s "$s" -V 240 -i "$tmp/afl-in" -o "$o" \
            -x fuzz/fuzz_scenario.dict -- "$AFL/fuzz_scenario" > "$o.log" 2>&1
          t1=$(date +%s.%N)
          c=$(sed -n 's/^saved_crashes *: *//p' "$o/default/fuzzer_stats" 2>/dev/null)
          if [ "${c:-0}" -gt 0 ]; then
            found=$((found + 1))
            echo "$t1 - $t0" | bc -l >> "$tmp/at"
            sed -n 's/^execs_done *: *//p' "$o/default/fuzzer_stats" >> "$tmp/ax"
          fi
        done
        afl_rows+=("$(detect_row "$bug" "$found" "$tmp/at" "$tmp/ax")")
      done
    fi
  else
    afl_eps="afl-fuzz or $AFL/fuzz_scenario missing"
  fi
fi

echo "## fuzz_scenario throughput ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg) at the end; $secs s per cell, -seed=1)"
echo
echo "| build | exec/s from corpus/fuzz_scenario | exec/s from an empty corpus |"
echo "|---|---|---|"
echo "| libFuzzer, no sanitizers | $p_seed | $p_empty |"
echo "| libFuzzer, ASan+UBSan | $a_seed | $a_empty |"
echo "| AFL++ persistent (from corpus) | $afl_eps (stability ${afl_stab}; ${afl_mode% }) | - |"
echo
echo "## time-to-detect from an empty corpus (ASan+UBSan, one core, -seed=1..$runs)"
echo
echo "| switch | found | median s | max s | median execs |"
echo "|---|---|---|---|---|"
printf '%s\n' "${detect_rows[@]}"
if [ ${#afl_rows[@]} -gt 0 ]; then
  echo
  echo "## time-to-detect under AFL++ with the custom mutator (from corpus/fuzz_scenario without repro-* seeds, -s 1..$runs)"
  echo
  echo "| switch | found | median s | max s | median execs |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${afl_rows[@]}"
fi
