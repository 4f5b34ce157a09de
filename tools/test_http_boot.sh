#!/usr/bin/env bash
# kvnode's HTTP bootstrap (vLLM's Mooncake bootstrap contract; docs/kvnode.md,
# "HTTP bootstrap") driven by a real HTTP client, curl:
#  1. kvnode --role http-bootstrap alone: an empty query is {}; a registration
#     is 200 {"status":"ok"}; the query then has vLLM's shape (string rank keys,
#     engine_id, worker_addr by tp then pp); the same worker again is 400 "is
#     already registered"; another engine_id for the dp rank is 400 "Engine ID
#     mismatch"; a body that is not JSON, or lacks a field, is 400 with what
#     was wrong; an unknown route 404, a wrong method 405 (with Allow); a
#     Content-Length over 64 KiB 413 before any body byte; a client that
#     sends nothing is answered 408 and closed at the deadline (--hello-ms)
#     while the server answers others meanwhile; 40 silent clients at once
#     (more than its 32 slots) evict the oldest and the server still answers;
#  2. without a cluster secret it will not listen outside loopback (exit 4),
#     and --http-bootstrap is refused where it does not belong (exit 4);
#  3. proxy, prefill engines 0 and 1 (TP 2) and a decode engine with
#     --http-bootstrap: prefill engine 0 serves it (port 0: it prints which),
#     both prefill engines register every TP rank at their sender's address,
#     the query (before D starts, so before the run) lists exactly those, D
#     prints what it lists, and the run is
#     clean (every request ok, every process exits 0).
# KVNODE_BUILD picks the build (default build/). Every wait is bounded.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${KVNODE_BUILD:-build}
K=$B/bin/kvnode
[ -x "$K" ] || { echo "http_boot: $K not built" >&2; exit 1; }
command -v curl >/dev/null || { echo "http_boot: FAILED — curl is not installed (tools/deps.sh installs it)" >&2; exit 1; }
. tools/lib_proc.sh # waitfor, proc_scratch
proc_scratch
fail() {
  echo "http_boot ($B): FAILED — $*" >&2
  for f in "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}
# call METHOD PATH [BODY]: sets CODE and BODY from the server at $U
call() {
  local out
  if [ $# -ge 3 ]; then
    out=$(curl -s -m 5 -X "$1" -H 'content-type: application/json' --data-binary "$3" -w '\n%{http_code}' "$U$2")
  else
    out=$(curl -s -m 5 -X "$1" -w '\n%{http_code}' "$U$2")
  fi
  CODE=${out##*$'\n'}
  BODY=${out%$'\n'*}
}
expect() { # CODE SUBSTRING WHAT
  [ "$CODE" = "$1" ] || fail "$3: HTTP $CODE, wanted $1 (body: $BODY)"
  case "$BODY" in *"$2"*) ;; *) fail "$3: the body lacks '$2' (body: $BODY)" ;; esac
}
pyjson() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); $1" "$BODY"; }

# --- 1. the server alone
"$K" --role http-bootstrap --port-file "$tmp/hb.port" --hello-ms 700 2>"$tmp/hb.err" &
HB=$!; pids+=("$HB")
for _ in $(seq 100); do [ -s "$tmp/hb.port" ] && break; sleep 0.05; done
[ -s "$tmp/hb.port" ] || fail "the server did not start"
PORT=$(cat "$tmp/hb.port")
U=http://127.0.0.1:$PORT

call GET /query; expect 200 "{}" "empty query"
[ "$BODY" = "{}" ] || fail "empty query: $BODY"
P1='{"engine_id": "eng-1", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://1.1.1.1:1111"}'
call POST /register "$P1"; expect 200 '"status":"ok"' "register"
call POST /register '{"engine_id":"eng-1","dp_rank":0,"tp_rank":1,"pp_rank":0,"addr":"tcp://1.1.1.1:1112","tp_size":2}'
expect 200 '"status":"ok"' "register a second rank (with a member vLLM added later)"
call GET /query; expect 200 engine_id "query"
pyjson 'assert d == {"0": {"engine_id": "eng-1", "worker_addr": {"0": {"0": "tcp://1.1.1.1:1111"}, "1": {"0": "tcp://1.1.1.1:1112"}}}}, d' \
  || fail "query shape: $BODY"
