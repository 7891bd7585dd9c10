#!/usr/bin/env bash
# local-cluster.sh - a secure N-node schednode cluster on this machine:
# loopback, free ports, a throwaway set of CurveZMQ keys. `up` returns once
# every node sees every other one up; the nodes run on in the background
# until `down`. State (ports, pids, keys, logs) lives in one directory, so
# later subcommands find the cluster again.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${SCHEDNODE_LOCAL_DIR:-${TMPDIR:-/tmp}/schednode-local.$(id -u)}
bin=${SCHEDNODE_BIN:-}
wait_s=30

usage() {
  cat <<EOF
usage: $(basename "$0") [--dir DIR] [--bin SCHEDNODE] COMMAND [ARGS]

A secure schednode cluster on 127.0.0.1 (CurveZMQ with throwaway keys).

Commands:
  up N [-w WORKERS] [--wait S] [-- NODE-FLAGS...]
                   start nodes 1..N on free ports (node 1 starts the cluster,
                   the others join through it); return when all N see each
                   other up (at most --wait seconds, default 30), or stop
                   what was started and exit 1
  down             SIGTERM every node, kill -9 what is left after 10 s,
                   remove the state directory
  status [--json]  the cluster table, as node 1 sees it
  client [-n I] CMD [ARGS...]
                   a client command (spawn, send, call, status, ps, kill,
                   migrate, drain, undrain, whereis, names, service, types:
                   see schednode --help)
                   against node I (default 1), with the cluster's client key
  endpoint I       node I's endpoint
  kill I [SIG]     send node I a signal (default TERM; TERM, INT and KILL
                   wait until it has exited, at most 10 s)
  start I          start node I again (after kill), with its first flags,
                   joining through another node; waits until it is up
  upgrade [--new-bin PATH] [--timeout MS]
                   a rolling restart: node by node, drain it (its processes
                   move to the others; what cannot move gets MS, default
                   10000, to end), stop it, start it again (with PATH from
                   then on, if given), and wait until all see each other up
  logs             the log files, one per node

Options:
  --dir DIR        state directory (default $dir; env SCHEDNODE_LOCAL_DIR)
  --bin PATH       the schednode program (default: build/schednode next to
                   this script's repository, then schednode on PATH;
                   env SCHEDNODE_BIN)
  -h, --help       this help
EOF
}

die() { echo "local-cluster: $*" >&2; exit 2; }

find_bin() {
  [ -n "$bin" ] && { [ -x "$bin" ] || die "--bin $bin: not an executable"; return; }
  if [ -x "$here/../build/schednode" ]; then
    bin=$here/../build/schednode
  elif command -v schednode >/dev/null 2>&1; then
    bin=$(command -v schednode)
  else
    die "no schednode program: build it (cmake --build build) or pass --bin PATH"
  fi
}

# A TCP port nobody uses (no socket in /proc/net/tcp or tcp6 has it), below
# the kernel's ephemeral range so no outgoing connection takes it before the
# node binds it; a port taken anyway shows up as the node failing to bind,
# which `up` reports.
free_port() {
  local p hex lo=32768
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$lo" -gt 12000 ] || lo=32768
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % (lo - 10000))); hex=$(printf '%04X' "$p")
    if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$hex " && ! grep -qx "$p" "$dir/ports" 2>/dev/null; then
      echo "$p"; return
    fi
  done
  die "no free port found"
}

load_state() {
  [ -f "$dir/cluster.env" ] || die "no cluster in $dir (start one with: $(basename "$0") up N)"
  # shellcheck source=/dev/null
  . "$dir/cluster.env"
}

endpoint() { echo "tcp://127.0.0.1:$(sed -n "${1}p" "$dir/ports")"; }
keys() { echo --cert "$dir/keys/$1.cert" --authorized-keys "$dir/keys/authorized"; }

# client I CMD ARGS: one client command against node I, bounded.
client() {
  local n=$1; shift
  # shellcheck disable=SC2046
  timeout 60 "$bin" "$@" --connect "$(endpoint "$n")" $(keys client)
}

# up_count I: how many nodes node I sees up
up_count() { client "$1" status --json 2>/dev/null | grep -c '"state": "up"' || true; }

# launch I [--join EP]: starts node I in the background ($! is its pid)
launch() {
  local i=$1; shift
  # shellcheck disable=SC2046
  setsid "$bin" -n "$i" -w "$workers" --cluster local --listen "$(endpoint "$i")" $(keys "n$i") \
    "$@" "${extra[@]}" >>"$dir/n$i.log" 2>&1 </dev/null &
}

