#!/usr/bin/env bash
# ssh-cluster.sh - deploys a schednode cluster to real hosts: makes every
# node's config (cluster-config format) and CurveZMQ keys in a local staging
# directory, copies binary, plugins, configs and keys over ssh/scp and runs
# each node as a systemd unit (deploy/schednode@.service). Hosts get the
# runtime libraries schednode needs with apt-get (Debian 12 package names;
# --packages, --no-deps). For tests without
# hosts, --transport netns and --service plain run the same steps against
# namespaces made by netns-cluster.sh. See --help.
set -euo pipefail

prog=${0##*/}
here=$(cd "$(dirname "$0")" && pwd)

die() { local rc=$1; shift; echo "$prog: $*" >&2; exit "$rc"; }
say() { echo "$prog: $*"; }

usage() {
  cat <<EOF
usage: $prog SUBCOMMAND HOSTS [OPTIONS]

Deploys and runs a schednode cluster described by HOSTS (format:
cluster-config/hosts.example): one node per line, ssh + systemd by default.

Subcommands (each takes --help):
  deploy    make configs and keys, install binary, plugins, configs, keys and
            the systemd unit on every host, start seeds first, then the rest,
            and wait until every node sees all nodes up
  start     start every node (seeds first) and wait until all are up
  stop      stop every node (seeds last)
  restart   restart node by node, waiting for each to be back up
  upgrade   copy a new binary and plugins to every host, then restart node by
            node, waiting for each to be back up
  status    the cluster table, from the first node that answers

Options:
  --bin PATH         schednode to install (deploy, upgrade; default:
                     build/schednode, then PATH)
  --plugin FILE.so   a plugin to install and load (repeatable; deploy, upgrade)
  --packages "P..."  the runtime packages every host needs, installed with
                     apt-get where missing (deploy, upgrade; default: $runtime_pkgs)
  --no-deps          install no packages (hosts provisioned otherwise)
  --cluster NAME     cluster name (overrides the hosts file's 'cluster' line)
  --root DIR         install directory on the hosts (default /opt/schednode)
  --staging DIR      local directory for configs and keys (default HOSTS.d;
                     it holds the cluster's secret keys: keep it)
  --user NAME        the user the systemd units run as (default schednode;
                     created on the host if missing)
  --sudo             run remote commands as root through \`sudo -n\`
  --ssh-opt OPT      an extra ssh/scp option, as for -o (repeatable), e.g.
                     --ssh-opt IdentityFile=~/.ssh/deploy
  --wait SEC         how long to wait for a node to come up (default 60)
  --dry-run          print every command, one per line, shell-quoted and
                     prefixed with '+ ', and run none
  --transport ssh|netns
                     netns: HOST names a network namespace on this machine
                     (netns-cluster.sh up --no-nodes); commands run with
                     \`ip netns exec HOST sh -c ...\`, files are copied with cp,
                     and each host gets its own install directory ROOT/HOST
                     (namespaces share one filesystem). Needs root.
  --chroot DIR       netns only: the hosts' commands run in the root file
                     system DIR (chroot), e.g. a bare Debian without the
                     runtime libraries; ROOT is inside it
  --service systemd|plain
                     plain: no systemd; a node runs under setsid/nohup with a
                     pidfile ROOT/run/nID.pid and a log ROOT/log/nID.log, and
                     stops with SIGTERM (SIGKILL after 20 s)

Exit codes: 0 done; 1 a step failed (a remote command, a node not up in
time); 2 usage, a bad hosts file (with its line number), a missing binary
or file, an unreachable host.
EOF
}

# ------------------------------------------------------------- quoting, run

# POSIX shell quoting (not bash's printf %q, whose $'...' a remote sh may not
# read): words that need nothing stay bare, the rest go in single quotes.
q() {
  local a out=''
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
      out+=" $a"
    else
      out+=" '${a//\'/\'\\\'\'}'"
    fi
  done
  printf '%s' "${out# }"
}

dry=0
drain_ms=${SCHEDNODE_DRAIN_MS:-10000} # restart, upgrade: each node's drain (drain_node)
# run [-q] CMD...: the one place commands run, so --dry-run can show them
# all; -q: without the command's output
run() {
  local quiet=0
  [ "$1" != -q ] || { quiet=1; shift; }
  if [ "$dry" = 1 ]; then echo "+ $(q "$@")"; return 0; fi
  if [ "$quiet" = 1 ]; then "$@" >/dev/null; else "$@"; fi
}
# write_file PATH LINE...: a local file, shown in a dry run as the printf
# that would write it (the dry-run output stays a runnable script)
write_file() {
  local path=$1
  shift
  # shellcheck disable=SC2028 # the \n is meant literally: it is printf's
  if [ "$dry" = 1 ]; then echo "+ printf '%s\n' $(q "$@") > $(q "$path")"; return 0; fi
  printf '%s\n' "$@" >"$path"
}

# ------------------------------------------------------------- the hosts file

hosts_file='' cluster='' cluster_flag=''
nid=() nhost=() nlisten=() nadv=() nline=() nhix=() # one entry per node
hname=() huser=() hport=() hline=()                  # one entry per host
seeds=() seeds_line=0 sets=()

bad_line() { die 2 "$hosts_file:$1: $2"; }

# node/... and cluster/... keys a hosts file may set for every node; the rest
# (id, name, listen, seed, cert, ...) this script writes itself
settable='node/workers node/log-level node/shutdown-timeout-ms cluster/heartbeat-ms cluster/down-after-ms cluster/join-timeout-ms cluster/steal cluster/steal-batch cluster/max-frame cluster/max-message cluster/max-backlog cluster/backlog-full cluster/forget-after-ms'

read_hosts() {
  { [ -f "$hosts_file" ] && [ -r "$hosts_file" ]; } || die 2 "no hosts file '$hosts_file' (format: cluster-config/hosts.example)"
  local line ln=0 f i h ep lhost lport user sport
  declare -A seen_id=() seen_ep=() hix=()
  while IFS= read -r line || [ -n "$line" ]; do
    ln=$((ln + 1))
    line=${line%%#*}
    read -ra f <<<"$line"
    [ ${#f[@]} -gt 0 ] || continue
    case ${f[0]} in
      cluster)
        [ ${#f[@]} -eq 2 ] || bad_line "$ln" "'cluster' takes one name"
        [[ ${f[1]} =~ ^[A-Za-z0-9._-]{1,63}$ ]] || bad_line "$ln" "bad cluster name '${f[1]}' (letters, digits, . _ -)"
        [ -z "$cluster" ] || bad_line "$ln" "a second 'cluster' line"
        cluster=${f[1]} ;;
      seeds)
        [ ${#f[@]} -ge 2 ] || bad_line "$ln" "'seeds' takes one or more node ids"
        [ ${#seeds[@]} -eq 0 ] || bad_line "$ln" "a second 'seeds' line"
        seeds=("${f[@]:1}")
        seeds_line=$ln ;;
      set)
        [ ${#f[@]} -eq 3 ] || bad_line "$ln" "'set' takes SECTION/KEY VALUE"
        [[ " $settable " == *" ${f[1]} "* ]] || bad_line "$ln" "set: '${f[1]}' is not one of: $settable"
        [[ ${f[2]} =~ ^[A-Za-z0-9._-]+$ ]] || bad_line "$ln" "set: bad value '${f[2]}'"
        sets+=("${f[1]}" "${f[2]}") ;;
      [0-9]*)
        { [ ${#f[@]} -ge 3 ] && [ ${#f[@]} -le 5 ]; } ||
          bad_line "$ln" "a node line is: ID HOST LISTEN [USER] [SSH-PORT] (${#f[@]} fields here)"
        i=${f[0]} h=${f[1]} ep=${f[2]} user=${f[3]:--} sport=${f[4]:-22}
        { [[ $i =~ ^[1-9][0-9]{0,9}$ ]] && [ "$i" -le 4294967295 ]; } || bad_line "$ln" "bad node id '$i' (1..4294967295)"
        [ -z "${seen_id[$i]:-}" ] || bad_line "$ln" "node id $i is already on line ${seen_id[$i]}"
        [[ $h =~ ^[A-Za-z0-9._-]+$ ]] || bad_line "$ln" "bad host '$h'"
        [[ $ep =~ ^tcp://([^:/]+):([0-9]+)$ ]] || bad_line "$ln" "bad listen endpoint '$ep' (tcp://HOST:PORT)"
        lhost=${BASH_REMATCH[1]} lport=${BASH_REMATCH[2]}
        { [ "$lport" -ge 1 ] && [ "$lport" -le 65535 ]; } || bad_line "$ln" "bad port in '$ep'"
        [[ $user =~ ^[a-z_][a-z0-9_.-]*$ || $user == - ]] || bad_line "$ln" "bad user '$user'"
        { [[ $sport =~ ^[0-9]+$ ]] && [ "$sport" -ge 1 ] && [ "$sport" -le 65535 ]; } || bad_line "$ln" "bad ssh port '$sport'"
        # a wildcard listen needs an address the others can dial: the host's
        case $lhost in '*' | 0.0.0.0) nadv+=("tcp://$h:$lport") ;; *) nadv+=("$ep") ;; esac
        [ -z "${seen_ep[${nadv[-1]}]:-}" ] || bad_line "$ln" "endpoint ${nadv[-1]} is already on line ${seen_ep[${nadv[-1]}]}"
        seen_id[$i]=$ln
        seen_ep[${nadv[-1]}]=$ln
        if [ -z "${hix[$h]:-}" ]; then
          hix[$h]=${#hname[@]}
          hname+=("$h") huser+=("$user") hport+=("$sport") hline+=("$ln")
        elif [ "${huser[${hix[$h]}]}" != "$user" ] || [ "${hport[${hix[$h]}]}" != "$sport" ]; then
          bad_line "$ln" "host $h has user/port ${huser[${hix[$h]}]}/${hport[${hix[$h]}]} on line ${hline[${hix[$h]}]}, $user/$sport here"
        fi
        nid+=("$i") nhost+=("$h") nlisten+=("$ep") nline+=("$ln") nhix+=("${hix[$h]}") ;;
      *) bad_line "$ln" "'${f[0]}' is neither a node line (ID HOST LISTEN [USER] [SSH-PORT]) nor cluster, seeds or set" ;;
    esac
  done <"$hosts_file"
  [ ${#nid[@]} -gt 0 ] || die 2 "$hosts_file: no node lines (ID HOST LISTEN [USER] [SSH-PORT])"
  [ -z "$cluster_flag" ] || cluster=$cluster_flag
  [ -n "$cluster" ] || cluster=schednode
  # seeds: the nodes every node joins through; the first one listed starts
  # the cluster. Default: the first three nodes, so that any one of them can
  # restart and find another to join through.
  if [ ${#seeds[@]} -eq 0 ]; then
    seeds=("${nid[@]:0:3}")
  else
    declare -A sseen=()
    for i in "${seeds[@]}"; do
      [ -n "${seen_id[$i]:-}" ] || bad_line "$seeds_line" "seed $i is not a node of this file"
      [ -z "${sseen[$i]:-}" ] || bad_line "$seeds_line" "seed $i listed twice"
      sseen[$i]=1
    done
    [ ${#seeds[@]} -gt 1 ] || [ ${#nid[@]} -eq 1 ] ||
      echo "$prog: warning: $hosts_file:$seeds_line: one seed: if it restarts while the others run, it starts a second cluster" >&2
  fi
}

# k of node id I
node_k() { local k; for k in "${!nid[@]}"; do [ "${nid[$k]}" = "$1" ] && { echo "$k"; return; }; done; return 1; }
is_seed() { local s; for s in "${seeds[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

# start order: the seeds as listed, then the others as in the file; stop
# order is the reverse; a rolling restart takes the non-seeds first and the
# first seed last, so that there is always a seed to rejoin through
start_order() {
  local k s
  for s in "${seeds[@]}"; do node_k "$s"; done
  for k in "${!nid[@]}"; do is_seed "${nid[$k]}" || echo "$k"; done
}
stop_order() { start_order | tac; }
rolling_order() {
  local k
  for k in "${!nid[@]}"; do is_seed "${nid[$k]}" || echo "$k"; done
  for ((k = ${#seeds[@]} - 1; k >= 0; k--)); do node_k "${seeds[$k]}"; done
}

# ------------------------------------------------------------- transports

transport=ssh service=systemd root=/opt/schednode staging='' svc_user=schednode sudo=0 wait=60 bin='' chroot=''
plugins=()
# what schednode links (besides libc) on Debian 12: czmq, libzmq, libsodium,
# protobuf-c. Plugins link nothing (they use the program's API).
runtime_pkgs='libczmq4 libzmq5 libsodium23 libprotobuf-c1 libjson-c5 libmicrohttpd12' deps=1

# the install directory on host h: namespaces share this machine's
# filesystem, so each gets its own
host_root() { if [ "$transport" = netns ]; then echo "$root/${hname[$1]}"; else echo "$root"; fi; }
# where files land before they are installed: the ssh user's home, where scp
# can write without root
host_stage() { if [ "$transport" = netns ]; then echo "$(host_root "$1")/.stage"; else echo .schednode-stage; fi; }
target() { if [ "${huser[$1]}" = - ]; then echo "${hname[$1]}"; else echo "${huser[$1]}@${hname[$1]}"; fi; }
# ssh and scp never prompt (BatchMode), give up on a host that does not
# answer in 10 s, and notice a connection that died within 30 s
sshopt=(-o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=10 -o ServerAliveCountMax=3)

# remote_argv H SCRIPT: the command that runs SCRIPT (sh) on host h
remote_argv() {
  local h=$1 script=$2
  [ "$sudo" = 0 ] || script="sudo -n sh -c $(q "$script")"
  if [ "$transport" = netns ]; then
    argv=(ip netns exec "${hname[$h]}" ${chroot:+chroot "$chroot"} sh -c "$script")
  else
    argv=(ssh "${sshopt[@]}" -p "${hport[$h]}" "$(target "$h")" "$script")
  fi
}
# remote H SCRIPT: runs it; a failure stops everything, naming the host
remote() {
  local argv=()
  remote_argv "$1" "$2"
  run "${argv[@]}" || die 1 "${hname[$1]} ($hosts_file:${hline[$1]}): failed: $2"
}
# remote_try H SCRIPT: runs it quietly, returns its status (a dry run only shows it)
remote_try() {
  local argv=()
  remote_argv "$1" "$2"
  if [ "$dry" = 1 ]; then run "${argv[@]}"; return 0; fi
  "${argv[@]}" 2>/dev/null
}
# copy H DIR FILE...: files to DIR on host h
copy() {
  local h=$1 d=$2
  shift 2
  if [ "$transport" = netns ]; then
    run cp "$@" "$chroot$d/" || die 1 "copy to ${hname[$h]} failed"
  else
    run scp "${sshopt[@]}" -P "${hport[$h]}" "$@" "$(target "$h"):$d/" ||
      die 1 "${hname[$h]} ($hosts_file:${hline[$h]}): scp failed"
  fi
}

# every host answers, before anything changes anywhere
preflight() {
  local h argv=() err
  for h in "${!hname[@]}"; do
    if [ "$transport" = netns ]; then argv=(ip netns exec "${hname[$h]}" ${chroot:+chroot "$chroot"} true); else
      argv=(ssh "${sshopt[@]}" -p "${hport[$h]}" "$(target "$h")" true)
    fi
    if [ "$dry" = 1 ]; then run "${argv[@]}"; continue; fi
    err=$("${argv[@]}" 2>&1) ||
      die 2 "$hosts_file:${hline[$h]}: host ${hname[$h]} is unreachable ($transport): $(echo "$err" | tail -1)"
  done
}

# ------------------------------------------------------------- nodes

# what systemd calls node k: schednode@nID.service
unit() { echo "schednode@n${nid[$1]}.service"; }

# a shell function for the remote side: is pid $1 a live schednode? (not a
# zombie: where PID 1 does not reap orphans, a dead node stays one)
# shellcheck disable=SC2016 # expanded on the remote side
alive_fn='alive() { [ -r "/proc/$1/status" ] && ! grep -q "^State:[[:space:]]*Z" "/proc/$1/status" && grep -qa schednode "/proc/$1/cmdline"; }'

start_node() { # k
  local k=$1 h=${nhix[$1]} r i=n${nid[$1]}
  r=$(host_root "$h")
  if [ "$service" = systemd ]; then
    remote "$h" "systemctl enable $(unit "$k") && systemctl start $(unit "$k")"
  else
    # setsid + nohup: the node outlives the remote shell and its session;
    # every descriptor goes elsewhere, so ssh does not wait for it
    remote "$h" "cd $(q "$r") || exit 1; $alive_fn; p=\$(cat run/$i.pid 2>/dev/null); if [ -n \"\$p\" ] && alive \"\$p\"; then echo \"$i already runs (pid \$p)\"; exit 0; fi; setsid nohup bin/schednode --config etc/$i.cfg </dev/null >>log/$i.log 2>&1 & echo \$! >run/$i.pid"
  fi
}
stop_node() { # k
  local k=$1 h=${nhix[$1]} r i=n${nid[$1]}
  r=$(host_root "$h")
  if [ "$service" = systemd ]; then
    remote "$h" "systemctl stop $(unit "$k")"
  else
    remote "$h" "cd $(q "$r") || exit 1; $alive_fn; p=\$(cat run/$i.pid 2>/dev/null) || exit 0; if alive \"\$p\"; then kill -TERM \"\$p\"; n=0; while alive \"\$p\" && [ \$n -lt 200 ]; do sleep 0.1; n=\$((n + 1)); done; if alive \"\$p\"; then echo \"$i still runs 20 s after SIGTERM: SIGKILL\" >&2; kill -KILL \"\$p\"; fi; fi; rm -f run/$i.pid"
  fi
}
restart_node() { # k
  if [ "$service" = systemd ]; then remote "${nhix[$1]}" "systemctl restart $(unit "$1")"; else
    stop_node "$1"
    start_node "$1"
  fi
}
node_log() { # k: the last lines of its log, for an error message
  local h=${nhix[$1]}
  if [ "$service" = systemd ]; then
    remote_try "$h" "journalctl -u $(unit "$1") -n 20 --no-pager" || true
  else
    remote_try "$h" "tail -n 20 $(q "$(host_root "$h")/log/n${nid[$1]}.log")" || true
  fi
}

# the status client, run on node k's host against node k, with the client key
status_script() { # k [--json]
  local r
  r=$(host_root "${nhix[$1]}")
  echo "$(q "$r/bin/schednode") status ${2:+$2 }--connect $(q "${nadv[$1]}") --cert $(q "$r/keys/client.cert") --authorized-keys $(q "$r/keys/authorized") --timeout 5000"
}
# drain_node K: node k moves its processes to the others (what cannot move
# gets $drain_ms ms to end, then its restart CANCELs it); its report is said
drain_node() { # k
  local r out
  r=$(host_root "${nhix[$1]}")
  out=$(remote_try "${nhix[$1]}" "$(q "$r/bin/schednode") drain --timeout $drain_ms --connect $(q "${nadv[$1]}") --cert $(q "$r/keys/client.cert") --authorized-keys $(q "$r/keys/authorized")") ||
    [ $? -eq 5 ] || { echo "$prog: node ${nid[$1]} did not drain: $out" >&2; return 0; }
  [ -z "$out" ] || say "$(head -1 <<<"$out")"
}
# up_count K: how many nodes node k reports up (from the table: STATE is the third column)
up_count() {
  remote_try "${nhix[$1]}" "$(status_script "$1")" | awk '$3 == "up"' | wc -l
}
# wait_up K WANT: until node k reports WANT nodes up, at most $wait seconds
wait_up() {
  local k=$1 want=$2 deadline=$((SECONDS + wait))
  if [ "$dry" = 1 ]; then remote_try "${nhix[$k]}" "$(status_script "$k")"; return 0; fi
  until [ "$(up_count "$k")" -ge "$want" ]; do
    if [ $SECONDS -ge $deadline ]; then
      echo "$prog: node ${nid[$k]} on ${nhost[$k]} does not report $want nodes up after $wait s; its log:" >&2
      node_log "$k" >&2
      die 1 "node ${nid[$k]} ($hosts_file:${nline[$k]}) is not up"
    fi
    sleep 1
  done
}

# seeds first: the first seed alone (it starts the cluster when no other seed
# answers within 2 s), then the other seeds, then everybody else; then every
# node must see all of them up
start_all() {
  local k first=1 all=${#nid[@]}
  while read -r k; do
    start_node "$k"
    if [ "$first" = 1 ]; then wait_up "$k" 1; first=0; fi
  done < <(start_order)
  for k in "${!nid[@]}"; do wait_up "$k" "$all"; done
}
# one node at a time, each drained first (its movable processes go on
# with their state on the others); the next only once every node sees all
# of them up again (the restarted node has rejoined, and the others took it back)
rolling_restart() {
  local k j all=${#nid[@]}
  while read -r k; do
    [ "$dry" = 1 ] || say "draining and restarting node ${nid[$k]} on ${nhost[$k]}"
    [ "$dry" = 1 ] || drain_node "$k"
    restart_node "$k"
    wait_up "$k" "$all"
    for j in "${!nid[@]}"; do [ "$j" = "$k" ] || wait_up "$j" "$all"; done
  done < <(rolling_order)
}

# ------------------------------------------------------------- installing

stage_local() { # configs, keys and the unit, under $staging
  local k i ep want
  run mkdir -p -m 700 "$staging" "$staging/keys" "$staging/etc"
  for k in "${!nid[@]}"; do
    i=n${nid[$k]} ep=${nadv[$k]}
    # a certificate records its node's endpoint (that is how the others find
    # its public key): keep it while the endpoint stays, else make a new one
    # and its id (members admit the key as that node only)
    if [ -f "$staging/keys/$i.cert" ] && grep -q "endpoint = \"$ep\"" "$staging/keys/$i.cert" &&
      grep -q "node-id = \"${nid[$k]}\"" "$staging/keys/$i.cert"; then continue; fi
    [ ! -f "$staging/keys/$i.cert" ] || run rm -f "$staging/keys/$i.cert" "$staging/keys/$i.cert_secret"
    run -q "$bin" keygen "$staging/keys" --name "$i" --endpoint "$ep" --node-id "${nid[$k]}"
  done
  [ -f "$staging/keys/client.cert" ] || run -q "$bin" keygen "$staging/keys" --name client
  # authorized: exactly this file's nodes and the client
  want=()
  for k in "${!nid[@]}"; do want+=("$staging/keys/n${nid[$k]}.cert"); done
  run rm -rf "$staging/keys/authorized"
  run mkdir -p "$staging/keys/authorized"
  run cp "${want[@]}" "$staging/keys/client.cert" "$staging/keys/authorized/"
  for k in "${!nid[@]}"; do write_config "$k"; done
  if [ "$service" = systemd ]; then
    local lines=() l
    while IFS= read -r l || [ -n "$l" ]; do
      l=${l//@ROOT@/$root}
      lines+=("${l//@USER@/$svc_user}")
    done <"$here/schednode@.service"
    write_file "$staging/schednode@.service" "${lines[@]}"
  fi
}

write_config() { # k: staging/etc/nID.cfg; paths relative to ROOT/etc
  local k=$1 s p j
  local c=("# node ${nid[$k]} of cluster '$cluster', written by $prog from $(basename "$hosts_file"); paths are relative to this file")
  c+=(node "    id = ${nid[$k]}" "    name = \"n${nid[$k]}\"" "    listen = \"${nlisten[$k]}\"")
  [ "${nadv[$k]}" = "${nlisten[$k]}" ] || c+=("    advertise = \"${nadv[$k]}\"")
  for p in "${plugins[@]}"; do c+=("    plugin = \"../plugins/$(basename "$p")\""); done
  for ((j = 0; j < ${#sets[@]}; j += 2)); do
    [[ ${sets[$j]} == node/* ]] && c+=("    ${sets[$j]#node/} = ${sets[$((j + 1))]}")
  done
  c+=(cluster "    name = \"$cluster\"")
  for s in "${seeds[@]}"; do c+=("    seed = \"${nadv[$(node_k "$s")]}\""); done
  for ((j = 0; j < ${#sets[@]}; j += 2)); do
    [[ ${sets[$j]} == cluster/* ]] && c+=("    ${sets[$j]#cluster/} = ${sets[$((j + 1))]}")
  done
  c+=(security "    cert = \"../keys/n${nid[$k]}.cert\"" "    authorized-keys = \"../keys/authorized\"")
  write_file "$staging/etc/n${nid[$k]}.cfg" "${c[@]}"
}

# install_program H: binary and plugins into host h's stage, then into place. A
# new file and a rename: a running binary or a loaded plugin cannot be
# overwritten in place (and must not be: the old run still maps it).
install_program() {
  local h=$1 r st p b script
  r=$(host_root "$h") st=$(host_stage "$h")
  copy "$h" "$st" "$bin" "${plugins[@]}"
  b=$(basename "$bin")
  script="mkdir -p $(q "$r/bin" "$r/plugins") && install -m 0755 $(q "$st/$b" "$r/bin/schednode.new") && mv -f $(q "$r/bin/schednode.new" "$r/bin/schednode")"
  for p in "${plugins[@]}"; do
    b=$(basename "$p")
    script+=" && install -m 0644 $(q "$st/$b" "$r/plugins/$b.new") && mv -f $(q "$r/plugins/$b.new" "$r/plugins/$b")"
  done
  remote "$h" "$script"
  # the binary runs there (its libraries are installed): fail now, not at start
  remote "$h" "$(q "$r/bin/schednode") --version"
}

make_stage() { # H: an empty stage directory on host h, private (keys pass through it)
  local st
  st=$(host_stage "$1")
  # made as the ssh user even with --sudo: scp writes into it as that user
  local saved=$sudo
  sudo=0
  remote "$1" "umask 077 && rm -rf $(q "$st") && mkdir -p $(q "$st/authorized")"
  sudo=$saved
}

# install_deps H: the runtime packages host h lacks, with apt-get (as the
# user's README commands do): only the missing ones; the package lists are
# refreshed once if the install fails without them
install_deps() {
  [ "$deps" = 1 ] || return 0
  local h=$1 pk="$runtime_pkgs"
  # shellcheck disable=SC2016 # expanded on the remote side
  remote "$1" 'm=; for p in '"$pk"'; do dpkg-query -W -f="\${Status}" "$p" 2>/dev/null | grep -q "install ok installed" || m="$m $p"; done; [ -z "$m" ] && exit 0; command -v apt-get >/dev/null || { echo "missing packages:$m, and no apt-get" >&2; exit 1; }; echo "installing$m"; export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq --no-install-recommends $m >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends $m >/dev/null; }'
}

install_host() { # H: everything a host needs for its nodes
  local h=$1 r st k files=() auth=() i
  r=$(host_root "$h") st=$(host_stage "$h")
  install_deps "$h"
  make_stage "$h"
  if [ "$service" = systemd ]; then
    remote "$h" "id -u $(q "$svc_user") >/dev/null 2>&1 || useradd --system --no-create-home --home-dir $(q "$r") --shell /usr/sbin/nologin $(q "$svc_user")"
  fi
  install_program "$h"
  for k in "${!nid[@]}"; do
    auth+=("$staging/keys/n${nid[$k]}.cert")
    [ "${nhix[$k]}" = "$h" ] || continue
    i=n${nid[$k]}
    files+=("$staging/etc/$i.cfg" "$staging/keys/$i.cert" "$staging/keys/$i.cert_secret")
  done
  copy "$h" "$st" "${files[@]}" "$staging/keys/client.cert" "$staging/keys/client.cert_secret"
  copy "$h" "$st/authorized" "${auth[@]}" "$staging/keys/client.cert"
  [ "$service" = plain ] || copy "$h" "$st" "$staging/schednode@.service"
  # configs and public keys readable, node secrets for the node's user only,
  # the client secret for root (or the deploying user) only; authorized/ is
  # rebuilt, so a node taken out of the hosts file is no longer let in
  local script
  script="mkdir -p $(q "$r/etc" "$r/keys")"
  [ "$service" = systemd ] || script+=" $(q "$r/log" "$r/run")" # the plain service's logs and pidfiles
  script+=" && rm -rf $(q "$r/keys/authorized") && mkdir -p $(q "$r/keys/authorized")"
  script+=" && install -m 0644 $(q "$st/authorized")/*.cert $(q "$r/keys/authorized/")"
  for k in "${!nid[@]}"; do
    [ "${nhix[$k]}" = "$h" ] || continue
    i=n${nid[$k]}
    script+=" && install -m 0644 $(q "$st/$i.cfg") $(q "$r/etc/") && install -m 0644 $(q "$st/$i.cert") $(q "$r/keys/")"
    script+=" && install -m 0600 $(q "$st/$i.cert_secret") $(q "$r/keys/")"
    [ "$service" = plain ] || script+=" && chown $(q "$svc_user") $(q "$r/keys/$i.cert_secret")"
  done
  script+=" && install -m 0644 $(q "$st/client.cert") $(q "$r/keys/") && install -m 0600 $(q "$st/client.cert_secret") $(q "$r/keys/")"
  remote "$h" "$script"
  if [ "$service" = systemd ]; then
    remote "$h" "install -m 0644 $(q "$st/schednode@.service") /etc/systemd/system/schednode@.service && systemctl daemon-reload"
  fi
  remote "$h" "rm -rf $(q "$st")"
}

# ------------------------------------------------------------- subcommands

help_deploy() {
  cat <<EOF
usage: $prog deploy HOSTS [--bin PATH] [--plugin FILE.so]... [OPTIONS]

1. checks every host answers (exit 2 naming the hosts line if one does not);
2. in the staging directory (default HOSTS.d): keys with \`schednode keygen\`
   (one per node, recording its endpoint and id, kept across deploys while
   they stay; one client key; authorized/), etc/nID.cfg per node, and
   the unit rendered from deploy/schednode@.service;
3. on every host: the runtime packages it lacks (apt-get install; --packages,
   --no-deps), then under ROOT (default /opt/schednode): bin/schednode,
   plugins/, etc/nID.cfg, keys/ (the node's secret 0600, owned by the service
   user; client key for \`status\`), the service user and
   /etc/systemd/system/schednode@.service;
4. starts the first seed, waits until it answers, starts the other seeds, then
   the rest, and waits until every node reports all nodes up.
Nodes that were already running keep running their old binary and config:
use \`restart\` (or \`upgrade\`) after a deploy to a running cluster.
Common options: $prog --help.
EOF
}
help_start() { echo "usage: $prog start HOSTS [OPTIONS]   starts every node, seeds first, and waits until all are up"; }
help_stop() { echo "usage: $prog stop HOSTS [OPTIONS]    stops every node (SIGTERM: each leaves the cluster), seeds last"; }
help_restart() {
  echo "usage: $prog restart HOSTS [OPTIONS]"
  echo "restarts one node at a time (non-seeds first, the first seed last), each drained first (as upgrade), waiting until each reports all nodes up"
}
help_upgrade() {
  cat <<EOF
usage: $prog upgrade HOSTS [--bin PATH] [--plugin FILE.so]... [OPTIONS]

Copies the binary (and the plugins, which must have the names given at deploy:
the configs list them) to every host, installing each under a new name and
renaming it into place, then restarts one node at a time (non-seeds first, the
first seed last): it drains the node first (its processes that can move go on,
with their state, on the others; the rest get SCHEDNODE_DRAIN_MS, default
10000, to end, and the restart CANCELs what is left), and waits until each
reports all nodes up before the next.
EOF
}
help_status() {
  echo "usage: $prog status HOSTS [--json] [OPTIONS]"
  echo "asks the nodes in file order (on their own hosts, with the client key) and prints the first answer"
}

parse_args() { # SUBCOMMAND ARGS...: options and the hosts file
  local sub=$1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      -h | --help) "help_$sub"; exit 0 ;;
      --bin) bin=${2:?--bin needs a path}; shift 2 ;;
      --plugin) plugins+=("${2:?--plugin needs a file}"); shift 2 ;;
      --packages) runtime_pkgs=${2?--packages needs a list}; shift 2 ;;
      --no-deps) deps=0; shift ;;
      --cluster) cluster_flag=${2:?--cluster needs a name}; shift 2 ;;
      --root) root=${2:?--root needs a directory}; shift 2 ;;
      --staging) staging=${2:?--staging needs a directory}; shift 2 ;;
      --user) svc_user=${2:?--user needs a name}; shift 2 ;;
      --sudo) sudo=1; shift ;;
      --ssh-opt) sshopt+=(-o "${2:?--ssh-opt needs KEY=VALUE}"); shift 2 ;;
      --wait) wait=${2:?--wait needs seconds}; shift 2 ;;
      --dry-run) dry=1; shift ;;
      --json) json=--json; shift ;;
      --transport) transport=${2:?--transport needs ssh or netns}; shift 2 ;;
      --service) service=${2:?--service needs systemd or plain}; shift 2 ;;
      --chroot) chroot=${2:?--chroot needs a directory}; shift 2 ;;
      -*) die 2 "$sub: unknown option '$1' (see $prog $sub --help)" ;;
      *) [ -z "$hosts_file" ] || die 2 "$sub: one hosts file, not '$hosts_file' and '$1'"; hosts_file=$1; shift ;;
    esac
  done
  [ -n "$hosts_file" ] || { "help_$sub" >&2; exit 2; }
  [[ $cluster_flag =~ ^[A-Za-z0-9._-]{0,63}$ ]] || die 2 "bad --cluster '$cluster_flag'"
  [[ $wait =~ ^[0-9]+$ ]] || die 2 "--wait takes seconds"
  case $transport in ssh | netns) ;; *) die 2 "--transport is ssh or netns" ;; esac
  case $service in systemd | plain) ;; *) die 2 "--service is systemd or plain" ;; esac
  [ "$transport" = ssh ] || [ "$service" = plain ] ||
    die 2 "--transport netns needs --service plain (systemd would start the nodes outside the namespaces)"
  [ "$transport" = ssh ] || [ "$dry" = 1 ] || [ "$(id -u)" = 0 ] || die 2 "--transport netns needs root (ip netns exec)"
  [ -z "$chroot" ] || { [ "$transport" = netns ] && [[ $chroot == /* ]] && [ -x "$chroot/bin/sh" ]; } ||
    die 2 "--chroot needs --transport netns and an absolute path to a root file system (with /bin/sh)"
  [[ $root == /* ]] || die 2 "--root must be an absolute path"
  [[ $svc_user =~ ^[a-z_][a-z0-9_-]*$ ]] || die 2 "bad --user '$svc_user'"
  [[ $runtime_pkgs =~ ^[a-z0-9.+\ -]*$ ]] || die 2 "bad --packages '$runtime_pkgs' (Debian package names)"
  read_hosts
  [ -n "$staging" ] || staging=$hosts_file.d
}
need_program() { # deploy, upgrade: the files to copy exist
  local p
  if [ -z "$bin" ]; then
    bin=$here/../build/schednode
    [ -x "$bin" ] || bin=$(command -v schednode) || die 2 "no schednode binary: build it (build/schednode) or give --bin PATH"
  fi
  { [ -f "$bin" ] && [ -x "$bin" ]; } || die 2 "no schednode binary at '$bin' (build it, or give --bin PATH)"
  for p in "${plugins[@]}"; do [ -f "$p" ] || die 2 "no plugin file '$p'"; done
  [ "$service" = plain ] || [ -f "$here/schednode@.service" ] || die 2 "no unit template $here/schednode@.service"
}

# Ctrl-C: nothing is undone on the hosts (a half-deployed cluster is fixed by
# running the subcommand again), but say where it stopped
step='starting'
trap 'echo "$prog: interrupted while $step; run the same command again to finish" >&2; exit 130' INT TERM

json=''
[ $# -gt 0 ] || { usage >&2; exit 2; }
sub=$1
shift
case $sub in
  -h | --help | help) usage; exit 0 ;;
  deploy | start | stop | restart | upgrade | status) ;;
  *) usage >&2; die 2 "unknown subcommand '$sub'" ;;
esac
parse_args "$sub" "$@"

case $sub in
  deploy)
    need_program
    step='checking the hosts'; preflight
    step='making configs and keys'; stage_local
    for h in "${!hname[@]}"; do step="installing on ${hname[$h]}"; install_host "$h"; done
    step='starting the nodes'; start_all
    [ "$dry" = 1 ] || say "deployed: ${#nid[@]} nodes up (cluster '$cluster'; keys in $staging/keys)" ;;
  start)
    step='checking the hosts'; preflight
    step='starting the nodes'; start_all
    [ "$dry" = 1 ] || say "${#nid[@]} nodes up" ;;
  stop)
    step='checking the hosts'; preflight
    step='stopping the nodes'
    while read -r k; do stop_node "$k"; done < <(stop_order)
    [ "$dry" = 1 ] || say "${#nid[@]} nodes stopped" ;;
  restart)
    step='checking the hosts'; preflight
    step='restarting'; rolling_restart
    [ "$dry" = 1 ] || say "restarted: ${#nid[@]} nodes up" ;;
  upgrade)
    need_program
    step='checking the hosts'; preflight
    for h in "${!hname[@]}"; do
      step="copying the program to ${hname[$h]}"
      install_deps "$h"
      make_stage "$h"
      install_program "$h"
      remote "$h" "rm -rf $(q "$(host_stage "$h")")"
    done
    step='restarting'; rolling_restart
    [ "$dry" = 1 ] || say "upgraded: ${#nid[@]} nodes up" ;;
  status)
    for k in "${!nid[@]}"; do
      if [ "$dry" = 1 ]; then remote_try "${nhix[$k]}" "$(status_script "$k" "$json")"; exit 0; fi
      remote_try "${nhix[$k]}" "$(status_script "$k" "$json")" && exit 0
    done
    die 1 "no node answered" ;;
esac