call POST /register "$P1"; expect 400 "is already registered" "duplicate"
pyjson 'assert set(d) == {"detail"}' || fail "duplicate: not {\"detail\": ...}: $BODY"
call POST /register '{"engine_id": "eng-2", "dp_rank": 0, "tp_rank": 1, "pp_rank": 0, "addr": "tcp://3.3.3.3:3333"}'
expect 400 "Engine ID mismatch for dp_rank=0: expected eng-1, got eng-2" "engine-id mismatch"
call POST /register '{"engine_id": "eng-1", "dp_rank": 0,'; expect 400 "the body is not JSON" "malformed JSON"
call POST /register '{"engine_id": "eng-1", "dp_rank": 0, "tp_rank": 2, "addr": "x"}'; expect 400 "'pp_rank' is missing" "missing field"
call POST /register '{"engine_id": "eng-1", "dp_rank": -1, "tp_rank": 2, "pp_rank": 0, "addr": "x"}'
expect 400 "'dp_rank' is not a non-negative integer" "negative rank"
call GET /nope; expect 404 '"detail":"Not Found"' "unknown route"
call DELETE /query; expect 405 "Method Not Allowed" "wrong method"
allow=$(curl -s -m 5 -o /dev/null -D - "$U/register" | tr -d '\r' | sed -n 's/^allow: //Ip')
[ "$allow" = "POST" ] || fail "405 on GET /register: Allow '$allow', wanted POST"
head -c 70000 /dev/zero | tr '\0' a >"$tmp/big"
call POST /register "@$tmp/big"; expect 413 "at most 65536" "oversized body"
call GET /query
pyjson 'assert len(d["0"]["worker_addr"]) == 2' || fail "refused registrations changed the registry: $BODY"

# a silent client: dropped at the deadline with a 408; the server answers others meanwhile
exec 3<>"/dev/tcp/127.0.0.1/$PORT" || fail "cannot open a raw connection"
call GET /query; expect 200 engine_id "a query while a silent client is connected"
t0=$(date +%s%N)
silent=$(timeout 5 cat <&3)
ms=$((($(date +%s%N) - t0) / 1000000))
exec 3<&-
case "$silent" in "HTTP/1.1 408 Request Timeout"*) ;; *) fail "silent client: got '$silent', wanted a 408" ;; esac
[ "$ms" -lt 3000 ] || fail "silent client: closed after $ms ms (deadline 700 ms)"
grep -q "no whole request within 700 ms (0 bytes); closed (408)" "$tmp/hb.err" || fail "the drop is not logged"
# a partial request (head, no body yet) is dropped the same way
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /register HTTP/1.1\r\nContent-Length: 50\r\n\r\n{"engine_id"' >&3
partial=$(timeout 5 cat <&3); exec 3<&-
case "$partial" in "HTTP/1.1 408"*) ;; *) fail "partial request: got '$partial', wanted a 408" ;; esac
# more silent clients than slots: the oldest are evicted, the server still answers at once
for i in $(seq 40); do eval "exec $((10 + i))<>/dev/tcp/127.0.0.1/$PORT"; done
sleep 0.2
call GET /query; expect 200 engine_id "a query with 40 silent clients connected"
for i in $(seq 40); do eval "exec $((10 + i))<&-"; done
grep -q "connections open; the oldest still reading" "$tmp/hb.err" || fail "no eviction logged with 40 silent clients"
kill -TERM "$HB"; waitfor "$HB" 5; rc=$?
[ "$rc" -eq 0 ] || fail "the server exited $rc on SIGTERM"
grep -q "2 registered, 5 refused" "$tmp/hb.err" || fail "final counters: $(tail -1 "$tmp/hb.err")"
echo "http_boot: the server alone: register, query shape, duplicate/mismatch/malformed 400, 404, 405, 413, 408 at the deadline, eviction: ok"

# --- 2. where it may listen, and where the option belongs
env -u KVCONN_SECRET "$K" --role http-bootstrap --listen 10.1.2.3:0 2>"$tmp/nl.err"; rc=$?
[ "$rc" -eq 4 ] && grep -q "loopback" "$tmp/nl.err" || fail "non-loopback listen without a secret: exit $rc"
env -u KVCONN_SECRET "$K" --role prefill --proxy 127.0.0.1:1 --http-bootstrap 10.1.2.3:8998 2>"$tmp/nl2.err"; rc=$?
[ "$rc" -eq 4 ] && grep -q "http-bootstrap 10.1.2.3:8998" "$tmp/nl2.err" || fail "owner on a non-loopback address: exit $rc"
"$K" --role proxy --http-bootstrap 127.0.0.1:8998 2>/dev/null; rc=$?
[ "$rc" -eq 4 ] || fail "--http-bootstrap on the proxy: exit $rc, wanted 4"
"$K" --role decode --proxy 127.0.0.1:1 --http-bootstrap 127.0.0.1:0 2>"$tmp/d0.err"; rc=$?
[ "$rc" -eq 4 ] && grep -q "port 0 only on prefill engine 0" "$tmp/d0.err" || fail "port 0 on D: exit $rc"
"$K" --role decode --proxy 127.0.0.1:1 --http-bootstrap nohost:80 2>/dev/null; rc=$?
[ "$rc" -eq 4 ] || fail "--http-bootstrap nohost:80: exit $rc, wanted 4"
echo "http_boot: loopback only without a secret; the option refused where it does not belong: ok"

