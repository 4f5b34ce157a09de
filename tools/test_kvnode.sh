#!/usr/bin/env bash
# apps/kvnode as three processes on loopback (proxy, P, D), as a user runs it:
#  1. N requests (1000), no faults: every request ok, D verified every block
#     it received, no load error, and both engines' pools report every block
#     free at the end (no leak), no invariant violation, every process exits 0;
#     1c. --spec 3 with 12 tokens a request: D's decode steps take drafts
#     and roll the rejected back, every request ok, pools clean;
#  2. 30% of the requests aborted at random moments: every request ends
#     (ok, error or aborted), both pools drain, no violation. Errors may
#     happen here: a pull for a request P aborted before it was ready holds
#     request slots of the sender (32 pulls, 64 request slots) until the
#     ready-wait timeout, and a pull that finds none free gets a whole-batch
#     ERROR ("sender busy");
#  3. SIGKILL of P in the middle of transfers: D reports load errors for the
#     affected requests, fails them (policy fail), frees every block and does
#     not hang; the proxy reports the failed requests and P as unreachable;
#     3b. SIGSTOP of P for longer than D's receive timeout, then SIGCONT: D
#     fails the pulls it gave up on, the thawed P's late answers corrupt no
#     block (no violation), every request ends, both pools clean;
#     3b2. the same freeze of D: every request ends, no violation, both pools
#     clean (P's expired holds are released, D's late pulls answered or dropped);
#     3c. SIGKILL of D mid-run: the proxy sees the link close, fails what it
#     had sent to D and every later request for it (ENGINE_DOWN), so the run
#     ends without a stall; P's holds end and its pool is clean;
#     3d. one of two D engines killed mid-run, then a new process started in
#     its place: the proxy fails only what D1 held, sends the rest to D2
#     meanwhile, takes the new D1 back (it finishes requests), 3 pools clean;
#     3e. the proxy SIGKILLed mid-run and a new proxy started on the same
#     address (--listen 127.0.0.1:PORT) with its own requests: P and D abort
#     what the old one had sent, redial, log that they took the new one; its
#     requests (over P, D1 and a new D2, which finds P only through the new
#     proxy's bootstrap, so P registered again) all end ok, 3 pools clean, no
#     violation, every process exits 0; again with a cluster secret;
#     3f. the proxy killed and none comes back: P with --proxy-wait-ms 0 exits
#     11 at once, D with 6000 says what it waits for and exits 11;
#  4. two P and two D engines (five processes): the proxy spreads the
#     requests round-robin over both P and both D (every engine finishes
#     half of them), every request ok, each D verified every block it
#     received, all four pools report every block free at the end;
#  5. a cluster secret (kvnode keygen): the proxy, P and D prove it on every
#     link and the run is clean; decode engines with another secret or with
#     none are refused (and the proxy logs why); without a secret kvnode will
#     not listen on a non-loopback address.
# KVNODE_BUILD picks the build (default build/; the TSan run uses build-tsan),
# KVNODE_REQUESTS the request count. Every wait is bounded.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${KVNODE_BUILD:-build}
N=${KVNODE_REQUESTS:-1000}
K=$B/bin/kvnode
[ -x "$K" ] || { echo "kvnode: $K not built" >&2; exit 1; }
. tools/lib_proc.sh # waitfor, proc_scratch
proc_scratch
fail() {
  echo "kvnode ($B): FAILED — $*" >&2
  for f in "$tmp"/*.out "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f" >&2; grep -v 'pull batch\|respond batch' "$f" | tail -25 >&2; }; done
  exit 1
}
jget() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# start NAME "proxy args" "engine args": sets PX PP PD (one P, one D)
start() {
  local name=$1
  rm -f "$tmp/$name.port"
  "$K" --role proxy --port-file "$tmp/$name.port" --json "$tmp/$name.json" $2 >"$tmp/$name.proxy.out" 2>"$tmp/$name.proxy.err" &
  PX=$!; pids+=("$PX")
  for _ in $(seq 200); do [ -s "$tmp/$name.port" ] && break; sleep 0.05; done
  [ -s "$tmp/$name.port" ] || fail "$name: proxy did not start"
  local port; port=$(cat "$tmp/$name.port")
  "$K" --role prefill --proxy "127.0.0.1:$port" --log info $3 2>"$tmp/$name.p.err" &
  PP=$!; pids+=("$PP")
  "$K" --role decode --proxy "127.0.0.1:$port" --log info $3 2>"$tmp/$name.d.err" &
  PD=$!; pids+=("$PD")
}

# signal_at NAME SIG PID DONE TRIES: sends SIG to PID once the proxy of
# `start NAME` reports DONE requests done (polled every 20 ms, TRIES times);
# fails the test when the run ends first
signal_at() {
  local name=$1 sig=$2 pid=$3 want=$4 tries=$5 d
  for _ in $(seq "$tries"); do
    d=$(grep -o "progress [0-9]*" "$tmp/$name.proxy.err" 2>/dev/null | tail -1 | awk '{print $2}')
    if [ "${d:-0}" -ge "$want" ]; then kill "-$sig" "$pid"; return 0; fi
    kill -0 "$PX" 2>/dev/null || break
    sleep 0.02
  done
  fail "$name: the run ended before $sig could be sent"
}


# finish NAME: the proxy, P and D of `start NAME` all exit 0 in time
finish() {
  local rc
  waitfor "$PX" 180; rc=$?; [ $rc = 0 ] || fail "$1: proxy exited $rc"
  waitfor "$PP" 20; rc=$?; [ $rc = 0 ] || fail "$1: P exited $rc"
  waitfor "$PD" 20; rc=$?; [ $rc = 0 ] || fail "$1: D exited $rc"
}

check_clean() { # name engine
  local j=$tmp/$1.json e=$2
  [ "$(jget "$j" "d['engines'][$e]['reachable']")" = True ] || fail "$1: engine $e unreachable"
  [ "$(jget "$j" "d['engines'][$e]['clean']")" = True ] || fail "$1: engine $e pool not clean: $(jget "$j" "d['engines'][$e]")"
  [ "$(jget "$j" "d['engines'][$e]['free'] + d['engines'][$e]['cached'] == d['engines'][$e]['capacity']")" = True ] ||
    fail "$1: engine $e: not every block free"
  [ "$(jget "$j" "d['engines'][$e]['violations']")" = 0 ] || fail "$1: engine $e reported violations"
}

# ---- 1: N requests, every block verified, no leak ----------------------------------
start clean "--requests $N" ""
finish clean
j=$tmp/clean.json
[ "$(jget "$j" "d['ok']")" = "$N" ] || fail "clean: $(jget "$j" "d['ok']") of $N ok"
[ "$(jget "$j" "d['engines'][1]['load_errors']")" = 0 ] || fail "clean: D load errors"
# every block D received was checked: blocks = sum over requests of cdiv(prompt, 16)
[ "$(jget "$j" "d['block_bytes'] > 0 and d['engines'][1]['verified_blocks'] * d['block_bytes'] >= d['kv_bytes']")" = True ] ||
  fail "clean: D verified $(jget "$j" "d['engines'][1]['verified_blocks']") blocks for $(jget "$j" "d['kv_bytes']") bytes"
check_clean clean 0; check_clean clean 1
echo "  $N requests, 3 processes: all ok, $(jget "$j" "d['engines'][1]['verified_blocks']") blocks verified, pools clean ($(jget "$j" "d['req_per_s']") req/s, p99 $(jget "$j" "d['p99_ms']") ms)"

# ---- 1b: KV kept apart from the transport's memory (core/kvmem.h, the HBM path's shape) --
NS=$(( N < 300 ? N : 300 ))
start staged "--requests $NS" "--kvmem staged"
finish staged
j=$tmp/staged.json
[ "$(jget "$j" "d['ok']")" = "$NS" ] || fail "staged: $(jget "$j" "d['ok']") of $NS ok"
[ "$(jget "$j" "d['engines'][1]['verified_blocks'] * d['block_bytes'] >= d['kv_bytes']")" = True ] ||
  fail "staged: D verified too few blocks"
check_clean staged 0; check_clean staged 1
echo "  $NS requests with --kvmem staged (P exposes before its sends, D absorbs before it verifies): all ok, pools clean"

# ---- 1c: speculative decoding: D takes drafts, rolls the rejected back --------------
start spec "--requests $NS --decode-tokens 12" "--spec 3"
finish spec
j=$tmp/spec.json
[ "$(jget "$j" "d['ok']")" = "$NS" ] || fail "spec: $(jget "$j" "d['ok']") of $NS ok"
[ "$(jget "$j" "d['engines'][1]['drafts'] > d['engines'][1]['drafts_accepted'] > 0")" = True ] ||
  fail "spec: D took $(jget "$j" "d['engines'][1]['drafts']") drafts, kept $(jget "$j" "d['engines'][1]['drafts_accepted']")"
[ "$(jget "$j" "d['engines'][0]['drafts']")" = 0 ] || fail "spec: P (one token per request) took drafts"
check_clean spec 0; check_clean spec 1
echo "  $NS requests of 12 tokens with --spec 3: all ok, D took $(jget "$j" "d['engines'][1]['drafts']") drafts and kept $(jget "$j" "d['engines'][1]['drafts_accepted']"), pools clean"

# ---- 2: aborts at random phases --------------------------------------------------------
NA=$(( N < 400 ? N : 400 ))
start abort "--requests $NA --window 8 --abort-frac 0.3 --abort-max-us 10000 --seed 7 --abort-timeout-ms 1000" "--step-us 200 --abort-timeout-ms 1000"
finish abort
j=$tmp/abort.json
[ "$(jget "$j" "d['pending']")" = 0 ] || fail "abort: requests without an outcome"
[ "$(jget "$j" "d['ok'] + d['error'] + d['aborted']")" = "$NA" ] || fail "abort: outcomes do not add up"
[ "$(jget "$j" "d['aborted'] > 0")" = True ] || fail "abort: nothing was aborted"
check_clean abort 0; check_clean abort 1
echo "  $NA requests, 30% marked for abort at random moments: $(jget "$j" "d['aborted']") aborted, $(jget "$j" "d['ok']") ok, $(jget "$j" "d['error']") errors, pools clean"

# ---- 3: SIGKILL of P mid-transfer ------------------------------------------------------
start kill "--requests $N --window 16 --stall-ms 60000" "--step-us 300"
signal_at kill KILL "$PP" $((N / 5)) 600
waitfor "$PX" 180; rc=$?; [ $rc = 0 ] || fail "kill: proxy exited $rc (stalled or hung)"
waitfor "$PD" 30; rc=$?; [ $rc = 0 ] || fail "kill: D exited $rc"
j=$tmp/kill.json
[ "$(jget "$j" "d['pending']")" = 0 ] || fail "kill: requests without an outcome"
[ "$(jget "$j" "d['error'] > 0")" = True ] || fail "kill: no failed request reported"
[ "$(jget "$j" "d['ok'] + d['error'] + d['aborted']")" = "$N" ] || fail "kill: outcomes do not add up"
[ "$(jget "$j" "d['engines'][0]['reachable']")" = False ] || fail "kill: P still reachable"
[ "$(jget "$j" "d['engines'][1]['load_errors'] > 0")" = True ] || fail "kill: D reported no load error"
check_clean kill 1
grep -q "unreachable" "$tmp/kill.proxy.out" || fail "kill: proxy did not report P unreachable"
echo "  SIGKILL of P at $((N / 5))+ done: $(jget "$j" "d['error']") requests failed with $(jget "$j" "d['engines'][1]['load_errors']") load errors on D, D pool clean, no hang"
# ---- 3b: P frozen (SIGSTOP) longer than D's receive timeout, then thawed ----------------
# A stalled process, not a dead one: its connections stay up and its kernel
# keeps D's pulls. D gives up on them by its receive timeout, revokes the
# pulls' region grants, fails those requests and reuses their blocks; the
# thawed P then answers stale pulls, and its late WRITEs must not land in
# blocks D has given to others (D verifies every block: no violation).
NF=$(( N < 400 ? N : 400 ))
# freeze NAME P|D: NF requests; that engine stopped for 2.5 s at NF/4 done, then
# continued; every request ends, both pools clean; j is the run's JSON
freeze() {
  local pid
  start "$1" "--requests $NF --window 16 --stall-ms 60000" "--step-us 300 --recv-timeout-ms 1000 --abort-timeout-ms 2000"
  pid=$PP; [ "$2" = D ] && pid=$PD
  signal_at "$1" STOP "$pid" $((NF / 4)) 3000 # up to 60 s: a TSan build does about 7 requests/s
  sleep 2.5
  kill -CONT "$pid"
  finish "$1"
  j=$tmp/$1.json
  [ "$(jget "$j" "d['pending']")" = 0 ] || fail "$1: requests without an outcome"
  [ "$(jget "$j" "d['ok'] + d['error'] + d['aborted']")" = "$NF" ] || fail "$1: outcomes do not add up"
  check_clean "$1" 0; check_clean "$1" 1
}
freeze freeze P
[ "$(jget "$j" "d['engines'][1]['load_errors'] > 0")" = True ] || fail "freeze: D reported no load error"
echo "  SIGSTOP of P for 2.5 s at $((NF / 4))+ done (D's receive timeout 1 s), then SIGCONT: $(jget "$j" "d['error']") requests failed with $(jget "$j" "d['engines'][1]['load_errors']") load errors on D, $(jget "$j" "d['ok']") ok, no violation, both pools clean"

# ---- 3b2: SIGSTOP of D for longer than its receive timeout, then SIGCONT ------------------
freeze freezed D
echo "  SIGSTOP of D for 2.5 s at $((NF / 4))+ done, then SIGCONT: $(jget "$j" "d['ok']") ok, $(jget "$j" "d['error']") failed, no violation, both pools clean"

# ---- 3c: SIGKILL of D mid-run: the proxy fails D's requests at once, no stall ------------
start killd "--requests $N --window 16 --stall-ms 60000" "--step-us 300"
signal_at killd KILL "$PD" $((N / 5)) 600
waitfor "$PX" 120; rc=$?; [ $rc = 0 ] || fail "killd: proxy exited $rc (stalled or hung)"
waitfor "$PP" 30; rc=$?; [ $rc = 0 ] || fail "killd: P exited $rc"
j=$tmp/killd.json
grep -q "engine D1 is gone" "$tmp/killd.proxy.err" || fail "killd: the proxy did not notice D's loss"
grep -q "STALLED" "$tmp/killd.proxy.err" && fail "killd: the proxy stalled"
[ "$(jget "$j" "d['pending']")" = 0 ] || fail "killd: requests without an outcome"
[ "$(jget "$j" "d['stalled']")" = False ] || fail "killd: stalled"
[ "$(jget "$j" "d['error'] > 0")" = True ] || fail "killd: no failed request reported"
[ "$(jget "$j" "d['ok'] + d['error'] + d['aborted']")" = "$N" ] || fail "killd: outcomes do not add up"
[ "$(jget "$j" "d['engines'][1]['reachable']")" = False ] || fail "killd: D still reachable"
check_clean killd 0
echo "  SIGKILL of D at $((N / 5))+ done: the proxy failed D's $(jget "$j" "d['error']") requests at once (no stall), P's pool clean"
# ---- 3d: one of two D engines killed, then restarted: routed around, then taken back -------
NR=400 # whatever N: the run must outlast a new process's start-up
rm -f "$tmp/redo.port"
"$K" --role proxy --prefills 1 --decodes 2 --port-file "$tmp/redo.port" --json "$tmp/redo.json" --requests "$NR" \
  --window 4 >"$tmp/redo.proxy.out" 2>"$tmp/redo.proxy.err" &
PX=$!; pids+=("$PX")
for _ in $(seq 200); do [ -s "$tmp/redo.port" ] && break; sleep 0.05; done
[ -s "$tmp/redo.port" ] || fail "redo: proxy did not start"
port=$(cat "$tmp/redo.port")
"$K" --role prefill --index 0 --proxy "127.0.0.1:$port" --step-us 2000 2>"$tmp/redo.p.err" & PP=$!; pids+=("$PP")
"$K" --role decode --index 1 --proxy "127.0.0.1:$port" --step-us 2000 2>"$tmp/redo.d1.err" & PD=$!; pids+=("$PD")
"$K" --role decode --index 2 --proxy "127.0.0.1:$port" --step-us 2000 2>"$tmp/redo.d2.err" & PD2=$!; pids+=("$PD2")
signal_at redo KILL "$PD" $((NR / 5)) 1500
for _ in $(seq 200); do grep -q "engine D1 is gone" "$tmp/redo.proxy.err" && break; sleep 0.02; done
grep -q "engine D1 is gone" "$tmp/redo.proxy.err" || fail "redo: the proxy did not notice D1's loss"
"$K" --role decode --index 1 --proxy "127.0.0.1:$port" --step-us 2000 2>"$tmp/redo.d1b.err" & PD=$!; pids+=("$PD")
waitfor "$PX" 120; rc=$?; [ $rc = 0 ] || fail "redo: proxy exited $rc"
for p in "$PP" "$PD" "$PD2"; do waitfor "$p" 20; rc=$?; [ $rc = 0 ] || fail "redo: an engine exited $rc"; done
j=$tmp/redo.json
grep -q "engine D1 is back" "$tmp/redo.proxy.err" || fail "redo: the proxy did not take D1 back"
[ "$(jget "$j" "d['pending']")" = 0 ] || fail "redo: requests without an outcome"
[ "$(jget "$j" "d['ok'] + d['error'] + d['aborted']")" = "$NR" ] || fail "redo: outcomes do not add up"
# only what D1 held when it died fails: the rest went to D2 meanwhile
[ "$(jget "$j" "d['error'] <= 16")" = True ] || fail "redo: $(jget "$j" "d['error']") requests failed (only D1's in-flight ones should)"
[ "$(jget "$j" "d['engines'][1]['finished'] > 0")" = True ] || fail "redo: the new D1 finished nothing"
check_clean redo 0; check_clean redo 1; check_clean redo 2
echo "  SIGKILL of D1 of two at $((NR / 5))+ done, then a new D1: $(jget "$j" "d['error']") requests failed (D1's in flight), the rest went to D2 meanwhile, the new D1 finished $(jget "$j" "d['engines'][1]['finished']"); $(jget "$j" "d['ok']") ok, 3 pools clean"

# ---- 3e: the proxy SIGKILLed mid-run, a new proxy on the same address takes the engines -----
# restart NAME "node args": proxy 1 (its address from the port file) with P and D1; SIGKILL of
# proxy 1 at 40+ done; proxy 2 on the same address with its own NP requests over P, D1 and a new
# D2 (which finds P only through proxy 2's bootstrap: P registered again): all ok, P and D1 log
# that they took it, the three pools clean, no violation, every process exits 0
NP=100
restart() {
  local name=$1 extra=$2 port rc e
  rm -f "$tmp/$name.port"
  "$K" --role proxy --port-file "$tmp/$name.port" --requests 400 --window 8 $extra \
    >"$tmp/$name.proxy.out" 2>"$tmp/$name.proxy.err" &
  PX=$!; pids+=("$PX")
  for _ in $(seq 200); do [ -s "$tmp/$name.port" ] && break; sleep 0.05; done
  [ -s "$tmp/$name.port" ] || fail "$name: proxy 1 did not start"
  port=$(cat "$tmp/$name.port")
  local eng="--proxy 127.0.0.1:$port --log info --step-us 1000 --proxy-wait-ms 120000 $extra"
  "$K" --role prefill $eng 2>"$tmp/$name.p.err" & PP=$!; pids+=("$PP")
  "$K" --role decode $eng 2>"$tmp/$name.d.err" & PD=$!; pids+=("$PD")
  signal_at "$name" KILL "$PX" 40 3000 # up to 60 s: a TSan build is slow
  waitfor "$PX" 10 # 137: killed
  "$K" --role proxy --listen "127.0.0.1:$port" --decodes 2 --json "$tmp/$name.json" --requests $NP $extra \
    >"$tmp/$name.proxy2.out" 2>"$tmp/$name.proxy2.err" &
  PX=$!; pids+=("$PX")
  "$K" --role decode --index 2 $eng 2>"$tmp/$name.d2.err" & PD2=$!; pids+=("$PD2")
  waitfor "$PX" 180; rc=$?; [ $rc = 0 ] || fail "$name: proxy 2 exited $rc"
  waitfor "$PP" 30; rc=$?; [ $rc = 0 ] || fail "$name: P exited $rc"
  waitfor "$PD" 30; rc=$?; [ $rc = 0 ] || fail "$name: D1 exited $rc"
  waitfor "$PD2" 30; rc=$?; [ $rc = 0 ] || fail "$name: D2 exited $rc"
  j=$tmp/$name.json
  [ "$(jget "$j" "d['ok']")" = $NP ] || fail "$name: $(jget "$j" "d['ok']") of proxy 2's $NP requests ok"
  for e in p d; do
    grep -q "the proxy's link is lost: aborting the [0-9]* request" "$tmp/$name.$e.err" || fail "$name: $e did not end the lost proxy's requests"
    grep -q "took the new proxy at 127.0.0.1:$port" "$tmp/$name.$e.err" || fail "$name: $e did not take the new proxy"
    grep -q "VIOLATION" "$tmp/$name.$e.err" && fail "$name: $e reported a violation"
  done
  grep -q "VIOLATION" "$tmp/$name.d2.err" && fail "$name: D2 reported a violation"
  check_clean "$name" 0; check_clean "$name" 1; check_clean "$name" 2
  for e in 1 2; do
    [ "$(jget "$j" "d['engines'][$e]['verified_blocks'] > 0")" = True ] || fail "$name: D$e verified nothing for proxy 2"
  done
}
restart restart ""
echo "  SIGKILL of the proxy at 40+ done, a new proxy on the same address: P and D ended the old one's requests (P $(grep -o 'aborting the [0-9]*' "$tmp/restart.p.err" | grep -o '[0-9]*'), D $(grep -o 'aborting the [0-9]*' "$tmp/restart.d.err" | grep -o '[0-9]*')), took the new one, which ran its $NP requests (all ok) over them and a new D2 that found P through its bootstrap, 3 pools clean, every process exits 0"
"$K" keygen "$tmp/rsecret" 2>/dev/null || fail "restart: keygen"
restart restartsec "--secret-file $tmp/rsecret"
echo "  the same with a cluster secret (the new proxy's links prove it again): $NP ok, 3 pools clean"

# ---- 3f: the proxy killed and none comes back: --proxy-wait-ms 0 exits 11 at once, N ms after N ms
# (D's receive timeout 2 s bounds its drain, so its redial surely runs for over a second)
rm -f "$tmp/gone.port"
"$K" --role proxy --port-file "$tmp/gone.port" --requests 400 --window 8 >"$tmp/gone.proxy.out" 2>"$tmp/gone.proxy.err" &
PX=$!; pids+=("$PX")
for _ in $(seq 200); do [ -s "$tmp/gone.port" ] && break; sleep 0.05; done
[ -s "$tmp/gone.port" ] || fail "gone: proxy did not start"
port=$(cat "$tmp/gone.port")
"$K" --role prefill --proxy "127.0.0.1:$port" --step-us 1000 --proxy-wait-ms 0 2>"$tmp/gone.p.err" & PP=$!; pids+=("$PP")
"$K" --role decode --proxy "127.0.0.1:$port" --step-us 1000 --recv-timeout-ms 2000 --proxy-wait-ms 6000 2>"$tmp/gone.d.err" & PD=$!; pids+=("$PD")
signal_at gone KILL "$PX" 40 3000
waitfor "$PX" 10
waitfor "$PP" 20; rc=$?; [ $rc = 11 ] || fail "gone: P (--proxy-wait-ms 0) exited $rc, wanted 11"
grep -q "the proxy went away; stopping (--proxy-wait-ms 0)" "$tmp/gone.p.err" || fail "gone: P did not say why it stopped"
waitfor "$PD" 60; rc=$?; [ $rc = 11 ] || fail "gone: D (--proxy-wait-ms 6000) exited $rc, wanted 11"
grep -q "waiting for a connection to 127.0.0.1:$port" "$tmp/gone.d.err" || fail "gone: D did not say what it waits for"
grep -q "no new one was taken in 6000 ms" "$tmp/gone.d.err" || fail "gone: D did not say it gave up"
echo "  the proxy killed and no new one: P with --proxy-wait-ms 0 exits 11 at once, D with 6000 says what it waits for and exits 11"

# ---- 4: two P + two D engines, round-robin --------------------------------------------
NM=$(( N < 400 ? N : 400 ))
rm -f "$tmp/multi.port"
"$K" --role proxy --prefills 2 --decodes 2 --port-file "$tmp/multi.port" --json "$tmp/multi.json" --requests "$NM" \
  >"$tmp/multi.proxy.out" 2>"$tmp/multi.proxy.err" &
PX=$!; pids+=("$PX")
for _ in $(seq 200); do [ -s "$tmp/multi.port" ] && break; sleep 0.05; done
[ -s "$tmp/multi.port" ] || fail "multi: proxy did not start"
port=$(cat "$tmp/multi.port")
epids=()
for e in 0 1 2 3; do
  role=prefill; [ $e -ge 2 ] && role=decode
  "$K" --role $role --index $e --proxy "127.0.0.1:$port" --log info 2>"$tmp/multi.e$e.err" &
  epids+=($!); pids+=($!)
done
waitfor "$PX" 180; rc=$?; [ $rc = 0 ] || fail "multi: proxy exited $rc"
for e in 0 1 2 3; do waitfor "${epids[$e]}" 20; rc=$?; [ $rc = 0 ] || fail "multi: engine $e exited $rc"; done
j=$tmp/multi.json
[ "$(jget "$j" "len(d['engines'])")" = 4 ] || fail "multi: $(jget "$j" "len(d['engines'])") engines reported"
[ "$(jget "$j" "[e['role'] for e in d['engines']]")" = "['P', 'P', 'D', 'D']" ] || fail "multi: roles $(jget "$j" "[e['role'] for e in d['engines']]")"
[ "$(jget "$j" "d['ok']")" = "$NM" ] || fail "multi: $(jget "$j" "d['ok']") of $NM ok"
for e in 0 1 2 3; do
  check_clean multi $e
  # round-robin: request k goes to P k%2 and D 2+(k/2)%2, so each engine finishes half
  [ "$(jget "$j" "d['engines'][$e]['finished']")" = $((NM / 2)) ] ||
    fail "multi: engine $e finished $(jget "$j" "d['engines'][$e]['finished']") of $((NM / 2))"
done
for e in 2 3; do [ "$(jget "$j" "d['engines'][$e]['load_errors']")" = 0 ] || fail "multi: D$e load errors"; done
[ "$(jget "$j" "(d['engines'][0]['finished_sending'], d['engines'][1]['finished_sending'], d['engines'][2]['finished_recving'], d['engines'][3]['finished_recving']) == ($((NM / 2)),) * 4")" = True ] ||
  fail "multi: transfers per engine: $(jget "$j" "[(e['finished_sending'], e['finished_recving']) for e in d['engines']]")"
# every block each D received was checked: verified blocks x block bytes = KV bytes moved
[ "$(jget "$j" "d['block_bytes'] > 0 and (d['engines'][2]['verified_blocks'] + d['engines'][3]['verified_blocks']) * d['block_bytes'] == d['kv_bytes']")" = True ] ||
  fail "multi: D verified $(jget "$j" "d['engines'][2]['verified_blocks'] + d['engines'][3]['verified_blocks']") blocks for $(jget "$j" "d['kv_bytes']") bytes"
echo "  $NM requests, 2 P + 2 D (5 processes): all ok, each engine $((NM / 2)), $(jget "$j" "d['engines'][2]['verified_blocks']") + $(jget "$j" "d['engines'][3]['verified_blocks']") blocks verified, 4 pools clean"
# ---- 5: a cluster secret: every link proves it; a node with another one gets nothing -------
S=$tmp/secret
"$K" keygen "$S" 2>/dev/null || fail "auth: keygen"
[ "$(stat -c %a "$S")" = 600 ] || fail "auth: the secret file is mode $(stat -c %a "$S")"
"$K" keygen "$S" 2>"$tmp/keygen2.err" && fail "auth: keygen overwrote a secret"
"$K" --role proxy --listen 0.0.0.0:0 --requests 1 2>"$tmp/open.err"; rc=$?
[ $rc = 4 ] && grep -q "loopback (127.x) only" "$tmp/open.err" || fail "auth: a non-loopback listen without a secret was not refused (exit $rc)"
NX=$(( N < 200 ? N : 200 ))
"$K" keygen "$tmp/other" 2>/dev/null
rm -f "$tmp/auth.port"
"$K" --role proxy --secret-file "$S" --port-file "$tmp/auth.port" --json "$tmp/auth.json" --requests "$NX" \
  >"$tmp/auth.proxy.out" 2>"$tmp/auth.proxy.err" &
PX=$!; pids+=("$PX")
for _ in $(seq 200); do [ -s "$tmp/auth.port" ] && break; sleep 0.05; done
[ -s "$tmp/auth.port" ] || fail "auth: proxy did not start"
port=$(cat "$tmp/auth.port")
# an intruder with another secret, then one with none, before the honest engines
"$K" --role decode --proxy "127.0.0.1:$port" --secret-file "$tmp/other" 2>"$tmp/intruder.err"; rc=$?
[ $rc != 0 ] || fail "auth: a decode engine with another secret joined"
"$K" --role decode --proxy "127.0.0.1:$port" 2>"$tmp/intruder2.err"; rc=$?
[ $rc != 0 ] || fail "auth: a decode engine without a secret joined"
# the side that checks the other's PROOF first logs it (the other sees the link close)
cat "$tmp/auth.proxy.err" "$tmp/intruder.err" | grep -q "does not hold the cluster secret" || fail "auth: nobody logged the wrong secret"
cat "$tmp/auth.proxy.err" "$tmp/intruder2.err" | grep -q "cluster secret" || fail "auth: nobody logged the missing secret"
KVCONN_SECRET=$(cat "$S") "$K" --role prefill --proxy "127.0.0.1:$port" 2>"$tmp/auth.p.err" &
PP=$!; pids+=("$PP")
"$K" --role decode --proxy "127.0.0.1:$port" --secret-file "$S" 2>"$tmp/auth.d.err" &
PD=$!; pids+=("$PD")
finish auth
j=$tmp/auth.json
[ "$(jget "$j" "d['ok']")" = "$NX" ] || fail "auth: $(jget "$j" "d['ok']") of $NX ok"
check_clean auth 0; check_clean auth 1
echo "  $NX requests with a cluster secret (file for the proxy and D, KVCONN_SECRET for P): all ok, pools clean; engines with another secret or none refused and logged; no non-loopback listen without one"
echo "kvnode ($B): ok"
