#!/usr/bin/env bash
# netns-cluster.sh - a schednode cluster in Linux network namespaces on this
# machine: one namespace per node, each joined to one private bridge by a veth
# pair, so that tests and fault experiments can cut links, isolate, delay and
# kill nodes as if they were separate hosts. Needs root. See --help.
set -euo pipefail

prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)

die() { local rc=$1; shift; echo "$prog: $*" >&2; exit "$rc"; }
say() { echo "$prog: $*"; }

usage() {
  cat <<EOF
usage: $prog SUBCOMMAND [ARGS] [--prefix P | --dir DIR]

A schednode cluster in network namespaces on this machine (needs root).
Node I lives in namespace P<I> (default prefix: sn), with address 10.R.0.I/24
on a bridge P"br"; the host is 10.R.0.254 on the same bridge. R is picked from
the prefix (a free /24), so clusters with different prefixes coexist. A prefix
is 1 to 11 of a-z and 0-9, starting and ending with a letter.

Subcommands (each takes --help):
  up N [--prefix P] [--bin PATH] [--no-nodes] [--dir DIR] [-- NODE FLAGS]
                      make the namespaces and start one node in each
  down                stop the nodes, delete namespaces, veths and bridge
  status [--json] [--from I]
                      the cluster table, as a node sees it
  addr I              node I's address (10.R.0.I)
  exec I CMD...       run CMD in node I's namespace
  kill I [SIG]        signal node I (default TERM; TERM/INT/KILL wait for it to end)
  start I             start node I again with the same config, joining the others
  cut I J | heal I J  drop / restore all traffic between nodes I and J
  isolate I | rejoin I
                      take node I's link down / up (a whole-node partition)
  delay I MS [JITTER] | loss I PCT | clear I
                      netem on node I's link, both directions (exit 3 if the
                      kernel has no netem)

State (addresses, pids, keys, configs, logs) lives in DIR, by default
/run/netns-cluster/P; later subcommands find it through --prefix or --dir.
Exit codes: 0 done, 1 failed, 2 usage or not root, 3 netem not available.
EOF
}

# --- names: all derived from the prefix, so `down` can find everything even
# without the state file. The prefix must end in a letter: then "sn12" can only
# be node 12 of prefix "sn", never node 2 of prefix "sn1".
ns() { echo "$prefix$1"; }         # node I's namespace
veth() { echo "${prefix}v$1"; }    # host end of node I's veth; the other end is eth0 inside
bridge() { echo "${prefix}br"; }
addr() { echo "$subnet.$1"; }
ep() { echo "tcp://$(addr "$1"):$port"; }
host_addr() { echo "$subnet.254"; }

prefix=sn dir='' dir_given=0
check_prefix() {
  [[ $prefix =~ ^[a-z]([a-z0-9]{0,9}[a-z])?$ ]] ||
    die 2 "bad prefix '$prefix': 1 to 11 of a-z0-9, starting and ending with a letter (interface names hold 15 characters)"
}
default_dir() { echo "/run/netns-cluster/$prefix"; }

# --- state: plain key=value lines, parsed (never sourced: DIR may be anywhere)
subnet='' n=0 port=7100 bin='' nodes=0 workers=2 extra=()
save_state() {
  printf '%s\n' "prefix=$prefix" "subnet=$subnet" "n=$n" "port=$port" "bin=$bin" "nodes=$nodes" \
    "workers=$workers" >"$dir/state"
  if [ ${#extra[@]} -gt 0 ]; then printf '%s\n' "${extra[@]}" >"$dir/extra"; else : >"$dir/extra"; fi
}
load_state() { # returns 1 if there is no state file
  [ -f "$dir/state" ] || return 1
  local k v
  while IFS='=' read -r k v; do
    case $k in
      prefix) prefix=$v ;; subnet) subnet=$v ;; n) n=$v ;; port) port=$v ;;
      bin) bin=$v ;; nodes) nodes=$v ;; workers) workers=$v ;;
    esac
  done <"$dir/state"
  check_prefix
  [[ $n =~ ^[0-9]+$ && $subnet =~ ^10\.[0-9]+\.0$ && $port =~ ^[0-9]+$ ]] || die 1 "$dir/state is damaged"
  extra=()
  [ ! -s "$dir/extra" ] || mapfile -t extra <"$dir/extra"
}
# Finds the state from --prefix or --dir; `down` passes "optional".
resolve() {
  if [ "$dir_given" = 1 ]; then
    load_state && return 0
  else
    check_prefix
    dir=$(default_dir)
    load_state && return 0
  fi
  [ "${1:-}" = optional ] && return 1
  die 1 "no cluster here: $dir/state is missing (start one with: $prog up N)"
}