node_pid() { sed -n "${1}p" "$dir/pids"; }

cmd_kill() {
  local i=${1:-} sig=${2:-TERM} pid
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$n" ] || die "kill: no node '$i' (1..$n)"
  pid=$(node_pid "$i")
  kill -0 "$pid" 2>/dev/null || die "kill: node $i is not running"
  kill -"$sig" "$pid" || die "kill: cannot send $sig to node $i"
  case $sig in
    TERM|INT|KILL|9|15|2)
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
      echo "local-cluster: node $i still runs 10 s after $sig" >&2; return 1 ;;
  esac
}

cmd_start() {
  local i=${1:-} pid seed
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$n" ] || die "start: no node '$i' (1..$n)"
  pid=$(node_pid "$i")
  kill -0 "$pid" 2>/dev/null && die "start: node $i is running (pid $pid)"
  seed=1
  [ "$i" = 1 ] && seed=2
  local join=()
  [ "$n" -gt 1 ] && join=(--join "$(endpoint "$seed")")
  local mark; mark=$(wc -l <"$dir/n$i.log")
  launch "$i" "${join[@]}"
  pid=$!
  sed -i "${i}s/.*/$pid/" "$dir/pids"
  for _ in $(seq $((wait_s * 10))); do
    tail -n +"$((mark + 1))" "$dir/n$i.log" | grep -q "up: " && { echo "local-cluster: node $i up again (pid $pid)"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "local-cluster: node $i did not come up; its log ($dir/n$i.log) ends with:" >&2
  tail -5 "$dir/n$i.log" >&2
  return 1
}

# all_up: every running node sees all n up
all_up() {
  local i
  for i in $(seq "$n"); do [ "$(up_count "$i")" -eq "$n" ] || return 1; done
}

# upgrade [--new-bin PATH] [--timeout MS]: drain, stop and start each node
# in turn; movable processes live through it with their state
# (tests/deploy_local.sh). Stops at the first node that does not drain or
# come back.
cmd_upgrade() {
  local ms=10000 new="" i pid rc
  while [ $# -gt 0 ]; do
    case $1 in
      --new-bin) new=${2:?--new-bin needs a path}; shift 2 ;;
      --timeout) ms=${2:?--timeout needs milliseconds}; shift 2 ;;
      *) die "upgrade: unexpected argument '$1'" ;;
    esac
  done
  [[ $ms =~ ^[0-9]+$ ]] || die "upgrade: --timeout must be milliseconds, got '$ms'"
  if [ -n "$new" ]; then
    [ -x "$new" ] || die "upgrade: --new-bin $new: not an executable"
    bin=$(cd "$(dirname "$new")" && pwd)/$(basename "$new")
    sed -i "s|^bin=.*|bin=$(printf '%q' "$bin")|" "$dir/cluster.env"
  fi
  for i in $(seq "$n"); do
    pid=$(node_pid "$i")
    echo "local-cluster: node $i: draining"
    rc=0
    # shellcheck disable=SC2046
    timeout $((ms / 1000 + 60)) "$bin" drain --timeout "$ms" --then-stop --connect "$(endpoint "$i")" $(keys client) || rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 5 ] || { echo "local-cluster: node $i did not drain (exit $rc)" >&2; return 1; }
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "local-cluster: node $i still runs 15 s after its drain" >&2; return 1; }
    cmd_start "$i" || return 1
    for _ in $(seq $((wait_s * 5))); do all_up && break; sleep 0.2; done
    all_up || { echo "local-cluster: the nodes do not all see each other up after node $i came back" >&2; return 1; }
  done
  echo "local-cluster: upgraded $n nodes, one at a time"
}

stop_nodes() {
  local pids=() p
  [ -f "$dir/pids" ] && mapfile -t pids <"$dir/pids"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 100); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  echo "local-cluster: killed nodes that did not stop within 10 s" >&2
}

cmd_up() {
  local n="" workers=2 extra=()
  while [ $# -gt 0 ]; do
    case $1 in
      -w|--workers) workers=${2:?-w needs a number}; shift 2 ;;
      --wait) wait_s=${2:?--wait needs seconds}; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      -h|--help) usage; exit 0 ;;
      *) [ -z "$n" ] || die "up: unexpected argument '$1'"; n=$1; shift ;;
    esac
  done
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "up: N must be 1..64, got '${n}'"
  [[ $workers =~ ^[0-9]+$ ]] && [ "$workers" -ge 1 ] || die "up: -w must be a positive number, got '$workers'"
  [[ $wait_s =~ ^[0-9]+$ ]] || die "up: --wait must be whole seconds, got '$wait_s'"
  if [ -f "$dir/pids" ]; then
    local p
    while read -r p; do
      kill -0 "$p" 2>/dev/null && die "a cluster is running from $dir already (stop it with: $(basename "$0") --dir $dir down)"
    done <"$dir/pids"
  fi
  find_bin
  rm -rf "$dir"
  mkdir -p "$dir/keys/authorized"
  chmod 700 "$dir"
  : >"$dir/ports"
  local i
  for i in $(seq "$n"); do free_port >>"$dir/ports"; done
  cat >"$dir/cluster.env" <<EOF
