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

# Network namespaces, for faults on links (root only; tests/chaos.sh):
# netns_up N makes N namespaces, one per node, each with one address
# (netns_ip I) on a bridge of its own that the test's namespace also
# reaches (so clients connect from here); netns_run I CMD... runs CMD in
# namespace I (it execs: $! is CMD's PID); netns_cut I J and netns_heal
# I J drop and restore every packet between I and J (blackhole routes on
# both sides, so each just stops hearing the other, as with a pulled
# cable). Returns 1 (and makes nothing) where namespaces or the bridge do
# not work: the caller runs without link faults. Removed on exit.
NETNS_TAG=sn$$
NETNS_NET=
netns_ip() { echo "$NETNS_NET.$1"; }
netns_run() { local i=$1; shift; ip netns exec "$NETNS_TAG-$i" "$@"; }
netns_cut() {
  ip -n "$NETNS_TAG-$1" route add blackhole "$(netns_ip "$2")/32" &&
    ip -n "$NETNS_TAG-$2" route add blackhole "$(netns_ip "$1")/32"
}
netns_heal() {
  ip -n "$NETNS_TAG-$1" route del blackhole "$(netns_ip "$2")/32" 2>/dev/null
  ip -n "$NETNS_TAG-$2" route del blackhole "$(netns_ip "$1")/32" 2>/dev/null
  return 0
}
netns_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk -v t="$NETNS_TAG-" 'index($1, t) == 1 { print $1 }'); do
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "${NETNS_TAG}b" 2>/dev/null
  return 0
}
netns_up() {
  local n=$1 i
  [ "$(id -u)" = 0 ] && command -v ip >/dev/null || return 1
  # a /24 of 10/8 that no route here uses yet
  for _ in $(seq 20); do
    NETNS_NET=10.$((100 + RANDOM % 150)).$((RANDOM % 250))
    [ -z "$(ip route show to match "$NETNS_NET.1" 2>/dev/null | grep -v '^default')" ] && break
  done
  trap 'netns_down; cleanup' EXIT
  { ip link add "${NETNS_TAG}b" type bridge &&
    ip addr add "$NETNS_NET.254/24" dev "${NETNS_TAG}b" && ip link set "${NETNS_TAG}b" up; } 2>/dev/null ||
    { netns_down; return 1; }
  for i in $(seq "$n"); do
    { ip netns add "$NETNS_TAG-$i" &&
      ip link add "${NETNS_TAG}v$i" type veth peer name eth0 netns "$NETNS_TAG-$i" &&
      ip link set "${NETNS_TAG}v$i" master "${NETNS_TAG}b" up &&
      ip -n "$NETNS_TAG-$i" addr add "$NETNS_NET.$i/24" dev eth0 &&
      ip -n "$NETNS_TAG-$i" link set eth0 up && ip -n "$NETNS_TAG-$i" link set lo up; } 2>/dev/null ||
      { netns_down; return 1; }
  done
  # the bridge must pass packets (a host firewall may filter bridged
  # traffic): a connection to a closed port is refused, not lost
  reach() { timeout 3 ip netns exec "$NETNS_TAG-$1" bash -c "exec 3<>/dev/tcp/$2/9" 2>&1 | grep -q refused; }
  for i in $(seq 2 "$n"); do
    reach 1 "$(netns_ip "$i")" && reach "$i" "$NETNS_NET.254" || { netns_down; return 1; }
  done
  return 0
}
