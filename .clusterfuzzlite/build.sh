#!/bin/bash -eu
# .clusterfuzzlite/build.sh — builds kvconn's fuzz targets for ClusterFuzzLite
# and OSS-Fuzz. Uses only what the fuzzing infrastructure sets: $CC $CXX
# $CFLAGS $CXXFLAGS (compiler, sanitizer and coverage flags), $LIB_FUZZING_ENGINE
# (libFuzzer, AFL++'s driver, ...), $SRC (sources: the project is $SRC/kvconn)
# and $OUT (where targets, seed corpora, dictionaries and options go).
# tools/test_cflite_build.sh runs this script outside the container.
#
# Into $OUT, for each fuzz/fuzz_*.c except fuzz_canary (which crashes on
# purpose and would fail every run; tools/test_fuzz.sh checks it):
#   <target>                   the binary
#   <target>_seed_corpus.zip   corpus/<target>/* (flat, hash-named seeds and
#                              the repro-* of every known bug)
#   <target>.dict, .options    from fuzz/ (the options name the dictionary)
src="$SRC/kvconn"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
: "${CXX:=}" "${CXXFLAGS:=}" # C only; named so the contract is visible

targets=()
for f in "$src"/fuzz/fuzz_*.c; do
  t=$(basename "$f" .c)
  [ "$t" = fuzz_canary ] || targets+=("$t")
done

# Sanitizers and coverage come from $CFLAGS (KVCONN_SANITIZE stays empty);
# the build type adds nothing on top of them.
cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE= \
  -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_C_FLAGS="$CFLAGS" \
  -DKVCONN_FUZZ=ON -DKVCONN_TESTS=OFF -DKVCONN_SANITIZE= \
  -DLIB_FUZZING_ENGINE="$LIB_FUZZING_ENGINE"
cmake --build "$build" --target "${targets[@]}"

for t in "${targets[@]}"; do
  cp "$build/bin/$t" "$OUT/"
  rm -f "$OUT/${t}_seed_corpus.zip"
  if [ -d "$src/corpus/$t" ] && [ -n "$(ls -A "$src/corpus/$t")" ]; then
    (cd "$src/corpus/$t" && zip -q -j "$OUT/${t}_seed_corpus.zip" ./*)
  fi
  for ext in dict options; do
    if [ -f "$src/fuzz/$t.$ext" ]; then cp "$src/fuzz/$t.$ext" "$OUT/"; fi
  done
done
echo "build.sh: ${targets[*]} -> $OUT"
