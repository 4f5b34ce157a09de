#!/usr/bin/env bash
# Prints the libFuzzer flags of a target's options file, one line:
#   tools/fuzz_options.sh TARGET [DIR]
# reads DIR/TARGET.options (default DIR: fuzz/, beside the dictionaries; in a
# ClusterFuzzLite $OUT both sit beside the binary) and turns each
# "key = value" of its [libfuzzer] section into -key=value, with dict
# resolved against DIR. ClusterFuzzLite reads the same file itself.
set -euo pipefail
t=$1
dir=${2:-$(dirname "$0")/../fuzz}
f=$dir/$t.options
[ -f "$f" ] || exit 0
awk -v dir="$dir" '
  /^\[/ { sec = $0; next }
  sec == "[libfuzzer]" && /^[a-z_]+ *= */ {
    split($0, kv, /[ ]*=[ ]*/)
    v = kv[2]
    if (kv[1] == "dict") v = dir "/" v
    printf "%s-%s=%s", sep, kv[1], v; sep = " "
  }
  END { print "" }' "$f"
