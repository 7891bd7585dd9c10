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

# A free TCP port on 127.0.0.1: below the kernel's ephemeral range (so no
# outgoing connection takes it between our check and the node's bind), and
# in no state in /proc/net/tcp or tcp6.
free_port() {
  local p hex lo=32768
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$lo" -gt 12000 ] || lo=32768
  while :; do
    p=$((10000 + RANDOM % (lo - 10000))); hex=$(printf '%04X' "$p")
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$hex " || { echo "$p"; return; }
  done
}

# Waits up to $1 tenths of a second for the command after it to succeed.
wait_for() {
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}

