# lib.sh - what the multi-node shell tests share: a scratch directory and
# process list cleaned up on any exit, ok/bad counters, free ports, starting
# nodes, the CLI and the status questions the tests ask of a node.
# Source it after setting SN (the schednode program) and, for start, DEMO;
# then use $dir, pids+=(PID), ok "...", bad "...", free_port, and the helpers below.
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
# ($dir/ports: the nodes bind later, so /proc alone would let two calls
# give the same port).
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

# finish: prints the counts and exits, with 0 only if nothing failed.
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

# now_ms: the wall clock in milliseconds.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ep I: node I's endpoint, tcp://ADDR:PORT with PORT from the test's array
# port and ADDR from its array addr (127.0.0.1 where addr has no entry).
ep() { echo "tcp://${addr[$1]:-127.0.0.1}:${port[$1]}"; }

# sec NAME: the security flags of the certificate $dir/keys/NAME.cert, with
# the authorized keys in $dir/auth.
sec() { echo --cert "$dir/keys/$1.cert" --authorized-keys "$dir/auth"; }

# call ARGS...: the CLI, "$SN" ARGS, with the client flags in the array
# call_flags, a reply timeout of $call_ms ms, killed after $call_s s. A test
# sets these three after sourcing this file where its defaults do not fit.
call_flags=(--insecure) call_ms=100000 call_s=120
call() { timeout "$call_s" "$SN" --timeout "$call_ms" ${call_flags[@]+"${call_flags[@]}"} "$@"; }

# launch N LOG ARGS...: runs "$SN" ARGS in the background, its output
# appended to LOG, adds it to pids, sets node_pid_N, and waits up to $up_wait
# tenths of a second (100 unless set) for $up_line ("up: " unless set) in
# LOG. If the line does not come, prints the log and fails.
launch() {
  local n=$1 log=$2
  shift 2
  "$SN" "$@" >>"$log" 2>&1 &
  pids+=($!)
  eval "node_pid_$n=$!"
  wait_for "${up_wait:-100}" grep -qs -- "${up_line:-up: }" "$log" && return 0
  echo "node $n did not come up:"
  cat "$log"
  return 1
}

# start N [SEED...] [FLAGS...]: launches node N (log $dir/nodeN.log) with the
# demo plugin, -n N, --listen $(ep N), the test's array node_flags, what
# node_flags_of N prints (nothing unless the test defines it), a --join for
# each SEED (a node id; an empty one is skipped), then FLAGS, which begin at
# the first argument that starts with "-".
node_flags=()
node_flags_of() { :; }
start() {
  local n=$1 seeds=()
  shift
  while [ $# -gt 0 ] && [ "${1:0:1}" != - ]; do
    [ -n "$1" ] && seeds+=(--join "$(ep "$1")")
    shift
  done
  # shellcheck disable=SC2046 # (node_flags_of prints flags to split at spaces)
  launch "$n" "$dir/node$n.log" --load "$DEMO" -n "$n" --listen "$(ep "$n")" ${node_flags[@]+"${node_flags[@]}"} \
    $(node_flags_of "$n") ${seeds[@]+"${seeds[@]}"} "$@"
}

# status I: node I's status as JSON (nothing if it does not answer). A test
# whose nodes are reached another way redefines it; the helpers below use it.
status() { call status --json --connect "$(ep "$1")" 2>/dev/null; }

# view I: the ids of the nodes node I sees up, a sorted JSON array: [1,2,3].
view() { status "$1" | jq -c '[.nodes[] | select(.state == "up") | .id] | sort'; }

# views I...: each listed node's view, for a failure message: "1:[1,2,3] 2:[1,2] ".
views() { local i; for i in "$@"; do echo -n "$i:$(view "$i") "; done; }

# state_of I J: node J's state as node I sees it (up, suspect, down, ...).
state_of() { status "$1" | jq -r ".nodes[] | select(.id == $2) | .state"; }

# up_count I: how many nodes node I sees up.
up_count() { status "$1" | jq '[.nodes[] | select(.state == "up")] | length'; }

# sees_up I J...: node I sees exactly the nodes J... up.
sees_up() {
  local i=$1
  shift
  [ "$(view "$i")" = "$(printf '%s\n' "$@" | sort -n | jq -sc .)" ]
}

# all_up I...: every listed node sees exactly the listed nodes up.
all_up() { local i; for i in "$@"; do sees_up "$i" "$@" || return 1; done; }

# rss_kb PID [GONE]: the resident set of process PID in kB; GONE (nothing
# unless given) once the process has ended.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo "${2:-}"; }

# cpu_ns PID: the CPU time process PID has run, in ns, summed over its threads.
cpu_ns() { local t a s=0; for t in /proc/$1/task/*/schedstat; do read -r a _ <"$t" 2>/dev/null && s=$((s + a)); done; echo $s; }


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
