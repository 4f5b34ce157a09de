#!/usr/bin/env bash
# The hostile-peer suite: a proxy + prefill + decode set with a cluster secret
# on loopback, honest traffic flowing, and tools/hostile_peer.py (a process
# that speaks the protocols but has no secret) attacking every port at once:
#  1. the proxy's bridge, before and while the engines link to it: 100 silent
#     links, 5 trickling ones, the proxy's own HELLO replayed with a guessed
#     PROOF, and a HELLO followed by a forged POST, every 200 ms;
#  2. P's and D's transport endpoints while the requests run: 100 silent
#     connections each, 5 trickling ones, and every 200 ms a HELLO followed
#     by a WRITE into D's KV regions, a forged pull, or a guessed PROOF;
#  3. then, as a rogue insider (it holds the secret but was granted nothing),
#     4 connections to each of P's and D's endpoints that pass the
#     challenge-response and send 8 WRITEs each with no key or a random key
#     into the grant ids a grant table gives first, and random ones (refused
#     for want of a live grant, or, where an id is live at that moment, for
#     the key: which, depends on timing, so only the first is required).
# It asserts: every honest request ends ok (no attack targets one), no
# invariant violation and both pools clean, every process exits 0; the
# attacker received nothing but nonces and MACs, and the insider nothing but
# WRITE_ACKs of failed entries, every WRITE answered and none landed
# (hostile_peer.py exits 1 otherwise); the targets logged the rejections
# (one line per rejected connection, rate-limited after 16 with a running
# count) and the refused WRITEs (transport/README.md, "Write grants").
# Runs in build/ and, when it is built, build-asan/ (a sanitizer report fails
# the process). KVNODE_REQUESTS sets the request count (600).
set -uo pipefail
cd "$(dirname "$0")/.."
N=${KVNODE_REQUESTS:-600}
. tools/lib_proc.sh # waitfor, proc_scratch
proc_scratch
fail() {
  echo "hostile ($B): FAILED — $*" >&2
  for f in "$tmp"/*.err "$tmp"/*.out; do [ -s "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
  exit 1
}
jget() { python3 -c "import json; d=json.load(open('$1')); print($2)"; }
listen_ports() { # PID: its listening TCP ports, comma-separated (from /proc)
  python3 - "$1" <<'PY'
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try: l = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError: continue
    if l.startswith("socket:["): inodes.add(l[8:-1])
ports = []
for line in open(f"/proc/{pid}/net/tcp").readlines()[1:]:
    f = line.split()
    if f[3] == "0A" and f[9] in inodes: ports.append(str(int(f[1].split(":")[1], 16)))
print(",".join(sorted(set(ports))))
PY
}

run() {
  B=$1
  local K=$B/bin/kvnode S=$tmp/secret
  rm -f "$S" "$tmp"/*.err "$tmp"/*.out "$tmp"/*.json "$tmp"/*.port
  "$K" keygen "$S" 2>/dev/null || fail "keygen"
  "$K" --role proxy --secret-file "$S" --port-file "$tmp/px.port" --json "$tmp/px.json" --requests "$N" --window 4 \
    >"$tmp/proxy.out" 2>"$tmp/proxy.err" &
  local px=$!; pids+=("$px")
  for _ in $(seq 200); do [ -s "$tmp/px.port" ] && break; sleep 0.05; done
  [ -s "$tmp/px.port" ] || fail "the proxy did not start"
  local port; port=$(cat "$tmp/px.port")
  # 1: the bridge is under attack before the engines link and while they do
  python3 tools/hostile_peer.py --bridge "$port" --transport "" --seconds 3 >"$tmp/attack1.out" 2>"$tmp/attack1.err" &
  local a1=$!; pids+=("$a1")
  sleep 0.5
  local eng="--secret-file $S --step-us 3000"
  "$K" --role prefill --proxy "127.0.0.1:$port" $eng 2>"$tmp/p.err" &
  local pp=$!; pids+=("$pp")
  "$K" --role decode --proxy "127.0.0.1:$port" $eng 2>"$tmp/d.err" &
  local pd=$!; pids+=("$pd")
  for _ in $(seq 200); do grep -q " up (" "$tmp/p.err" 2>/dev/null && grep -q " up (" "$tmp/d.err" 2>/dev/null && break; sleep 0.05; done
  grep -q " up (" "$tmp/p.err" && grep -q " up (" "$tmp/d.err" || fail "the engines did not come up under the bridge attack"
  # 2: every transport endpoint of P and D while the requests run
  local tp; tp="$(listen_ports "$pp"),$(listen_ports "$pd")"
  python3 tools/hostile_peer.py --bridge "$port" --transport "$tp" --seconds 3 --secret-file "$S" \
    >"$tmp/attack2.out" 2>"$tmp/attack2.err" &
  local a2=$!; pids+=("$a2")
  local rc
  waitfor "$a1" 30; rc=$?; [ $rc = 0 ] || fail "attacker 1 exited $rc (forbidden frames, or it crashed)"
  waitfor "$a2" 30; rc=$?; [ $rc = 0 ] || fail "attacker 2 exited $rc (forbidden frames, or it crashed)"
  waitfor "$px" 120; rc=$?; [ $rc = 0 ] || fail "proxy exited $rc"
  waitfor "$pp" 20; rc=$?; [ $rc = 0 ] || fail "P exited $rc"
  waitfor "$pd" 20; rc=$?; [ $rc = 0 ] || fail "D exited $rc"
  local j=$tmp/px.json
  [ "$(jget "$j" "d['ok']")" = "$N" ] || fail "$(jget "$j" "d['ok']") of $N honest requests ok"
  for e in 0 1; do
    [ "$(jget "$j" "d['engines'][$e]['clean'] and d['engines'][$e]['violations'] == 0")" = True ] ||
      fail "engine $e: $(jget "$j" "d['engines'][$e]")"
  done
  [ "$(jget "$j" "d['engines'][1]['verified_blocks'] * d['block_bytes'] >= d['kv_bytes']")" = True ] ||
    fail "D verified too few blocks"
  grep -q "link closed before it was up" "$tmp/proxy.err" || fail "the proxy logged no rejected link"
  grep -q "closed (" "$tmp/p.err" || fail "P logged no rejected connection"
  grep -q "closed (" "$tmp/d.err" || fail "D logged no rejected connection"
  local iw; iw=$(jget "$tmp/attack2.out" "d['insider']['writes']")
  [ "$iw" -gt 0 ] || fail "the insider sent no WRITE: $(cat "$tmp/attack2.out")"
  [ "$(jget "$tmp/attack2.out" "d['insider']['landed']")" = 0 ] || fail "an insider's WRITE landed"
  grep -q "WRITE refused.*: no live grant" "$tmp/d.err" || fail "D logged no WRITE refused for want of a grant"
  grep -q "WRITE refused" "$tmp/p.err" || fail "P logged no refused WRITE"
  grep -q "ERROR: AddressSanitizer\|runtime error:" "$tmp"/*.err && fail "a sanitizer report"
  echo "  $B: $N honest requests all ok under attack, pools clean, no violation; attackers: $(jget "$tmp/attack1.out" "d['connections']") + $(jget "$tmp/attack2.out" "d['connections']") connections, $(jget "$tmp/attack2.out" "d['attacks']") forged frames, nothing but nonces and MACs received; insider: $iw WRITEs, all refused (D logged $(grep -c "WRITE refused" "$tmp/d.err"), $(grep -c "WRITE refused.*: wrong key" "$tmp/d.err") of them for a wrong key, P $(grep -c "WRITE refused" "$tmp/p.err")); rejections logged by the proxy ($(grep -c "link closed before it was up" "$tmp/proxy.err") lines), P ($(grep -c "closed (" "$tmp/p.err")) and D ($(grep -c "closed (" "$tmp/d.err"))"
}

[ -x build/bin/kvnode ] || { echo "hostile: build/bin/kvnode not built" >&2; exit 1; }
run build
[ -x build-asan/bin/kvnode ] && run build-asan
echo "hostile: ok"
