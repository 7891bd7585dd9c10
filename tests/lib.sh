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
# outgoing connection takes it between our check and the node's bind), in
# no state in /proc/net/tcp or tcp6, and not one this test got before
# ($dir/ports: the nodes bind later, so /proc alone let two calls give the
# same port, and config.sh's nodes 2 and 3 both got 18194 once).
free_port() {
  local p hex lo=32768
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$lo" -gt 12000 ] || lo=32768
  while :; do
    p=$((10000 + RANDOM % (lo - 10000))); hex=$(printf '%04X' "$p")
    grep -qx "$p" "$dir/ports" 2>/dev/null && continue
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$hex " && continue
    echo "$p" >>"$dir/ports"
    echo "$p"
    return
  done
}

# Waits up to $1 tenths of a second for the command after it to succeed.
wait_for() {
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}


# netns_ok: whether network namespaces work here: root, `ip netns add`, a
# command run inside one (`ip netns exec` fails in a chroot: it cannot
# remount /sys), a bridge. Else false, with the reason in $netns_why.
netns_ok() {
  local ns="snp$$x" out
  netns_why=
  [ "$(id -u)" = 0 ] || { netns_why="needs root (network namespaces, a bridge)"; return 1; }
  # in a chroot, ask nothing of ip (its /run/netns mount would stay in the root)
  # (a chroot's root is seldom a mount point: no mount at "/" in its mountinfo)
  if [ -r /proc/self/mountinfo ] && ! awk '$5 == "/" { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    netns_why="in a chroot: ip netns exec cannot remount /sys there"
    return 1
  fi
  out=$(ip netns add "$ns" 2>&1) || { netns_why="ip netns add fails here: $out"; return 1; }
  if ! out=$(ip netns exec "$ns" true 2>&1); then
    ip netns del "$ns" 2>/dev/null
    netns_why="ip netns exec fails here (a chroot or a container?): $(tail -1 <<<"$out")"
    return 1
  fi
  ip netns del "$ns"
  out=$(ip link add "snp$$b" type bridge 2>&1) || { netns_why="cannot make a bridge here: $out"; return 1; }
  ip link del "snp$$b"
}
