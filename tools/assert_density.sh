#!/usr/bin/env bash
# Assertion density of core/: per core/*.c file, its functions (universal
# ctags), its assertion sites by tier, assertions per function and the
# functions without any; then the totals. Markdown, for bench/assert-density.md.
#
# What counts as a site (comments and string literals are stripped first):
#   cheap    compiled into every build, production included:
#            KV_ASSERT(...) and the per-file wrappers NAME_ASSERT(...)
#            (core/assert.h), and the reports the core already made of its
#            own state: kv_violate(...), NAME_VIOLATE(...), held_or_report(...),
#            pool_check_fail(...)
#   checked  compiled in checked builds only (KVCONN_CHECKED): KV_ASSERT_CHECKED
#            and NAME_ASSERT_CHECKED(...), kv_owner_check(...) (and store_sched's
#            check_owner wrapper)
# A function's sites are those between its first and last line (ctags
# --fields=+e); the last column counts the functions without a site that
# are longer than 8 lines (the rest are accessors, one-line helpers, hook
# stubs). Macro definitions (#define lines) and function definitions
# (column 0) are not sites. The second total row covers the state machines
# only (SM below): the pure modules (kv_data.c, wire.c's codec, base.c's
# helpers, kvmem.c's providers, store_common.c, connector.c's factory) have
# no object of their own to assert about.
# Usage: tools/assert_density.sh [ROOT]   (ROOT: a checkout, default this one)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
command -v ctags >/dev/null || { echo "assert_density: needs universal-ctags" >&2; exit 2; }

# One line per site: "<line> <tier>"; comments and strings blanked first,
# line numbers kept.
sites() {
  python3 - "$1" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
# Blank comments and string/char literals, keeping newlines (line numbers).
def blank(m):
    return re.sub(r'[^\n]', ' ', m.group(0))
src = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, src, flags=re.S)
checked = re.compile(r'\b(?:[A-Z][A-Z0-9_]*_ASSERT_CHECKED|kv_owner_check|check_owner)\s*\(')
cheap = re.compile(r'\b(?:[A-Z][A-Z0-9_]*_ASSERT|kv_violate|[A-Z][A-Z0-9_]*_VIOLATE|held_or_report|pool_check_fail)\s*\(')
for n, line in enumerate(src.split('\n'), 1):
    # preprocessor lines, and definitions (column 0: every call is indented)
    if line.lstrip().startswith('#') or (line[:1] not in (' ', '\t')):
        continue
    for _ in checked.finditer(line):
        print(n, 'checked')
    for m in cheap.finditer(line):
        print(n, 'cheap')
PY
}

printf '| file | functions | cheap sites | checked sites | total | per function | functions without | of them > 8 lines |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
SM=" request.c engine.c block_pool.c p2p_sched.c p2p_worker.c p2p_sender.c p2p_receiver.c store_sched.c store_worker.c store_sender.c store_receiver.c store_lookup.c multi_sched.c multi_worker.c proxy.c bootstrap.c worker.c "
T_FN=0 T_CHEAP=0 T_CHK=0 T_BARE=0 T_BIG=0 S_FN=0 S_CHEAP=0 S_CHK=0 S_BARE=0 S_BIG=0
for f in core/*.c; do
  tags=$(ctags --fields=+ne -o - --c-kinds=f "$f" | awk -F'\t' '{ l=""; e=""; for (i=4;i<=NF;i++) { if ($i ~ /^line:/) l=substr($i,6); if ($i ~ /^end:/) e=substr($i,5) } print $1, l, e }')
  s=$(sites "$f")
  read -r fn cheap chk bare big < <(awk -v tags="$tags" '
    BEGIN { n = split(tags, t, "\n"); for (i = 1; i <= n; i++) { split(t[i], a, " "); name[i]=a[1]; lo[i]=a[2]; hi[i]=a[3]; cnt[i]=0 } nf = n; if (tags == "") nf = 0 }
    { c[$2]++; for (i = 1; i <= nf; i++) if ($1 >= lo[i] && $1 <= hi[i]) cnt[i]++ }
    END { bare = 0; big = 0; for (i = 1; i <= nf; i++) if (!cnt[i]) { bare++; if (hi[i] - lo[i] + 1 > 8) big++ }
          printf "%d %d %d %d %d\n", nf, c["cheap"]+0, c["checked"]+0, bare, big }' <<<"$s")
  tot=$((cheap + chk))
  per=$(awk -v t="$tot" -v n="$fn" 'BEGIN { printf "%.2f", n ? t / n : 0 }')
  printf '| %s | %d | %d | %d | %d | %s | %d | %d |\n' "$f" "$fn" "$cheap" "$chk" "$tot" "$per" "$bare" "$big"
  T_FN=$((T_FN + fn)) T_CHEAP=$((T_CHEAP + cheap)) T_CHK=$((T_CHK + chk)) T_BARE=$((T_BARE + bare)) T_BIG=$((T_BIG + big))
  case "$SM" in *" ${f#core/} "*) S_FN=$((S_FN + fn)) S_CHEAP=$((S_CHEAP + cheap)) S_CHK=$((S_CHK + chk)) S_BARE=$((S_BARE + bare)) S_BIG=$((S_BIG + big)) ;; esac
done
T_TOT=$((T_CHEAP + T_CHK))
printf '| **total** | **%d** | **%d** | **%d** | **%d** | **%s** | **%d** | **%d** |\n' "$T_FN" "$T_CHEAP" "$T_CHK" "$T_TOT" \
  "$(awk -v t="$T_TOT" -v n="$T_FN" 'BEGIN { printf "%.2f", n ? t / n : 0 }')" "$T_BARE" "$T_BIG"
S_TOT=$((S_CHEAP + S_CHK))
printf '| **state machines** | **%d** | **%d** | **%d** | **%d** | **%s** | **%d** | **%d** |\n' "$S_FN" "$S_CHEAP" "$S_CHK" "$S_TOT" \
  "$(awk -v t="$S_TOT" -v n="$S_FN" 'BEGIN { printf "%.2f", n ? t / n : 0 }')" "$S_BARE" "$S_BIG"
