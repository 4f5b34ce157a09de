#!/usr/bin/env bash
# kvsim selftest, as CI runs it: every bug switch kvsim knows must be found
# by a sweep and by fuzz_scenario from an empty corpus, and what they found
# must reproduce in build/bin/kvsim (gcc: a clang+ASan fuzzer's finding
# replays in another compiler's build); with no switch, 2000 seeds and
# KVCONN_SELFTEST_SECONDS (default 45) of fuzzing find nothing. Then the
# selftest must be able to fail: pointed at a fuzzer that cannot find a
# violation (fuzz_wire), its fuzzer row fails and it exits 1.
# KVCONN_SELFTEST_BUGS=a,b limits the switches (default: all);
# KVCONN_FUZZ_BIN the fuzzer directory (default build-fuzz/bin).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${KVCONN_FUZZ_BIN:-build-fuzz/bin}
K=${KVCONN_KVSIM:-build/bin/kvsim}
secs=${KVCONN_SELFTEST_SECONDS:-45}
bugs=()
[ -n "${KVCONN_SELFTEST_BUGS:-}" ] && bugs=(--bugs "$KVCONN_SELFTEST_BUGS")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "selftest: FAILED — $*" >&2; exit 1; }
[ -x "$K" ] || fail "$K missing"
[ -x "$B/fuzz_scenario" ] || fail "$B/fuzz_scenario missing"

"$K" selftest --fuzzer "$B/fuzz_scenario" "${bugs[@]}" --budget-seeds 2000 --fuzz-seconds "$secs" | tee "$tmp/table"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || fail "kvsim selftest exited $rc"
rows=$(grep -c -E '^[a-z_]+ +found' "$tmp/table")
want=${KVCONN_SELFTEST_BUGS:+$(echo "$KVCONN_SELFTEST_BUGS" | tr ',' '\n' | wc -l)}
want=${want:-$("$K" --help 2>&1 | sed -n 's/^bugs: //p' | wc -w)}
[ "$rows" -eq "$want" ] || fail "$rows switch rows found, expected $want"

# through a directory whose name has a backslash and a quote: the JSON must still parse and name it
odd="$tmp/dir\\with \"odd\" name"
mkdir -p "$odd" && ln -s "$(realpath "$B/fuzz_wire")" "$odd/fuzz_wire"
"$K" selftest --fuzzer "$odd/fuzz_wire" --bugs recv_map_race --budget-seeds 5 --fuzz-seconds 2 --json > "$tmp/neg.json"
rc=$?
[ "$rc" -eq 1 ] || fail "a selftest whose fuzzer cannot find anything exited $rc, not 1"
python3 - "$tmp/neg.json" "$odd/fuzz_wire" <<'PY' || fail "the failing selftest's JSON does not say why"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["fuzzer"] == sys.argv[2], (j["fuzzer"], sys.argv[2])
r = j["rows"][0]
assert not j["ok"] and not r["ok"] and r["sweep"]["found"] and not r["fuzzer"]["found"], j
PY
echo "selftest: ok (and fails when its fuzzer cannot find the bug)"
