# tools/lib_proc.sh — shell helpers the multi-process tests share (sourced).

# waitfor PID SECONDS: the exit status of PID, or 124 after SECONDS (then it
# is killed)
waitfor() {
  local pid=$1 s=$2
  for _ in $(seq $((s * 10))); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; return $?; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 124
}

# proc_scratch: sets tmp (a scratch directory) and pids (processes to kill -9
# at exit, append to it); both are cleaned up when the script exits
proc_scratch() {
  tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
}
