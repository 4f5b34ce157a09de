#!/usr/bin/env bash
# Minimizes the seed corpora with libFuzzer's -merge=1: corpus/<target>/
# becomes the smallest set of inputs that covers every feature of what it
# held plus any extra directories given (a CI fuzzing corpus, a crashes-free
# AFL++ queue), every file named by the SHA-1 of its bytes. Files named
# repro-* (the minimized repro of each known bug, see corpus/README.md) are
# kept as they are: they are there to be found again, not for coverage.
#
#   tools/fuzz_merge.sh [--bin DIR] [TARGET...] [-- EXTRA_DIR...]
#
# DIR holds the fuzz targets (default build-fuzz/bin: make build-fuzz).
# TARGET defaults to every target with a corpus/<target>/ directory. The
# merge runs with every bug switch off, on edges only (-use_counters=0: one
# input per edge covered, not one per hit-count bucket), and with the
# target's max_len from fuzz/<target>.options (longer inputs would be cut).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build-fuzz/bin
targets=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for d in corpus/fuzz_*/; do targets+=("$(basename "$d")"); done
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset KVCONN_BUG KVCONN_DB

for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || { echo "fuzz_merge: $bin/$t missing (make build-fuzz)" >&2; exit 1; }
  dir=corpus/$t
  mkdir -p "$dir"
  max_len=$(sed -n 's/^max_len *= *\([0-9]*\).*/\1/p' "fuzz/$t.options" 2>/dev/null | head -1)
  rm -rf "$tmp/in" "$tmp/out"; mkdir "$tmp/in" "$tmp/out"
  find "$dir" -maxdepth 1 -type f ! -name 'repro-*' ! -name '*.md' -exec cp {} "$tmp/in/" \;
  before=$(find "$tmp/in" -type f | wc -l)
  "$bin/$t" -merge=1 -use_counters=0 ${max_len:+-max_len=$max_len} "$tmp/out" "$tmp/in" "${extra[@]}" > "$tmp/$t.log" 2>&1 \
    || { tail -20 "$tmp/$t.log" >&2; echo "fuzz_merge: $t: merge failed" >&2; exit 1; }
  find "$dir" -maxdepth 1 -type f ! -name 'repro-*' ! -name '*.md' -delete
  cp "$tmp/out"/* "$dir/" 2>/dev/null || true
  after=$(find "$tmp/out" -type f | wc -l)
  repros=$(find "$dir" -maxdepth 1 -name 'repro-*' | wc -l)
  echo "fuzz_merge: $t: $before inputs (+${#extra[@]} extra dirs) -> $after, plus $repros repro-* kept"
done
