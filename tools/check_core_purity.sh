#!/usr/bin/env bash
# Fails when core/ calls malloc/free, time functions, rand, threads or
# sockets directly: core/ must reach the world through kv_env and kvt only
# (DESIGN.md section 1).
set -uo pipefail
cd "$(dirname "$0")/.."
pat='(?<![>.\w])(malloc|calloc|realloc|free|time|clock_gettime|gettimeofday|rand|srand|pthread_[a-z_]+|socket|connect|send|recv|printf|fprintf|getenv|fopen|puts)\s*\('
hits=$(grep -rnP "$pat" core --include='*.c' --include='*.h' || true)
inc=$(grep -rnE '#include <(pthread|sys/socket|time|stdlib|unistd)\.h>' core || true)
if [ -n "$hits$inc" ]; then
  echo "core purity: FAILED — core/ must use kv_env / kvt instead of:" >&2
  [ -n "$hits" ] && echo "$hits" >&2
  [ -n "$inc" ] && echo "$inc" >&2
  exit 1
fi
echo "core purity: ok (no direct malloc/time/rand/threads/sockets/stdio I/O in core/)"
