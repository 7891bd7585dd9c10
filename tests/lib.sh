# lib.sh - what the multi-node shell tests share: a scratch directory and
# process list cleaned up on any exit, ok/bad counters, free ports.
# Source it; then use $dir, pids+=(PID), ok "...", bad "...", free_port.
dir=$(mktemp -d)
pids=()
pass=0 fail=0
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

# A free TCP port on 127.0.0.1 (not in /proc/net/tcp as a listener).
free_port() {
  local p hex
  while :; do
    p=$((20000 + RANDOM % 40000)); hex=$(printf '%04X' "$p")
    grep -q ":$hex 00000000:0000 0A" /proc/net/tcp 2>/dev/null || { echo "$p"; return; }
  done
}

# Waits up to $1 tenths of a second for the command after it to succeed.
wait_for() {
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}
