#!/usr/bin/env bash
# Runs .clusterfuzzlite/build.sh here, outside its container, with the
# variables ClusterFuzzLite would set (an ASan+UBSan libFuzzer build, set by
# hand: CC=clang, LIB_FUZZING_ENGINE=-fsanitize=fuzzer, $OUT and $SRC in a
# temporary directory), then checks what it left in $OUT (every target but
# fuzz_canary, each with <target>_seed_corpus.zip holding its corpus, its
# dictionary and options) and runs each target for KVCONN_CFLITE_SECONDS
# (default 5) from its unpacked seed corpus with its options, from $OUT, the
# way ClusterFuzzLite does.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${KVCONN_CFLITE_SECONDS:-5}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset KVCONN_BUG KVCONN_DB
fail() { echo "cflite: FAILED — $*" >&2; exit 1; }
mkdir "$tmp/src" "$tmp/out"
ln -s "$PWD" "$tmp/src/kvconn"

flags="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address,undefined -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
env -i PATH="$PATH" HOME="${HOME:-/tmp}" CC=clang CXX=clang++ CFLAGS="$flags" CXXFLAGS="$flags" \
  LIB_FUZZING_ENGINE=-fsanitize=fuzzer SRC="$tmp/src" OUT="$tmp/out" \
  bash .clusterfuzzlite/build.sh > "$tmp/build.log" 2>&1 \
  || { tail -30 "$tmp/build.log" >&2; fail "build.sh failed"; }
[ -e "$tmp/out/fuzz_canary" ] && fail "build.sh shipped fuzz_canary (it crashes on purpose)"

n=0
for f in fuzz/fuzz_*.c; do
  t=$(basename "$f" .c)
  [ "$t" = fuzz_canary ] && continue
  n=$((n+1))
  [ -x "$tmp/out/$t" ] || fail "no $t in \$OUT"
  for ext in dict options; do
    if [ -f "fuzz/$t.$ext" ]; then cmp -s "fuzz/$t.$ext" "$tmp/out/$t.$ext" || fail "$t.$ext not copied to \$OUT"; fi
  done
  zip=$tmp/out/${t}_seed_corpus.zip
  [ -f "$zip" ] || fail "no ${t}_seed_corpus.zip"
  want=$(find "corpus/$t" -maxdepth 1 -type f | wc -l)
  python3 - "$zip" "$tmp/seeds-$t" "$want" <<'PY' || fail "${t}_seed_corpus.zip does not hold corpus/$t flat"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
assert len(names) == int(sys.argv[3]) and all("/" not in n for n in names), (len(names), names[:3])
z.extractall(sys.argv[2])
PY
  opts=$(tools/fuzz_options.sh "$t" "$tmp/out")
  (cd "$tmp/out" && ./"$t" $opts -max_total_time="$secs" -seed=1 -print_final_stats=1 "$tmp/seeds-$t") \
    > "$tmp/$t.log" 2>&1 || { grep -m1 -A12 -E '^VIOLATION|ERROR:' "$tmp/$t.log" >&2; fail "$t failed from \$OUT"; }
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$t.log")
  echo "  $t: built by build.sh, $want seeds zipped, ${runs:-?} runs in $secs s from \$OUT, clean"
done
[ "$n" -gt 0 ] || fail "no targets"
echo "cflite: ok"