client_args() { echo --cert "$dir/keys/client.cert" --authorized-keys "$dir/keys/authorized"; }

# A process is alive if it exists and is not a zombie (where PID 1 does not
# reap orphans, a node that exited stays a zombie and kill -0 still succeeds).
alive() {
  [ -n "${1:-}" ] && [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
node_pid() { cat "$dir/n$1.pid" 2>/dev/null || true; }

check_node() { # I: a node number of this cluster
  { [[ ${1:-} =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le "$n" ]; } || die 2 "bad node '${1:-}': 1..$n"
}
need_root() {
  [ "$(id -u)" = 0 ] || die 2 "needs root (network namespaces, a bridge and routes); run it with sudo"
  command -v ip >/dev/null || die 2 "needs ip (iproute2)"
}

# --- what Ctrl-C or a failure undoes: the running subcommand sets on_abort
# to a command, and clears it once it is done.
on_abort=()
aborting() {
  local rc=$?
  # the undoing is bounded (20 s at most for the nodes to stop); a second
  # Ctrl-C must not cut it short and leave half a cluster behind
  trap '' INT TERM
  trap - EXIT
  if [ ${#on_abort[@]} -gt 0 ]; then
    echo "$prog: interrupted or failed: undoing (${on_abort[*]})" >&2
    set +e
    "${on_abort[@]}"
  fi
  exit "$rc"
}
trap aborting EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- status queries. From the host over the bridge, or from inside node I's
# namespace (which still works when I is isolated).
query() { # I [ARGS]: node I's status, asked from the host
  local i=$1; shift
  # shellcheck disable=SC2046 # client_args is paths without spaces by construction
  timeout 20 "$bin" status "$@" --connect "$(ep "$i")" $(client_args) --timeout 5000
}
query_in() { # I [ARGS]: node I's status, asked inside its namespace
  local i=$1; shift
  # shellcheck disable=SC2046
  timeout 20 ip netns exec "$(ns "$i")" "$bin" status "$@" --connect "$(ep "$i")" $(client_args) --timeout 5000
}
up_in_view() { # I: how many nodes node I reports up
  query "$1" --json 2>/dev/null | jq '[.nodes[] | select(.state == "up")] | length'
}

# waits until every node in $@ reports every node in $@ up, for $wait seconds
wait_converged() {
  local deadline=$((SECONDS + wait)) i good want=$#
  while :; do
    good=0
    for i in "$@"; do
      [ "$(up_in_view "$i" || true)" = "$want" ] && good=$((good + 1))
    done
    [ "$good" = "$want" ] && return 0
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
}

# --- nodes
write_config() { # I: DIR/nI.cfg in cluster-config format; node 1 starts the cluster
  local i=$1
  {
    echo "# node $i of netns cluster '$prefix', written by $prog up (paths relative to this file)"
    echo "node"
    echo "    id = $i"
    echo "    name = \"n$i\""
    echo "    workers = $workers"
    echo "    listen = \"$(ep "$i")\""
    echo "cluster"
    echo "    name = \"$prefix\""
    [ "$i" = 1 ] || echo "    seed = \"$(ep 1)\""
    echo "security"
    echo "    cert = \"keys/n$i.cert\""
    echo "    authorized-keys = \"keys/authorized\""
  } >"$dir/n$i.cfg"
}

start_node() { # I [JOIN...]: starts node I in its namespace, detached from us
  local i=$1 args=() s
  shift
  for s in "$@"; do args+=(--join "$s"); done
  rm -f "$dir/n$i.pid"
  echo "--- $(date '+%F %T') $prog: starting node $i" >>"$dir/n$i.log"
  # setsid: the node outlives this script and ignores our terminal's Ctrl-C.
  # The inner sh writes its own pid and then becomes the node (exec), so the
  # pidfile names the node itself.
  # shellcheck disable=SC2016 # $$, $0 and $@ are the inner sh's
  setsid ip netns exec "$(ns "$i")" sh -c 'echo $$ >"$0"; exec "$@"' "$dir/n$i.pid" \
    "$bin" --config "$dir/n$i.cfg" "${args[@]}" "${extra[@]}" </dev/null >>"$dir/n$i.log" 2>&1 &
  local deadline=$((SECONDS + 10))
  until [ -s "$dir/n$i.pid" ]; do
    [ $SECONDS -lt $deadline ] || die 1 "node $i: no pidfile after 10 s"
    sleep 0.05
  done
}

wait_node_up() { # I: until its log says "up: " (bounded), or it died
  local i=$1 deadline=$((SECONDS + wait)) pid
  pid=$(node_pid "$i")
  while ! tail -n 20 "$dir/n$i.log" | grep -q "up: "; do
    if ! alive "$pid"; then
      echo "$prog: node $i exited; its log:" >&2; tail -n 20 "$dir/n$i.log" >&2; return 1
    fi
    [ $SECONDS -lt $deadline ] || { echo "$prog: node $i not up after $wait s" >&2; return 1; }
    sleep 0.1
  done
}

stop_pids() { # PID...: SIGTERM, up to 20 s to finish (a node lets its processes end and leaves), then SIGKILL
  local p left deadline=$((SECONDS + 20))
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  while :; do
    left=()
    for p in "$@"; do alive "$p" && left+=("$p"); done
    [ ${#left[@]} -gt 0 ] || return 0
    if [ $SECONDS -ge $deadline ]; then
      echo "$prog: still running after SIGTERM, killing: ${left[*]}" >&2
      kill -KILL "${left[@]}" 2>/dev/null || true
      sleep 0.2
      return 0
    fi
    sleep 0.1
  done
}

# --- teardown, shared by `down` and an interrupted `up`. Works from the
# names alone, so it also cleans up after a run that lost its state.
teardown() {
  local nsl=() name pids=() p
  while read -r name _; do
    [[ $name =~ ^${prefix}[0-9]+$ ]] && nsl+=("$name")
  done < <(ip netns list 2>/dev/null)
  # every process in our namespaces: our nodes, and whatever else was run there
  for name in "${nsl[@]}"; do
    while read -r p; do [ -n "$p" ] && pids+=("$p"); done < <(ip netns pids "$name" 2>/dev/null)
  done
  [ -z "$dir" ] || for p in "$dir"/n*.pid; do [ -f "$p" ] && alive "$(cat "$p")" && pids+=("$(cat "$p")"); done
  stop_pids "${pids[@]}"
  # the host end first: deleting it takes the pair away at once (a namespace
  # is released asynchronously, its veth with it)
  while read -r name; do
    ip link del "$name" 2>/dev/null || true
  done < <(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${prefix}v[0-9]*\)[@:].*/\1/p")
  for name in "${nsl[@]}"; do ip netns del "$name" 2>/dev/null || true; done
  ip link del "$(bridge)" 2>/dev/null || true
  [ -z "$dir" ] || rm -f "$dir"/n*.pid "$dir/state" "$dir/extra"
}

# 10.R.0.0/24 for this prefix: R from a hash of the prefix, moved on while
# some route or address of the host already lies in that /24. Called under
# the lock, so two `up`s at once do not take the same one.
pick_subnet() {
  local h r k
  h=$(printf '%s' "$prefix" | cksum | cut -d' ' -f1)
  for k in $(seq 0 149); do
    r=$((100 + (h + k) % 150))
    if [ -z "$(ip -4 route show table all root "10.$r.0.0/24" 2>/dev/null)" ]; then
      echo "10.$r.0"; return 0
    fi
  done
  return 1
}

# ============================================================== subcommands

help_up() {
  cat <<EOF
usage: $prog up N [--prefix P] [--dir DIR] [--bin PATH] [--no-nodes] [--port PORT]
                  [--workers W] [--wait SEC] [-- EXTRA SCHEDNODE FLAGS]

Makes bridge P"br", namespaces P1..PN (each with eth0 = 10.R.0.I/24 and lo up)
and gives the host 10.R.0.254 on the bridge. Unless --no-nodes: makes a
throwaway key set with \`schednode keygen\` (DIR/keys: one cert per node with its
endpoint and id, a client cert, authorized/), writes DIR/nI.cfg, starts node 1 (it
starts the cluster) and then the others (joining through node 1), and waits up
to SEC seconds (default 60) until every node reports all N up.
  --bin PATH    schednode binary (default: build/schednode, then PATH)
  --port PORT   every node listens on 10.R.0.I:PORT (default 7100)
  --workers W   worker threads per node (default 2)
Ctrl-C or a failure tears down everything up created.
EOF
}
cmd_up() {
  local no_nodes=0
  wait=60
  [ $# -gt 0 ] || { help_up >&2; exit 2; }
  case $1 in -h | --help) help_up; exit 0 ;; esac
  n=$1; shift
  { [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ]; } || die 2 "up: N must be 1..250, not '$n'"
  while [ $# -gt 0 ]; do
    case $1 in
      --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
      --dir) dir=${2:?--dir needs a value}; dir_given=1; shift 2 ;;
      --bin) bin=${2:?--bin needs a value}; shift 2 ;;
      --port) port=${2:?}; shift 2 ;;
      --workers) workers=${2:?}; shift 2 ;;
      --wait) wait=${2:?}; shift 2 ;;
      --no-nodes) no_nodes=1; shift ;;
      -h | --help) help_up; exit 0 ;;
      --) shift; extra=("$@"); break ;;
      *) die 2 "up: unknown argument '$1' (see $prog up --help)" ;;
    esac
  done
  check_prefix
  [[ $port =~ ^[0-9]+$ && $port -ge 1 && $port -le 65535 ]] || die 2 "up: bad port '$port'"
  [[ $workers =~ ^[0-9]+$ && $wait =~ ^[0-9]+$ ]] || die 2 "up: --workers and --wait take numbers"
  [ "$dir_given" = 1 ] || dir=$(default_dir)
  need_root
  if [ "$no_nodes" = 0 ]; then
    [ -n "$bin" ] || bin=$here/../build/schednode
    [ -x "$bin" ] || bin=$(command -v schednode) || die 2 "up: no schednode binary (build it, or give --bin PATH)"
    bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    command -v jq >/dev/null || die 2 "up: needs jq (to read status --json)"
    nodes=1
  fi

  mkdir -p "$dir" /run/netns-cluster
  dir=$(cd "$dir" && pwd)
  [ ! -f "$dir/state" ] || die 1 "up: $dir/state exists: cluster '$prefix' is up (run: $prog down --dir $dir)"
  exec 9>/run/netns-cluster/.lock
  flock -w 60 9 || die 1 "up: another up held the lock for 60 s"
  # refuse to take over what exists: it belongs to someone else (or to a
  # run that lost its state: `down --prefix P` clears that)
  ! ip link show "$(bridge)" >/dev/null 2>&1 || die 1 "up: bridge $(bridge) exists (clear it with: $prog down --prefix $prefix)"
  local i
  for i in $(seq "$n"); do
    [ ! -e "/run/netns/$(ns "$i")" ] || die 1 "up: namespace $(ns "$i") exists (clear it with: $prog down --prefix $prefix)"
  done
  subnet=$(pick_subnet) || die 1 "up: no free 10.R.0.0/24 for R in 100..249"

  # from here on, anything that stops us undoes all of it
  on_abort=(teardown)
  save_state
  ip link add "$(bridge)" type bridge
  ip addr add "$(host_addr)/24" dev "$(bridge)"
  ip link set "$(bridge)" up
  for i in $(seq "$n"); do
    ip netns add "$(ns "$i")"
    ip link add "$(veth "$i")" type veth peer name eth0 netns "$(ns "$i")"
    ip link set "$(veth "$i")" master "$(bridge)" up
    ip -n "$(ns "$i")" link set lo up
    ip -n "$(ns "$i")" addr add "$(addr "$i")/24" dev eth0
    ip -n "$(ns "$i")" link set eth0 up
  done
  exec 9>&- # unlocks; and the nodes started below must not inherit the lock

  if [ "$nodes" = 1 ]; then
    rm -rf "$dir/keys" "$dir"/n*.cfg "$dir"/n*.log
    # each node's key names its endpoint and id: the members admit it as that node only
    for i in $(seq "$n"); do "$bin" keygen "$dir/keys" --name "n$i" --endpoint "$(ep "$i")" --node-id "$i" >/dev/null; done
    "$bin" keygen "$dir/keys" --name client >/dev/null
    mkdir -p "$dir/keys/authorized"
    cp "$dir"/keys/*.cert "$dir/keys/authorized/"
    for i in $(seq "$n"); do write_config "$i"; done
    # node 1 first: the others join through it
    start_node 1
    wait_node_up 1
    for i in $(seq 2 "$n"); do start_node "$i"; done
    for i in $(seq 2 "$n"); do wait_node_up "$i"; done
    # shellcheck disable=SC2046
    wait_converged $(seq "$n") || {
      for i in $(seq "$n"); do echo "--- node $i sees:"; query "$i" 2>&1 || true; done >&2
      die 1 "up: the nodes did not all see $n up within $wait s (logs: $dir/n*.log)"
    }
  fi
  on_abort=()

  echo "cluster '$prefix': bridge $(bridge), subnet $subnet.0/24, host $(host_addr)"
  for i in $(seq "$n"); do
    if [ "$nodes" = 1 ]; then
      printf '  node %-3s namespace %-12s %-28s pid %-7s log %s\n' "$i" "$(ns "$i")" "$(ep "$i")" \
        "$(node_pid "$i")" "$dir/n$i.log"
    else
      printf '  node %-3s namespace %-12s %s\n' "$i" "$(ns "$i")" "$(addr "$i")"
    fi
  done
  if [ "$nodes" = 1 ]; then
    echo "keys: $dir/keys; client commands take: $(client_args)"
    echo "ready: $n nodes up (status: $prog status --dir $dir)"
  else
    echo "ready: $n namespaces, no nodes (state in $dir; down: $prog down --dir $dir)"
  fi
}

help_down() {
  cat <<EOF
usage: $prog down [--prefix P | --dir DIR]

Stops every process in the cluster's namespaces (SIGTERM, SIGKILL after 20 s),
deletes the namespaces, veths and bridge. Logs, keys and configs stay in DIR.
Idempotent: with nothing left it does nothing and exits 0.
EOF
}
cmd_down() {
  parse_common help_down "$@"
  [ ${#args[@]} -eq 0 ] || die 2 "down: no arguments besides --prefix/--dir"
  need_root
  if ! resolve optional; then
    [ "$dir_given" = 0 ] || { say "nothing in $dir; nothing to do"; return 0; }
    dir=
  fi
  teardown
  say "cluster '$prefix' is down${dir:+ (logs kept in $dir)}"
}

help_status() {
  cat <<EOF
usage: $prog status [--json] [--from I] [--prefix P | --dir DIR]

Prints \`schednode status\` (the cluster table, or JSON with --json). Without
--from it asks node 1, 2, ... from the host until one answers; with --from I
it asks node I from inside its namespace (works while I is isolated or cut).
EOF
}
cmd_status() {
  local from='' json=()
  parse_common help_status "$@"
  set -- "${args[@]}"
  while [ $# -gt 0 ]; do
    case $1 in
      --json) json=(--json); shift ;;
      --from) from=${2:?--from needs a node}; shift 2 ;;
      *) die 2 "status: unknown argument '$1'" ;;
    esac
  done
  need_root
  resolve
  [ "$nodes" = 1 ] || die 1 "status: cluster '$prefix' was made with --no-nodes"
  if [ -n "$from" ]; then
    check_node "$from"
    query_in "$from" "${json[@]}"
    return
  fi
  local i
  for i in $(seq "$n"); do
    query "$i" "${json[@]}" 2>/dev/null && return 0
  done
  die 1 "status: no node answered"
}

help_addr() { echo "usage: $prog addr I [--prefix P | --dir DIR]   prints node I's address (10.R.0.I)"; }
cmd_addr() {
  parse_common help_addr "$@"
  [ ${#args[@]} -eq 1 ] || { help_addr >&2; exit 2; }
  resolve
  check_node "${args[0]}"
  addr "${args[0]}"
}

help_exec() {
  cat <<EOF
usage: $prog exec I [--prefix P | --dir DIR] CMD [ARGS...]

Runs CMD in node I's namespace, with SN_BIN, SN_EP (node I's endpoint) and
SN_CLIENT (the client key flags) in its environment, e.g.
  $prog exec 2 sh -c '\$SN_BIN status --connect \$SN_EP \$SN_CLIENT'
EOF
}
cmd_exec() {
  local i=
  # our options and I come first; everything from CMD on is the command's
  while [ $# -gt 0 ]; do
    case $1 in
      --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
      --dir) dir=${2:?--dir needs a value}; dir_given=1; shift 2 ;;
      -h | --help) help_exec; exit 0 ;;
      --) shift; break ;;
      *) if [ -z "$i" ]; then i=$1; shift; else break; fi ;;
    esac
  done
  { [ -n "$i" ] && [ $# -gt 0 ]; } || { help_exec >&2; exit 2; }
  need_root
  resolve
  check_node "$i"
  exec ip netns exec "$(ns "$i")" env SN_BIN="$bin" SN_EP="$(ep "$i")" SN_CLIENT="$(client_args)" "$@"
}

help_kill() {
  cat <<EOF
usage: $prog kill I [SIG] [--prefix P | --dir DIR]

Sends SIG (default TERM) to node I. For TERM, INT and KILL it waits (up to 20 s)
until the node has exited. STOP and CONT freeze and thaw a node.
EOF
}
cmd_kill() {
  parse_common help_kill "$@"
  { [ ${#args[@]} -ge 1 ] && [ ${#args[@]} -le 2 ]; } || { help_kill >&2; exit 2; }
  local i=${args[0]} sig=${args[1]:-TERM} pid deadline
  sig=${sig#SIG}
  need_root
  resolve
  check_node "$i"
  pid=$(node_pid "$i")
  alive "$pid" || die 1 "kill: node $i is not running"
  kill -s "$sig" "$pid" || die 2 "kill: bad signal '$sig'"
  case $sig in
    TERM | INT | KILL | 15 | 2 | 9)
      deadline=$((SECONDS + 20))
      while alive "$pid"; do
        [ $SECONDS -lt $deadline ] || die 1 "kill: node $i (pid $pid) still running 20 s after SIG$sig"
        sleep 0.05
      done
      say "node $i (pid $pid) ended after SIG$sig" ;;
    *) say "sent SIG$sig to node $i (pid $pid)" ;;
  esac
}

help_start() {
  cat <<EOF
usage: $prog start I [--wait SEC] [--no-wait] [--prefix P | --dir DIR]

Starts node I again with its config and the flags \`up\` was given, joining
through the nodes that run (through none if none does: it then starts the
cluster). Waits up to SEC seconds (default 60) until node I reports itself
and every running node up.
EOF
}
cmd_start() {
  local nowait=0
  wait=60
  parse_common help_start "$@"
  set -- "${args[@]}"
  local i=${1:-}
  [ $# -ge 1 ] || { help_start >&2; exit 2; }
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --wait) wait=${2:?}; shift 2 ;;
      --no-wait) nowait=1; shift ;;
      *) die 2 "start: unknown argument '$1'" ;;
    esac
  done
  need_root
  resolve
  [ "$nodes" = 1 ] || die 1 "start: cluster '$prefix' was made with --no-nodes"
  check_node "$i"
  alive "$(node_pid "$i")" && die 1 "start: node $i is running (pid $(node_pid "$i"))"
  local j seeds=() running=("$i")
  for j in $(seq "$n"); do
    [ "$j" != "$i" ] && alive "$(node_pid "$j")" && { seeds+=("$(ep "$j")"); running+=("$j"); }
  done
  # nobody to join: list itself as the first seed, which starts a cluster
  [ ${#seeds[@]} -gt 0 ] || seeds=("$(ep "$i")")
  on_abort=(stop_started "$i")
  start_node "$i" "${seeds[@]}"
  wait_node_up "$i" || die 1 "start: node $i did not come up"
  if [ "$nowait" = 0 ]; then
    local deadline=$((SECONDS + wait))
    until [ "$(up_in_view "$i" || true)" = "${#running[@]}" ]; do
      [ $SECONDS -lt $deadline ] || die 1 "start: node $i does not see the ${#running[@]} running nodes up after $wait s"
      sleep 0.5
    done
  fi
  on_abort=()
  say "node $i is up (pid $(node_pid "$i"))"
}
stop_started() { stop_pids "$(node_pid "$1")"; }

# ip route blackhole: this machine may have neither iptables nor nft, and a
# route needs nothing extra. Each side drops what it sends to the other, so
# the link is cut both ways; the host still reaches both.
help_cut() {
  cat <<EOF
usage: $prog cut I J [--prefix P | --dir DIR]
       $prog heal I J [--prefix P | --dir DIR]

cut: drops all traffic between nodes I and J (a blackhole route to J in I's
namespace and to I in J's). heal: removes those routes. Both are idempotent;
the host still reaches every node.
EOF
}
pair_args() {
  [ ${#args[@]} -eq 2 ] || { help_cut >&2; exit 2; }
  need_root
  resolve
  check_node "${args[0]}"; check_node "${args[1]}"
  [ "${args[0]}" != "${args[1]}" ] || die 2 "cut/heal: I and J must differ"
}
blackhole() { ip -n "$(ns "$2")" route replace blackhole "$(addr "$3")/32"; }
unblackhole() { ip -n "$(ns "$1")" route del blackhole "$(addr "$2")/32" 2>/dev/null || true; }
heal_pair() { unblackhole "$1" "$2"; unblackhole "$2" "$1"; }
cmd_cut() {
  parse_common help_cut "$@"
  pair_args
  local i=${args[0]} j=${args[1]}
  on_abort=(heal_pair "$i" "$j")
  blackhole to "$i" "$j"
  blackhole to "$j" "$i"
  on_abort=()
  say "cut: nodes $i and $j no longer reach each other"
}
cmd_heal() {
  parse_common help_cut "$@"
  pair_args
  heal_pair "${args[0]}" "${args[1]}"
  say "healed: nodes ${args[0]} and ${args[1]} reach each other"
}

help_isolate() {
  cat <<EOF
usage: $prog isolate I [--prefix P | --dir DIR]
       $prog rejoin I [--prefix P | --dir DIR]

isolate: takes the host end of node I's veth down, so node I reaches nobody
(not even the host: ask it with \`status --from I\`). rejoin: brings it up.
EOF
}
link_cmd() { # up|down
  parse_common help_isolate "${@:2}"
  [ ${#args[@]} -eq 1 ] || { help_isolate >&2; exit 2; }
  need_root
  resolve
  check_node "${args[0]}"
  ip link set "$(veth "${args[0]}")" "$1"
}
cmd_isolate() { link_cmd down "$@"; say "node ${args[0]} is isolated"; }
cmd_rejoin() { link_cmd up "$@"; say "node ${args[0]}'s link is up again"; }

help_netem() {
  cat <<EOF
usage: $prog delay I MS [JITTER] [--prefix P | --dir DIR]
       $prog loss I PCT [--prefix P | --dir DIR]
       $prog clear I [--prefix P | --dir DIR]

tc netem on node I's link, in both directions (eth0 in the namespace and the
host end): delay adds MS (+- JITTER) milliseconds each way, loss drops PCT
percent each way, clear removes it. Exit 3 when the kernel has no netem
(sch_netem); nothing is changed then.
EOF
}
netem() { # I NETEM-ARGS...: replace the root qdisc of both ends of node I's link
  local i=$1 err
  shift
  if ! err=$(tc -n "$(ns "$i")" qdisc replace dev eth0 root netem "$@" 2>&1); then
    case $err in
      *"qdisc kind is unknown"* | *"No such file or directory"* | *"Unknown qdisc"*)
        die 3 "netem is not available in this kernel: tc said: $(echo "$err" | head -1) (the sch_netem module is missing; try: modprobe sch_netem)" ;;
    esac
    die 1 "tc: $err"
  fi
  tc qdisc replace dev "$(veth "$i")" root netem "$@"
}
netem_args() { # WANT: the number of positional arguments
  parse_common help_netem "${@:2}"
  { [ ${#args[@]} -ge 1 ] && [ ${#args[@]} -le "$1" ]; } || { help_netem >&2; exit 2; }
  need_root
  command -v tc >/dev/null || die 3 "netem is not available: no tc (iproute2)"
  resolve
  check_node "${args[0]}"
}
num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die 2 "'$1' is not a number"; }
cmd_delay() {
  netem_args 3 "$@"
  [ ${#args[@]} -ge 2 ] || { help_netem >&2; exit 2; }
  num "${args[1]}"
  local a=(delay "${args[1]}ms")
  [ ${#args[@]} -lt 3 ] || { num "${args[2]}"; a+=("${args[2]}ms"); }
  netem "${args[0]}" "${a[@]}"
  say "node ${args[0]}: delay ${args[1]} ms${args[2]:+ +- ${args[2]} ms} each way"
}
cmd_loss() {
  netem_args 2 "$@"
  [ ${#args[@]} -eq 2 ] || { help_netem >&2; exit 2; }
  num "${args[1]}"
  netem "${args[0]}" loss "${args[1]}%"
  say "node ${args[0]}: loss ${args[1]}% each way"
}
cmd_clear() {
  netem_args 1 "$@"
  tc -n "$(ns "${args[0]}")" qdisc del dev eth0 root 2>/dev/null || true
  tc qdisc del dev "$(veth "${args[0]}")" root 2>/dev/null || true
  say "node ${args[0]}: no netem"
}

# parse_common HELPFN ARGS...: takes --prefix/--dir/--help out, the rest in args
args=()
parse_common() {
  local helpfn=$1
  shift
  args=()
  while [ $# -gt 0 ]; do
    case $1 in
      --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
      --dir) dir=${2:?--dir needs a value}; dir_given=1; shift 2 ;;
      -h | --help) "$helpfn"; exit 0 ;;
      *) args+=("$1"); shift ;;
    esac
  done
}

wait=60
[ $# -gt 0 ] || { usage >&2; exit 2; }
sub=$1
shift
case $sub in
  -h | --help | help) usage ;;
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  addr) cmd_addr "$@" ;;
  exec) cmd_exec "$@" ;;
  kill) cmd_kill "$@" ;;
  start) cmd_start "$@" ;;
  cut) cmd_cut "$@" ;;
  heal) cmd_heal "$@" ;;
  isolate) cmd_isolate "$@" ;;
  rejoin) cmd_rejoin "$@" ;;
  delay) cmd_delay "$@" ;;
  loss) cmd_loss "$@" ;;
  clear) cmd_clear "$@" ;;
  *) usage >&2; die 2 "unknown subcommand '$sub'" ;;
esac