# --- 3. engines: P0 serves, P0 and P1 register their ranks, D queries
"$K" --role proxy --port-file "$tmp/px.port" --prefills 2 --decodes 1 --requests 200 --json "$tmp/px.json" \
  >"$tmp/px.out" 2>"$tmp/px.err" &
PX=$!; pids+=("$PX")
for _ in $(seq 200); do [ -s "$tmp/px.port" ] && break; sleep 0.05; done
[ -s "$tmp/px.port" ] || fail "the proxy did not start"
PXP=$(cat "$tmp/px.port")
"$K" --role prefill --index 0 --tp 2 --proxy "127.0.0.1:$PXP" --http-bootstrap 127.0.0.1:0 2>"$tmp/p0.err" &
P0=$!; pids+=("$P0")
for _ in $(seq 200); do grep -q "serving POST" "$tmp/p0.err" && break; sleep 0.05; done
HBA=$(sed -n 's/.*serving POST \/register and GET \/query on \([0-9.:]*\) .*/\1/p' "$tmp/p0.err")
[ -n "$HBA" ] || fail "prefill engine 0 did not say where it serves"
"$K" --role prefill --index 1 --tp 2 --proxy "127.0.0.1:$PXP" --http-bootstrap "$HBA" 2>"$tmp/p1.err" &
P1=$!; pids+=("$P1")
# The proxy drives no request before every engine is up, so until D starts
# the engines stay up: the query below cannot race the run's end.
registered() { grep -c "^\[$1\] http bootstrap: registered kvnode-" "$tmp/$2"; }
for _ in $(seq 200); do
  [ "$(registered P0 p0.err)" -eq 2 ] && [ "$(registered P1 p1.err)" -eq 2 ] && break
  sleep 0.05
done
U=http://$HBA
call GET /query; expect 200 kvnode-P1 "query of the engines' registrations"
want=$(cat "$tmp"/p0.err "$tmp"/p1.err | sed -n 's/^\[P[01]\] http bootstrap: registered kvnode-P\([01]\) dp [01] tp \([01]\) pp 0 as \(tcp:[^ ]*\) with.*/\1 \2 \3/p' | sort)
got=$(pyjson 'print("\n".join("%s %s %s" % (dp, tp, a) for dp, e in d.items() for tp, pp in e["worker_addr"].items() for _, a in pp.items()))' | sort)
[ "$(printf '%s\n' "$want" | grep -c tcp)" -eq 4 ] || fail "the engines registered $(printf '%s\n' "$want" | grep -c tcp) ranks, wanted 4"
[ "$want" = "$got" ] || fail "the query lists '$got', the engines registered '$want'"
pyjson 'assert d["0"]["engine_id"] == "kvnode-P0" and d["1"]["engine_id"] == "kvnode-P1"' || fail "engine ids: $BODY"
"$K" --role decode --index 2 --tp 2 --proxy "127.0.0.1:$PXP" --http-bootstrap "$HBA" 2>"$tmp/d.err" &
D=$!; pids+=("$D")
waitfor "$PX" 120; rc=$?
[ "$rc" -eq 0 ] || fail "the proxy exited $rc"
for p in "$P0" "$P1" "$D"; do waitfor "$p" 20 || fail "an engine exited non-zero"; done
ok=$(python3 -c "import json; print(json.load(open('$tmp/px.json'))['ok'])")
[ "$ok" = 200 ] || fail "$ok of 200 requests ok"
grep -q '^\[D2\] http bootstrap: engine kvnode-P0 dp 0 tp 1 pp 0 at tcp://' "$tmp/d.err" || fail "D did not print what the query lists"
[ "$(grep -c '^\[D2\] http bootstrap: engine kvnode-P[01] ' "$tmp/d.err")" -eq 4 ] || fail "D listed $(grep -c '^\[D2\] http bootstrap: engine ' "$tmp/d.err") ranks, wanted 4"
echo "http_boot: P0 serves, 4 ranks of 2 prefill engines registered at their senders' addresses, D queried, 200/200 ok"
echo "http_boot: ok"
