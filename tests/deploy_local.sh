#!/usr/bin/env bash
# deploy_local.sh - deploy/local-cluster.sh and the main job (scripts/demo.sh)
# against the built program: a 3-node secure cluster comes up, answers
# client commands, refuses a second start and bad arguments (exit 2), goes
# down leaving no process and no state; `upgrade` drains, stops and
# starts each node in turn while sinks with state (msink, half their
# messages in) live on: each is still there after every node restarted; an interrupted `up` leaves no node
# behind; the demo workload runs with every process done exactly once, the
# messages in order and work stolen by the other nodes. Args: $1 schednode.
set -u
SN=$1
DEMO=$(realpath "$(dirname "$SN")/schednode-demo.so") # the demo and test types: a plugin
root=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh"
LC=("$root/deploy/local-cluster.sh" --dir "$dir/lc" --bin "$SN")

node_pids() { cat "$dir/lc/pids" 2>/dev/null; }
none_alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }

"${LC[@]}" --help | grep -q "up N" && ok "--help" || bad "--help"
# its `client` passes every client command of the program on: --help
# names each one the program's --help lists under "Client commands"
verbs=$("$SN" --help | sed -n '/^Client commands/,/^Keys:/s/^  \([a-z][a-z]*\) .*/\1/p')
said=$("${LC[@]}" --help | sed -n '/^  client /,/^  [a-z]/p')
missing=$(for v in $verbs; do grep -qw "$v" <<<"$said" || echo "$v"; done)
[ -n "$verbs" ] && [ -z "$missing" ] && ok "--help names every client command: $(echo $verbs)" ||
  bad "--help's client leaves out: $(echo $missing) (of $(echo $verbs))"
