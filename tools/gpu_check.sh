#!/usr/bin/env bash
# tools/gpu_check.sh — the GPU path in one script, the first thing to run on a
# machine with an NVIDIA GPU (at most about 8 minutes; every step has its
# own timeout). On a machine without one it says so and exits 0.
#   1. configures a production build with CUDA (-DKVCONN_PROD=ON
#      -DKVCONN_CUDA=ON, Release; tests on when criterion is there) in
#      build-gpu/ and builds kvnode and test_cuda_hbm;
#   2. runs test_cuda_hbm (the fill kernel equals kv_fill_block byte for
#      byte; the event fence and the pinned staging round trip);
#   3. runs a proxy + prefill + decode set with --kvmem hbm (KV blocks in GPU
#      memory): 1,000 requests, every block D receives verified;
#   4. runs bench/kvnode_bench.sh with KVMEM=hbm, one round;
# then prints one table. Exit 0 when every step passed (or no GPU), 1 when a
# step failed, 3 when a prerequisite is missing (named).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi lists none): skipped"
  exit 0
fi
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
NVCC=$(command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
missing=()
[ -n "$NVCC" ] || missing+=("nvcc (the CUDA toolkit)")
for t in cmake ninja gcc pkg-config python3; do command -v $t >/dev/null 2>&1 || missing+=("$t"); done
for m in libsodium sqlite3; do pkg-config --exists $m 2>/dev/null || missing+=("$m (pkg-config)"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu_check: GPU $gpu, but missing: ${missing[*]}" >&2
  exit 3
fi
tests=ON
ldconfig -p 2>/dev/null | grep -q libcriterion || tests=OFF
B=build-gpu
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
declare -A res
step() { # name timeout_s command...: runs it, logs to $log/name.log, records ok/FAILED
  local name=$1 t=$2; shift 2
  echo "== $name"
  if timeout "$t" "$@" >"$log/$name.log" 2>&1; then res[$name]=ok; else res[$name]="FAILED (exit $?)"; tail -20 "$log/$name.log"; fi
}
step configure 120 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVCONN_PROD=ON -DKVCONN_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$NVCC" -DKVCONN_TESTS=$tests
targets=(kvnode); [ $tests = ON ] && targets+=(test_cuda_hbm)
[ "${res[configure]}" = ok ] && step build 240 cmake --build "$B" -j "$(nproc)" --target "${targets[@]}"
if [ "${res[build]:-}" = ok ]; then
  if [ $tests = ON ]; then step test_cuda_hbm 60 "$B/bin/test_cuda_hbm" --jobs 1; else res[test_cuda_hbm]="skipped (no criterion)"; fi
  # 3: proxy + P + D with HBM pools
  K=$B/bin/kvnode
  hbm_run() {
    local port
    "$K" --role proxy --port-file "$log/p.port" --json "$log/hbm.json" --requests 1000 >"$log/proxy.out" 2>&1 &
    local px=$!
    for _ in $(seq 200); do [ -s "$log/p.port" ] && break; sleep 0.05; done
    port=$(cat "$log/p.port")
    "$K" --role prefill --proxy "127.0.0.1:$port" --kvmem hbm 2>"$log/p.err" &
    local pp=$!
    "$K" --role decode --proxy "127.0.0.1:$port" --kvmem hbm 2>"$log/d.err" &
    local pd=$!
    wait $px; local rc=$?
    wait $pp; wait $pd
    [ $rc = 0 ] || return $rc
    python3 - "$log/hbm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = d['ok'] == 1000 and d['engines'][1]['verified_blocks'] * d['block_bytes'] >= d['kv_bytes'] and \
     all(e['clean'] and e['violations'] == 0 for e in d['engines'])
print(f"hbm: {d['ok']}/1000 ok, {d['engines'][1]['verified_blocks']} blocks verified, "
      f"{d['req_per_s']:.1f} req/s, {d['kv_gbps']:.3f} GB/s, pools clean: {all(e['clean'] for e in d['engines'])}")
sys.exit(0 if ok else 1)
PY
  }
  export K log
  export -f hbm_run
  step kvnode_hbm 120 bash -c hbm_run
  if [ "${res[kvnode_hbm]}" = ok ]; then step bench_hbm 240 env KVMEM=hbm ROUNDS=1 bench/kvnode_bench.sh "$B"
  else res[bench_hbm]="not run (kvnode_hbm failed)"; fi
fi
echo
echo "gpu_check: $gpu, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
echo
echo "| step | result |"
echo "| --- | --- |"
for s in configure build test_cuda_hbm kvnode_hbm bench_hbm; do echo "| $s | ${res[$s]:-not run} |"; done
[ -s "$log/kvnode_hbm.log" ] && { echo; grep '^hbm:' "$log/kvnode_hbm.log"; }
[ -s "$log/bench_hbm.log" ] && { echo; grep -E '^\||^with a secret|^kvt set-up|^kvnode benchmark' "$log/bench_hbm.log"; }
for s in configure build test_cuda_hbm kvnode_hbm bench_hbm; do
  case "${res[$s]:-not run}" in ok|skipped*) ;; *) exit 1 ;; esac
done
exit 0
