#!/usr/bin/env bash
# Fails when core/ calls malloc/free, time functions, rand, threads, sockets
# or stdio I/O directly: core/ must reach the world through kv_env and kvt
# only (DESIGN.md section 1). Comments are stripped before matching.
set -uo pipefail
cd "$(dirname "$0")/.."
pat='(?<![>.\w])(malloc|calloc|realloc|free|time|clock_gettime|gettimeofday|rand|srand|pthread_[a-z_]+|socket|connect|send|recv|printf|fprintf|puts|fopen|getenv)\s*\('
fail=0
for f in core/*.c core/*.h; do
  code=$(gcc -fpreprocessed -dD -E -P "$f" 2>/dev/null)
  hits=$(printf '%s\n' "$code" | grep -nP "$pat")
  inc=$(printf '%s\n' "$code" | grep -nE '#include <(pthread|sys/socket|time|stdlib|unistd)\.h>')
  if [ -n "$hits$inc" ]; then
    echo "core purity: $f:" >&2
    [ -n "$hits" ] && echo "$hits" >&2
    [ -n "$inc" ] && echo "$inc" >&2
    fail=1
  fi
done
if [ $fail -ne 0 ]; then
  echo "core purity: FAILED — core/ must use kv_env / kvt instead of the calls above" >&2
  exit 1
fi
echo "core purity: ok (no direct malloc/time/rand/threads/sockets/stdio I/O in core/)"