"${LC[@]}" up 0 >/dev/null 2>&1; [ $? -eq 2 ] && ok "up 0: exit 2" || bad "up 0 not refused with 2"
"${LC[@]}" up 3 -w x >/dev/null 2>&1; [ $? -eq 2 ] && ok "up -w x: exit 2" || bad "-w x not refused with 2"
"${LC[@]}" --frob status >/dev/null 2>&1; [ $? -eq 2 ] && ok "unknown option: exit 2" || bad "unknown option"
out=$("${LC[@]}" status 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no cluster" <<<"$out" && ok "status without a cluster names the problem" || bad "status w/o cluster: $rc $out"

if out=$(timeout 120 "${LC[@]}" up 3 -w 1 --wait 90 -- --load "$DEMO" 2>&1); then
  ok "up 3"
else
  bad "up 3 failed: $out"
fi
mapfile -t started < <(node_pids)
pids+=("${started[@]}")
[ ${#started[@]} -eq 3 ] && ok "three nodes started" || bad "pids: ${started[*]}"
n_up=$(timeout 30 "${LC[@]}" status --json | jq '[.nodes[] | select(.state == "up")] | length')
[ "$n_up" = 3 ] && ok "status --json: 3 up" || bad "status: $n_up up"
grep -q "key not authorized\|security mismatch" "$dir"/lc/n*.log && bad "a refusal in the logs" || ok "no refusals logged"
ls "$dir"/lc/keys/n1.cert "$dir"/lc/keys/authorized/client.cert >/dev/null 2>&1 && ok "throwaway keys" || bad "keys missing"
ep3=$("${LC[@]}" endpoint 3)
out=$(timeout 30 "$SN" status --connect "$ep3" --insecure 2>&1)
[ $? -ne 0 ] && ok "the cluster is secure: a keyless client is refused" || bad "keyless client got: $out"
sink=$(timeout 30 "${LC[@]}" client -n 3 spawn xsink collect 500)
out=$(timeout 60 "${LC[@]}" client -n 2 call xsource blast "$sink 500" 2>&1)
[ "$out" = "500 messages in order" ] && ok "client: messages from node 2 to node 3" || bad "xsource: $out"
out=$("${LC[@]}" up 3 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "running" <<<"$out" && ok "a second up is refused" || bad "second up: $rc $out"
"${LC[@]}" client -n 9 status >/dev/null 2>&1; [ $? -eq 2 ] && ok "client -n 9: exit 2" || bad "client -n 9"

# --- upgrade: a rolling restart with sinks holding state, one per node
sinks=()
for i in 1 2 3; do
  s=$(timeout 30 "${LC[@]}" client spawn msink collect 20 --on $i)
  timeout 30 "${LC[@]}" client spawn xsource blast "$s 10 0" --on $i >/dev/null && sinks+=("$s")
done
sleep 0.5 # (the sources' 10 messages reach their sinks; an unanswered source cannot move: it gets CANCEL)
before=$(node_pids | tr '\n' ' ')
t0=$SECONDS
out=$(timeout 120 "${LC[@]}" upgrade --timeout 1000 2>&1); rc=$?
echo "$out" | sed 's/^/  upgrade| /'
after=$(node_pids | tr '\n' ' ')
mapfile -t started < <(node_pids)
pids+=("${started[@]}")
changed=0
for i in 1 2 3; do [ "$(sed -n "${i}p" <<<"${before// /$'\n'}")" != "$(sed -n "${i}p" <<<"${after// /$'\n'}")" ] && changed=$((changed + 1)); done
[ $rc -eq 0 ] && [ $changed = 3 ] && [ ${#sinks[@]} = 3 ] &&
  ok "upgrade: each of the 3 nodes drained, stopped and started again ($((SECONDS - t0)) s)" ||
  bad "upgrade: rc=$rc, $changed nodes restarted, ${#sinks[@]} sinks: $out"
# every sink lives on, on some node (each moved at least once), and is
# reached by its PID although its home node restarted: it takes messages
# 10-19 after 0-9, in order, and answers the 20th's sender with its count
alive=$(timeout 30 "${LC[@]}" client ps --json | jq -r '.processes[] | select(.type == "msink") | .pid' | sort)
good=0
for s in "${sinks[@]}"; do grep -qx "$s" <<<"$alive" && good=$((good + 1)); done
[ $good = 3 ] && ok "the 3 sinks lived through the upgrade (ps finds each on a node)" ||
  bad "sinks after the upgrade: $good of 3 alive: $alive"
good=0
for i in 1 2 3; do
  s=${sinks[$((i - 1))]}
  out=$(timeout 30 "${LC[@]}" client call xsource blast "$s 10 10" --on $((i % 3 + 1)) 2>&1)
  [ "$out" = 20 ] && good=$((good + 1)) || echo "  sink $s after the upgrade: '$out'"
done
[ $good = 3 ] && ok "the 3 sinks, their homes restarted, are reached by PID: messages 10-19 after 0-9, in order" ||
  bad "$good of 3 sinks reached by PID after the upgrade"

timeout 60 "${LC[@]}" down >/dev/null; rc=$?
[ $rc -eq 0 ] && wait_for 50 none_alive "${started[@]}" && [ ! -d "$dir/lc" ] &&
  ok "down: nodes gone, state removed" || bad "down: rc $rc"

# Ctrl-C during up stops the nodes started so far. To hold `up` in its
# wait, node 2 is a stand-in that never comes up (a wrapper program that
# runs schednode for everything else).
printf '#!/bin/sh\ncase " $* " in *" -n 2 "*) exec sleep 60;; esac\nexec "%s" "$@"\n' "$SN" >"$dir/slow-sn"
chmod +x "$dir/slow-sn"
# Job control on, so the background `up` does not start with SIGINT ignored.
set -m
"$root/deploy/local-cluster.sh" --dir "$dir/lc" --bin "$dir/slow-sn" up 2 --wait 60 >"$dir/int.log" 2>&1 &
upid=$!
set +m
two_started() { [ "$(grep -c . "$dir/lc/pids" 2>/dev/null)" = 2 ]; }
wait_for 300 two_started && sleep 0.3 # until node 2 is started (node 1 first has to be up: slow under TSan)
mapfile -t started < <(node_pids)
pids+=("${started[@]}")
sleep 0.3
kill -INT $upid
wait $upid; rc=$?
[ $rc -eq 130 ] && [ ${#started[@]} -eq 2 ] && wait_for 150 none_alive "${started[@]}" &&
  ok "Ctrl-C during up stops the nodes it started" || bad "interrupted up: rc $rc, pids: ${started[*]}; $(cat "$dir/int.log")"
timeout 30 "${LC[@]}" down >/dev/null 2>&1

# The main job with a small workload (no build: SCHEDNODE_BIN).
out=$(cd "$dir" && SCHEDNODE_BIN=$SN DEMO_PROCS=400 DEMO_MS=2 DEMO_MSGS=5000 TMPDIR=$dir timeout 240 bash "$root/scripts/demo.sh" 2>&1); rc=$?
echo "$out" | sed 's/^/  demo| /'
[ $rc -eq 0 ] && ok "demo exits 0" || bad "demo rc $rc"
grep -Eq "^spread \(node 1\): +400 done: " <<<"$out" && ! grep -q missing <<<"$out" &&
  ok "demo: all 400 processes done once" || bad "demo spread result"
[ "$(grep -c "5000 messages in order" <<<"$out")" = 2 ] && ok "demo: messages in order to both nodes" || bad "demo messages"
# the per-node table: processes ran on more than one node, and node 1 gave steals
ran=$(awk '/^NODE +PROCS_RUN/ { t = 1; next } t && /^[0-9]/ { if ($2 > 0) n++ } /^\(PROCS_RUN/ { t = 0 } END { print n + 0 }' <<<"$out")
[ "$ran" -ge 2 ] && ok "demo: processes ran on $ran nodes" || bad "demo: processes ran on $ran nodes"
awk '/^NODE +PROCS_RUN/ { t = 1; next } t && $1 == 1 { exit !($6 > 0) }' <<<"$out" &&
  ok "demo: node 1 gave work away" || bad "demo: node 1 gave no work away"
grep -q "local-cluster: stopped" <<<"$out" && ok "demo stops its cluster" || bad "demo left the cluster running"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