n=$n
workers=$workers
bin=$(printf '%q' "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")")
extra=(${extra[*]+$(printf '%q ' "${extra[@]}")})
EOF
  # keys: one per node, naming its endpoint (how the others find its public
  # key) and its id (the members admit that key as that node only), one for
  # the client commands; all public halves are authorized
  for i in $(seq "$n"); do
    "$bin" keygen "$dir/keys" --name "n$i" --endpoint "$(endpoint "$i")" --node-id "$i" >/dev/null
  done
  "$bin" keygen "$dir/keys" --name client >/dev/null
  cp "$dir"/keys/*.cert "$dir/keys/authorized/"

  # from here on, an interrupted or failed start stops what it started
  trap 'echo "local-cluster: interrupted, stopping the nodes" >&2; stop_nodes; exit 130' INT TERM
  : >"$dir/pids"
  for i in $(seq "$n"); do
    local join=()
    [ "$i" -gt 1 ] && join=(--join "$(endpoint 1)")
    launch "$i" "${join[@]}"
    echo $! >>"$dir/pids"
    if [ "$i" -eq 1 ]; then # the others join through it: wait until it listens
      for _ in $(seq $((wait_s * 10))); do grep -qs "up: " "$dir/n1.log" && break; kill -0 $! 2>/dev/null || break; sleep 0.1; done
    fi
  done
  local deadline=$((SECONDS + wait_s)) all
  while :; do
    all=1
    for i in $(seq "$n"); do
      local pid; pid=$(sed -n "${i}p" "$dir/pids")
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "local-cluster: node $i exited; its log ($dir/n$i.log) ends with:" >&2
        tail -5 "$dir/n$i.log" >&2
        stop_nodes; exit 1
      fi
      [ "$(up_count "$i")" -eq "$n" ] || all=0
    done
    [ $all = 1 ] && break
    if [ $SECONDS -ge $deadline ]; then
      echo "local-cluster: the nodes did not all see each other up within ${wait_s} s; logs in $dir" >&2
      stop_nodes; exit 1
    fi
    sleep 0.2
  done
  trap - INT TERM
  echo "local-cluster: $n nodes up (secure, cluster 'local'):"
  for i in $(seq "$n"); do echo "  node $i  $(endpoint "$i")  log $dir/n$i.log"; done
  echo "  keys in $dir/keys; client key: $dir/keys/client.cert"
  echo "  e.g. $0 --dir $dir status"
}

cmd_down() {
  [ -d "$dir" ] || { echo "local-cluster: nothing in $dir"; return 0; }
  stop_nodes
  rm -rf "$dir"
  echo "local-cluster: stopped"
}

main() {
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
      --bin) bin=${2:?--bin needs a path}; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      -*) die "unknown option '$1' (see --help)" ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || { usage >&2; exit 2; }
  local cmd=$1; shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status)
      load_state
      local json=()
      [ "${1:-}" = --json ] && json=(--json)
      client 1 status "${json[@]}" ;;
    client)
      load_state
      local node=1
      if [ "${1:-}" = -n ]; then node=${2:?-n needs a node number}; shift 2; fi
      [[ $node =~ ^[0-9]+$ ]] && [ "$node" -ge 1 ] && [ "$node" -le "$n" ] || die "client: no node '$node' (1..$n)"
      [ $# -gt 0 ] || die "client: which command? (spawn, send, call, status, ps, kill, migrate, drain, undrain, whereis, names, service, types)"
      client "$node" "$@" ;;
    endpoint)
      load_state
      [[ ${1:-} =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$n" ] || die "endpoint: no node '${1:-}' (1..$n)"
      endpoint "$1" ;;
    logs) load_state; for i in $(seq "$n"); do echo "$dir/n$i.log"; done ;;
    kill) load_state; cmd_kill "$@" ;;
    start) load_state; cmd_start "$@" ;;
    upgrade) load_state; cmd_upgrade "$@" ;;
    *) die "unknown command '$cmd' (see --help)" ;;
  esac
}

main "$@"
