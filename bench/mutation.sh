#!/usr/bin/env bash
# bench/mutation.sh — the mutation benchmark: how many source mutants of
# core/*.c the harness (kvsim's sweeps with the invariant checker, then
# fuzz_scenario) kills, and then the core's unit tests. Not a test and not a CI job: the full listing takes
# hours. docs/mutation.md explains the columns and how to triage a survivor.
#
#   bench/mutation.sh [--sample N] [--seed S] [--files 'core/p2p_*.c' ...] [--ops ror,pm1,...]
#                     [--budget quick|full] [--no-fuzz] [--no-unit] [--out DIR] [--resume] [--report]
#
#   --sample N      a random sample of N mutants of the listing (--seed S, default 1)
#   --files GLOB    source files to mutate, relative to the repository (repeatable; default core/*.c)
#   --ops LIST      operators (tools/mutate.py ops; default ror,pm1,call,neg,swap,ret,logic)
#   --budget B      full (default): faults seeds 1..2000, load 1..500, steady 1..300, staged 1..500
#                   (fault seeds with --kvmem staged), 20 s of fuzzing;
#                   quick: faults 1..200, load 1..40, steady 1..40, staged 1..40, 5 s of fuzzing
#   --no-fuzz       no fuzz_scenario run for survivors
#   --no-unit       no unit-test stage for survivors
#   --out DIR       results (default build-mut/results): results.tsv (one row per mutant, appended as
#                   each ends), report.md and report.tsv (the table and the rows with their verdicts),
#                   mutants.tsv (the plan), meta.env, baseline/, logs/
#   --resume        continue the run in --out (same options and sources), skipping finished mutants
#   --report        print the report of --out again (after editing bench/mutation_equivalent.txt)
#   --only ID       run only this mutant of the listing (repeatable; for triage: with --out elsewhere)
#
# Per mutant: the mutated file is written into a scratch copy of the tree
# ($KVCONN_MUT_DIR, default /tmp/kvmut/src; never into this checkout), kvsim
# is rebuilt incrementally (gcc, the default preset's settings), and
#  1. a mutated file whose object code (debug info stripped) equals the
#     original's is "equivalent_tce" and runs nothing;
#  2. kvsim sweep --jobs 2 --stop over faults, then load, then steady, then
#     staged (fault seeds with the staged block memory, core/kvmem.h: the
#     absorb and expose paths that host memory makes no-ops): a
#     violation (the invariant is recorded), a crash or an exit other than 0,
#     or a run past 10x the unmutated build's time (at least 10 s) kills it;
#  3. a survivor's trace hashes (sweep --hashes) over the same seeds are
#     compared with the unmutated build's: "identical" or "changed:N";
#  4. then fuzz_scenario (the fuzz preset's settings: clang, libFuzzer,
#     ASan+UBSan), built incrementally from the same mutated tree, runs from
#     corpus/fuzz_scenario with fuzz/fuzz_scenario.options, -seed=1: a
#     violation or a sanitizer report kills it;
#  5. then the core's unit tests (UNIT_TESTS below: the tests that break
#     the core on purpose and expect its assertions and probes to see it,
#     and the connector, proxy, store, wire and memory tests), built incrementally
#     with gcc and criterion: a failing test, or one past 120 s, kills it
#     ("unit:TEST"). The report gives the kill rate with and without them.
# The original file is restored after each mutant (trap on exit and
# signals); a run killed with SIGKILL is repaired by the next run's sync.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCR=${KVCONN_MUT_DIR:-/tmp/kvmut}
sample="" seed=1 files=() ops="" budget=full fuzz=1 unit=1 out="" resume=0 report_only=0 only=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "mutation.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --sample) sample=${2:?}; shift 2 ;;
    --seed) seed=${2:?}; shift 2 ;;
    --files) files+=("${2:?}"); shift 2 ;;
    --ops) ops=${2:?}; shift 2 ;;
    --budget) budget=${2:?}; shift 2 ;;
    --no-fuzz) fuzz=0; shift ;;
    --no-unit) unit=0; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --resume) resume=1; shift ;;
    --report) report_only=1; shift ;;
    --only) only+=("${2:?}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
  esac
done
[ ${#files[@]} -gt 0 ] || files=("core/*.c")
out=${out:-$ROOT/build-mut/results}
case "$out" in /*) ;; *) out=$PWD/$out ;; esac
EQUIV=$ROOT/bench/mutation_equivalent.txt
report() { python3 "$ROOT/bench/mutation_util.py" report "$out" --equiv "$EQUIV"; }
if [ "$report_only" = 1 ]; then
  [ -f "$out/results.tsv" ] || die "no $out/results.tsv"
  report
  exit 0
fi

case "$budget" in
  full) S_FAULTS=1..2000 S_LOAD=1..500 S_STEADY=1..300 S_STAGED=1..500 FUZZ_S=20 ;;
  quick) S_FAULTS=1..200 S_LOAD=1..40 S_STEADY=1..40 S_STAGED=1..40 FUZZ_S=5 ;;
  *) die "--budget is quick or full, not '$budget'" ;;
esac
WORKLOADS=(faults load steady staged)
declare -A SEEDS=([faults]=$S_FAULTS [load]=$S_LOAD [steady]=$S_STEADY [staged]=$S_STAGED)
# what each workload is to kvsim sweep
declare -A WARGS=([faults]="--workload faults" [load]="--workload load" [steady]="--workload steady"
  [staged]="--workload faults --kvmem staged")
JOBS=2
# kvsim runs niced, under 4 GiB of address space each (a mutant that grows
# without bound must not take the shared machine's memory); libFuzzer has its
# own -rss_limit_mb (2048 by default)
NICE=(nice -n 10)
MEMLIMIT=(bash -c 'ulimit -v 4194304; exec "$@"' kvsim)

mkdir -p "$SCR" "$out"
exec 9> "$SCR/lock"
flock -w 120 9 || die "another mutation run holds $SCR/lock (waited 2 min)"

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---- the scratch tree ---------------------------------------------------------
# src/: built, mutated in place; pristine/: the originals the mutants and the
# restores are made from. Both are synced by content from this checkout's
# tracked and untracked-not-ignored files, so a file left mutated by a killed
# run is put back (and gets a new mtime, so ninja recompiles it). The
# fingerprint (meta.env; --resume requires the same) leaves out the
# benchmark's own files and the docs.
SRC=$SCR/src PRISTINE=$SCR/pristine BUILD=$SCR/build FBUILD=$SCR/build-fuzz UBUILD=$SCR/build-unit
mkdir -p "$SRC" "$PRISTINE"
log "syncing $ROOT -> $SRC"
fingerprint=$(git -C "$ROOT" ls-files -co --exclude-standard -z \
  | python3 "$ROOT/bench/mutation_util.py" sync "$ROOT" "$SRC" "$PRISTINE" \
      --unprinted bench/ --unprinted docs/ --unprinted README.md --unprinted tools/mutate.py)
commit=$(git -C "$ROOT" describe --always --dirty 2> /dev/null || echo unknown)

current=""   # the mutated file while a mutant is in place
restore() {
  if [ -n "$current" ]; then
    cp "$PRISTINE/$current" "$SRC/$current"
    current=""
  fi
}
trap 'restore' EXIT
trap 'restore; exit 130' INT
trap 'restore; exit 143' TERM

configure() { # DIR cmake-args...
  local dir=$1; shift
  [ -f "$dir/build.ninja" ] && return 0
  log "configuring $dir"
  "${NICE[@]}" cmake -S "$SRC" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVCONN_TESTS=OFF "$@" \
    > "$SCR/configure-$(basename "$dir").log" 2>&1 || { tail -20 "$SCR/configure-$(basename "$dir").log" >&2; die "configure $dir failed"; }
}
# the default preset's cache variables (the tests are not built: only kvsim runs);
# builds run under LC_ALL=C so the compilers' first error line is plain ASCII
configure "$BUILD" -DCMAKE_C_COMPILER=gcc
KVSIM=$BUILD/bin/kvsim
build_kvsim() { LC_ALL=C timeout -k 10 600 "${NICE[@]}" cmake --build "$BUILD" -j "$JOBS" --target kvsim; }
# the fuzz preset's
configure_fuzz() { configure "$FBUILD" -DCMAKE_C_COMPILER=clang -DKVCONN_FUZZ=ON -DKVCONN_SANITIZE=address,undefined; }
build_fuzz() { LC_ALL=C timeout -k 10 600 "${NICE[@]}" cmake --build "$FBUILD" -j "$JOBS" --target fuzz_scenario; }
# the unit stage: the default preset's settings with the tests on
UNIT_TESTS=(test_assert test_block_pool test_corpus test_engine_tables test_kvmem test_p2p test_proxy test_scenario test_store test_wire)
configure_unit() { configure "$UBUILD" -DCMAKE_C_COMPILER=gcc -DKVCONN_TESTS=ON; }
build_unit() { LC_ALL=C timeout -k 10 600 "${NICE[@]}" cmake --build "$UBUILD" -j "$JOBS" --target "${UNIT_TESTS[@]}"; }

log "building the unmutated kvsim"
build_kvsim > "$SCR/build-clean.log" 2>&1 || { tail -30 "$SCR/build-clean.log" >&2; die "the unmutated tree does not build"; }
obj_of() { echo "$BUILD/CMakeFiles/kvconn_core.dir/$1.o"; }
mkdir -p "$SCR/orig-obj"
stripped() { objcopy --strip-debug "$1" "$2"; }

# ---- the plan -----------------------------------------------------------------
listed=$(python3 "$ROOT/tools/mutate.py" list --root "$PRISTINE" --files "${files[@]}" ${ops:+--ops "$ops"} | wc -l)
python3 "$ROOT/tools/mutate.py" list --root "$PRISTINE" --files "${files[@]}" ${ops:+--ops "$ops"} \
  ${sample:+--sample "$sample" --seed "$seed"} > "$SCR/plan.tsv"
if [ ${#only[@]} -gt 0 ]; then
  printf '%s\n' "${only[@]}" | awk -F'\t' 'NR == FNR { want[$1] = 1; next } $1 in want' - "$SCR/plan.tsv" > "$SCR/plan.only"
  mv "$SCR/plan.only" "$SCR/plan.tsv"
fi
[ -s "$SCR/plan.tsv" ] || die "no mutants for --files ${files[*]} ${ops:+--ops $ops} ${only[*]:+--only ${only[*]}}"

cmdline="bench/mutation.sh${sample:+ --sample $sample --seed $seed}"
for f in "${files[@]}"; do cmdline+=" --files '$f'"; done
cmdline+="${ops:+ --ops $ops} --budget $budget$([ "$fuzz" = 1 ] || echo ' --no-fuzz')$([ "$unit" = 1 ] || echo ' --no-unit')"
for o in "${only[@]}"; do cmdline+=" --only $o"; done
newmeta=$(printf '%s\n' "fingerprint=$fingerprint" "budget=$budget" "fuzz=$([ "$fuzz" = 1 ] && echo "${FUZZ_S} s" || echo off)" \
  "files=${files[*]}" "ops=${ops:-default}" "sample=${sample:-all}" "seed=$seed" \
  "seeds_faults=$S_FAULTS" "seeds_load=$S_LOAD" "seeds_steady=$S_STEADY" "seeds_staged=$S_STAGED" "only=${only[*]}" \
  "unit=$([ "$unit" = 1 ] && echo "${UNIT_TESTS[*]}" || echo off)")
if [ "$resume" = 1 ]; then
  { [ -f "$out/meta.env" ] && [ -f "$out/mutants.tsv" ]; } || die "--resume: no run in $out"
  [ "$(grep -v -e '^commit=' -e '^command=' -e '^started=' -e '^host=' -e '^cores=' -e '^listed=' -e '^limits=' "$out/meta.env")" = "$newmeta" ] \
    || die "--resume: $out was run with other options or sources (see $out/meta.env)"
  cmp -s "$SCR/plan.tsv" "$out/mutants.tsv" || die "--resume: the mutant listing differs from $out/mutants.tsv"
else
  rm -rf "$out/logs" "$out/baseline" "$out/results.tsv" "$out/report.md" "$out/report.tsv" "$out/meta.env" "$out/mutants.tsv"
  cp "$SCR/plan.tsv" "$out/mutants.tsv"
  {
    echo "$newmeta"
    echo "commit=$commit"
    echo "command=$cmdline"
    echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host=$(hostname)"
    echo "cores=$(nproc)"
    echo "listed=$listed"
  } > "$out/meta.env"
  printf 'id\tfile\tfunc\top\tstatus\thow\tworkload\tseed\thashes\tfuzz\tbuild_s\tkill_s\twall_s\tdesc\tnote\n' > "$out/results.tsv"
fi
mkdir -p "$out/logs" "$out/baseline"

# ---- the unmutated baseline: times, hashes, a clean fuzz run -----------------------
declare -A LIMIT
hashes() { # WORKLOAD SEEDS OUTFILE LIMIT: sweep --hashes in two processes (halves of the range)
  local w=$1 a=${2%..*} b=${2#*..} f=$3 lim=$4 mid rc=0
  mid=$(( (a + b) / 2 ))
  timeout -k 5 "$lim" "${NICE[@]}" "${MEMLIMIT[@]}" "$KVSIM" sweep ${WARGS[$w]} --seeds "$a..$mid" --hashes > "$f.1" 2> "$f.err" &
  local p1=$!
  timeout -k 5 "$lim" "${NICE[@]}" "${MEMLIMIT[@]}" "$KVSIM" sweep ${WARGS[$w]} --seeds "$((mid + 1))..$b" --hashes > "$f.2" 2>> "$f.err" || rc=$?
  wait "$p1" || rc=$?
  cat "$f.1" "$f.2" > "$f"
  rm -f "$f.1" "$f.2"
  return "$rc"
}
limits=""
for w in "${WORKLOADS[@]}"; do
  t0=$(now)
  "${NICE[@]}" "$KVSIM" sweep ${WARGS[$w]} --seeds "${SEEDS[$w]}" --jobs "$JOBS" > "$out/baseline/sweep-$w.txt" 2>&1 \
    || die "the unmutated build fails the $w sweep (see $out/baseline/sweep-$w.txt)"
  t=$(since "$t0")
  LIMIT[$w]=$(awk -v t="$t" 'BEGIN { l = 10 * t; if (l < 10) l = 10; printf "%d", l + 0.999 }')
  hashes "$w" "${SEEDS[$w]}" "$SCR/hashes-$w.txt" 600 || die "the unmutated build's $w hashes failed"
  if [ "$resume" = 1 ] && [ -f "$out/baseline/hashes-$w.txt" ]; then
    cmp -s "$SCR/hashes-$w.txt" "$out/baseline/hashes-$w.txt" || die "--resume: the unmutated $w hashes differ from $out/baseline"
  fi
  cp "$SCR/hashes-$w.txt" "$out/baseline/hashes-$w.txt"
  limits+="${limits:+, }$w ${LIMIT[$w]} s (clean $t s)"
  log "baseline $w ${SEEDS[$w]}: clean in $t s, limit ${LIMIT[$w]} s"
done
sed -i '/^limits=/d' "$out/meta.env"; echo "limits=$limits" >> "$out/meta.env"
# the originals' object code, for the identical-code check
while read -r f; do
  o=$(obj_of "$f")
  [ -f "$o" ] || die "no object $o for $f (only core/*.c and transport/*.c are in kvconn_core)"
  stripped "$o" "$SCR/orig-obj/$(echo "$f" | tr / _).o"
done < <(cut -f1 "$SCR/plan.tsv" | cut -d: -f1 | sort -u)
FUZZ_OPTS=""
if [ "$fuzz" = 1 ]; then
  configure_fuzz
  log "building the unmutated fuzz_scenario"
  build_fuzz > "$SCR/build-fuzz-clean.log" 2>&1 || { tail -30 "$SCR/build-fuzz-clean.log" >&2; die "fuzz build failed"; }
  FUZZ_OPTS=$("$SRC/tools/fuzz_options.sh" fuzz_scenario "$SRC/fuzz")
fi
# The invariant of a log's first "VIOLATION INV ..." line. (No "| head" in
# this script: under pipefail a writer cut short by SIGPIPE fails the
# pipeline, and set -e the script.)
first_violation() { awk '/^VIOLATION / && !f { print $2; f = 1 }' "$1"; }
run_fuzz() { # LOGDIR: runs fuzz_scenario for FUZZ_S s; prints "clean" or "fuzz:KIND"
  local d=$1 rc=0
  rm -rf "$d/fuzz-work"; mkdir -p "$d/fuzz-work"
  # shellcheck disable=SC2086 # FUZZ_OPTS is a list of -key=value flags
  (cd "$d" && env -u KVCONN_BUG -u KVCONN_DB timeout -k 5 $((FUZZ_S * 3 + 60)) "${NICE[@]}" "$FBUILD/bin/fuzz_scenario" \
    $FUZZ_OPTS -max_total_time="$FUZZ_S" -seed=1 -print_final_stats=1 -artifact_prefix="$d/" \
    "$d/fuzz-work" "$SRC/corpus/fuzz_scenario" > "$d/fuzz.log" 2>&1) || rc=$?
  rm -rf "$d/fuzz-work"
  local v
  v=$(first_violation "$d/fuzz.log")
  if [ -n "$v" ]; then echo "fuzz:$v"
  elif grep -q 'ERROR: LeakSanitizer' "$d/fuzz.log"; then echo "fuzz:leak"
  elif grep -q 'ERROR: AddressSanitizer' "$d/fuzz.log"; then echo "fuzz:asan"
  elif grep -q 'runtime error:' "$d/fuzz.log"; then echo "fuzz:ubsan"
  elif grep -q 'ERROR: libFuzzer: timeout' "$d/fuzz.log"; then echo "fuzz:timeout"
  elif grep -q 'ERROR: libFuzzer: out-of-memory' "$d/fuzz.log"; then echo "fuzz:oom"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "fuzz:hang"
  elif [ "$rc" = 0 ]; then echo "clean"
  else echo "fuzz:crash"
  fi
}
if [ "$fuzz" = 1 ]; then
  mkdir -p "$out/baseline/fuzz"
  fz=$(run_fuzz "$out/baseline/fuzz")
  [ "$fz" = clean ] || die "the unmutated fuzz_scenario is not clean in $FUZZ_S s ($fz): see $out/baseline/fuzz/fuzz.log"
  log "baseline fuzz_scenario: clean in $FUZZ_S s ($(sed -n 's/^stat::number_of_executed_units: *//p' "$out/baseline/fuzz/fuzz.log") runs)"
fi

run_unit() { # LOGDIR: runs UNIT_TESTS from the scratch tree (test_corpus reads corpus/); prints "clean" or
            # "unit:TEST" (the first that failed)
  local d=$1 t rc
  for t in "${UNIT_TESTS[@]}"; do
    rc=0
    (cd "$SRC" && env -u KVCONN_BUG -u KVCONN_DB timeout -k 5 120 "${NICE[@]}" "$UBUILD/bin/$t" > "$d/unit-$t.log" 2>&1) || rc=$?
    if [ "$rc" != 0 ]; then echo "unit:$t"; return; fi
    rm -f "$d/unit-$t.log"
  done
  echo clean
}
if [ "$unit" = 1 ]; then
  configure_unit
  log "building the unmutated unit tests"
  build_unit > "$SCR/build-unit-clean.log" 2>&1 || { tail -30 "$SCR/build-unit-clean.log" >&2; die "unit-test build failed"; }
  mkdir -p "$out/baseline/unit"
  ut=$(run_unit "$out/baseline/unit")
  [ "$ut" = clean ] || die "the unmutated unit tests fail ($ut): see $out/baseline/unit"
  log "baseline unit tests: clean (${UNIT_TESTS[*]})"
fi

# ---- the mutants ----------------------------------------------------------------
total=$(wc -l < "$SCR/plan.tsv")
i=0
row() { # the result row: status how workload seed hashes fuzz build_s kill_s wall_s note
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$file" "$func" "$op" "$1" "$2" "$3" "$4" "$5" "$6" \
    "$7" "$8" "$9" "$desc" "${10}" >> "$out/results.tsv"
  log "[$i/$total] $id: $1 ${2:+($2${3:+, $3}${4:+ seed $4})} ${5:+hashes $5} ${6:+fuzz $6}"
}
while IFS=$'\t' read -r id func desc <&3; do
  i=$((i + 1))
  if [ "$resume" = 1 ] && awk -F'\t' -v id="$id" '$1 == id { f = 1 } END { exit !f }' "$out/results.tsv"; then continue; fi
  file=${id%%:*} rest=${id#*:}; rest=${rest#*:}; rest=${rest#*:}; op=${rest%%:*}
  d=$out/logs/$(echo "$id" | tr '/:' '__')
  rm -rf "$d"; mkdir -p "$d"
  t_start=$(now)
  current=$file
  python3 "$ROOT/tools/mutate.py" apply "$id" --src "$PRISTINE" --root "$SRC" > /dev/null
  t0=$(now)
  brc=0
  build_kvsim > "$d/build.log" 2>&1 || brc=$?
  if [ "$brc" != 0 ]; then
    restore
    if [ "$brc" = 124 ] || [ "$brc" = 137 ]; then note="build timed out"
    else note=$(grep -m1 -E 'error:|Error' "$d/build.log" | sed "s|$SRC/||; s/\t/ /g" | cut -c1-200 || true)
    fi
    row not_compiled "" "" "" "" "" "$(since "$t0")" "" "$(since "$t_start")" "$note"
    continue
  fi
  build_s=$(since "$t0")
  stripped "$(obj_of "$file")" "$SCR/mut.o"
  if cmp -s "$SCR/mut.o" "$SCR/orig-obj/$(echo "$file" | tr / _).o"; then
    restore
    row equivalent_tce "" "" "" "" "" "$build_s" "" "$(since "$t_start")" "identical object code"
    continue
  fi
  status="" how="" wl="" kseed="" kill_s="" hashes_v="" fuzz_v="" note=""
  t_run=$(now)
  for w in "${WORKLOADS[@]}"; do
    rc=0
    timeout -k 5 "${LIMIT[$w]}" "${NICE[@]}" "${MEMLIMIT[@]}" "$KVSIM" sweep ${WARGS[$w]} \
      --seeds "${SEEDS[$w]}" --jobs "$JOBS" --stop \
      > "$d/sweep-$w.log" 2>&1 || rc=$?
    inv=$(first_violation "$d/sweep-$w.log")
    fseed=$(awk '/^first violation: seed / && !f { print $4; f = 1 }' "$d/sweep-$w.log")
    if [ -n "$inv" ]; then status=killed how=$inv
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=killed how=timeout note="past ${LIMIT[$w]} s"
    elif [ "$rc" = 5 ]; then status=killed how=sim-error note=$(grep -m1 '^runs' "$d/sweep-$w.log" || true)
    elif [ "$rc" != 0 ]; then status=killed how=crash note="exit $rc: $(awk 'NF { l = $0 } END { print substr(l, 1, 160) }' "$d/sweep-$w.log")"
    fi
    if [ -n "$status" ]; then wl=$w kseed=$fseed kill_s=$(since "$t_run"); break; fi
  done
  if [ -z "$status" ]; then
    # a survivor of the sweeps: trace hashes against the unmutated build's
    hashes_v=identical
    for w in "${WORKLOADS[@]}"; do
      if ! hashes "$w" "${SEEDS[$w]}" "$d/hashes-$w.txt" "${LIMIT[$w]}"; then hashes_v="error($w)"; break; fi
      if ! cmp -s "$d/hashes-$w.txt" "$SCR/hashes-$w.txt"; then
        hashes_v="changed"
        note+="${note:+; }$w: $(paste -d' ' "$SCR/hashes-$w.txt" "$d/hashes-$w.txt" \
          | awk '$2 != $4 { if (!n++) first = $1 } END { printf "%d/%d seeds differ (first %s)", n, NR, first }')"
      fi
      rm -f "$d/hashes-$w.txt"
    done
    status=survived
    if [ "$fuzz" = 1 ]; then
      if build_fuzz > "$d/build-fuzz.log" 2>&1; then
        fuzz_v=$(run_fuzz "$d")
        if [ "$fuzz_v" != clean ]; then status=killed how=$fuzz_v wl=fuzz kill_s=$(since "$t_run"); fi
      else
        fuzz_v="not built"
        note+="${note:+; }fuzz build: $(grep -m1 'error:' "$d/build-fuzz.log" | sed "s|$SRC/||" | cut -c1-160 || true)"
      fi
    fi
    if [ "$status" = survived ] && [ "$unit" = 1 ]; then
      if build_unit > "$d/build-unit.log" 2>&1; then
        ut=$(run_unit "$d")
        if [ "$ut" != clean ]; then status=killed how=$ut wl=unit kill_s=$(since "$t_run"); fi
      else
        note+="${note:+; }unit build: $(grep -m1 'error:' "$d/build-unit.log" | sed "s|$SRC/||" | cut -c1-160 || true)"
      fi
    fi
  fi
  restore
  row "$status" "$how" "$wl" "$kseed" "$hashes_v" "$fuzz_v" "$build_s" "$kill_s" "$(since "$t_start")" "$note"
  # keep what may need a look: a survivor's logs, the verdict lines of a kill
  if [ "$status" = killed ]; then
    for f in "$d"/sweep-*.log; do
      [ -f "$f" ] || continue
      awk '/^(runs|VIOLATION|first violation|  |kvsim)/ && n++ < 6' "$f" > "$f.head"
      mv "$f.head" "$f"
    done
  fi
  rm -f "$d/build.log" "$d/build-fuzz.log" "$d/build-unit.log"
  find "$d" -name '*.err' -empty -delete
done 3< "$SCR/plan.tsv"

log "done: $(($(wc -l < "$out/results.tsv") - 1)) mutants in $out/results.tsv"
report
