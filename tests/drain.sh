#!/usr/bin/env bash
# drain.sh - `schednode drain` on 3 real nodes, every command through
# node 1. Node 2 holds sinks with state (msink: it counts numbered
# messages and fails on a gap, a repeat or a reorder): 4 under paced
# streams from sources on nodes 1 and 3, 6 idle ones that got half their
# messages. Draining node 2 moves every one of them to nodes 1 and 3 (both
# get some), the report says so, node 2 is left empty, `status` shows it
# draining and a spawn on it fails saying so; every stream is acked whole,
# once and in order, and each idle sink takes the second half of its
# messages where it went. `undrain` ends it. Then a drain with a process
# whose type has no marshal (xsink): reported as left with that reason,
# exit 5, and with --then-stop node 2 leaves the cluster and exits after
# the timeout. Stealing is off (--no-steal): only the drain moves anything.
#
# usage: drain.sh PATH/TO/schednode
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # msink, xsink, xsource: the demo plugin
. "$(dirname "$0")/lib.sh"

declare -A port nodepid
for n in 1 2 3; do port[$n]=$(free_port); done
ep() { echo "tcp://127.0.0.1:${port[$1]}"; }
start() { # node-id seed-id
  local n=$1 seed=$2
  "$SN" --load "$DEMO" -n "$n" -w 2 --listen "$(ep "$n")" --insecure --no-steal ${seed:+--join "$(ep "$seed")"} \
    >>"$dir/node$n.log" 2>&1 &
  pids+=($!)
  nodepid[$n]=$!
  wait_for 100 grep -q "up: " "$dir/node$n.log" || { echo "node $n did not come up"; cat "$dir/node$n.log"; return 1; }
}
cl() { timeout 60 "$SN" --insecure --connect "$(ep 1)" "$@"; } # every command through node 1
where() { cl ps --json | jq -r --arg p "$1" '.processes[] | select(.pid == $p) | .node'; }
state_of() { cl status --json | jq -r --argjson n "$1" '.nodes[] | select(.id == $n) | .state'; }
finish() { echo "$pass passed, $fail failed"; [ $fail -eq 0 ]; exit; }

start 1 "" && start 2 1 && start 3 1 || { bad "three nodes start"; finish; }
up3() { [ "$(cl status --json | jq '[.nodes[] | select(.state == "up" and .workers > 0)] | length')" = 3 ]; }
wait_for 100 up3 && ok "three nodes up" || { bad "three nodes up: $(cl status)"; finish; }

# --- node 2: 6 idle sinks with half their messages, 4 sinks under streams
idle=()
for i in 1 2 3 4 5 6; do
  s=$(cl spawn msink collect 20 --on 2)
  out=$(cl spawn xsource blast "$s 10 0" --on 1 2>&1) && idle+=("$s") || bad "messages 0-9 to idle sink $s: $out"
done
got10() { # every idle sink has taken its first 10 messages
  local s
  for s in "${idle[@]}"; do [ "$(cl ps --json --node 2 | jq --arg p "$s" '.processes[] | select(.pid == $p) | .steps')" -ge 2 ] || return 1; done
}
wait_for 50 got10 || bad "the idle sinks did not step"
sleep 0.2
N=3000 # 10 every 5 ms: about 1.5 s of stream
streams=()
for i in 1 2 3 4; do
  s=$(cl spawn msink collect $N --on 2)
  src=$((i % 2 ? 1 : 3))
  timeout 60 "$SN" --insecure --connect "$(ep $src)" call xsource pace "$s $N 5" >"$dir/source$i.out" 2>&1 &
  pids+=($!)
  streams+=($!)
done
[ ${#idle[@]} = 6 ] && ok "node 2 holds 6 idle sinks with state and 4 sinks under paced streams"
sleep 0.3

# --- drain node 2
out=$(cl drain --node 2 --timeout 10000 2>&1); rc=$?
echo "$out" | sed 's/^/    /'
flowing=0
for p in "${streams[@]}"; do kill -0 "$p" 2>/dev/null && flowing=$((flowing + 1)); done
[ $flowing -ge 1 ] && ok "$flowing of the 4 streams were still flowing after the drain (it moved sinks under load)" ||
  bad "every stream ended before the drain did (the test drained nothing under load)"
moved=$(sed -n 's/^node 2 drained after .*: \([0-9]*\) moved, \([0-9]*\) ended, \([0-9]*\) left$/\1 \2 \3/p' <<<"$out")
read -r m e l <<<"$moved"
[ $rc -eq 0 ] && [ -n "$moved" ] && [ "$l" = 0 ] && [ $((m + e)) = 10 ] && [ "$m" -ge 6 ] &&
  ok "drain --node 2: exit 0, $m moved, $e ended (streams that finished first), none left" ||
  bad "drain --node 2: rc=$rc: $out"
grep -q "^moved [0-9]* to node 1$" <<<"$out" && grep -q "^moved [0-9]* to node 3$" <<<"$out" &&
  ok "the report spreads them over nodes 1 and 3, by load" || bad "not spread over nodes 1 and 3: $out"
grep -q "^moved $m msink$" <<<"$out" && ok "the report counts them by type" || bad "no 'moved $m msink': $out"
left=$(cl ps --json --node 2 | jq '[.processes[]] | length')
[ "$left" = 0 ] && ok "ps: node 2 has no process left" || bad "ps: node 2 still has $left processes"
[ "$(state_of 2)" = draining ] && ok "status --json: node 2 is draining" || bad "status: node 2 is '$(state_of 2)'"
cl status | grep -q "^2 .* draining " && ok "status: node 2's row says draining" || bad "status: $(cl status)"
out=$(cl spawn msink collect 5 --on 2 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "draining" <<<"$out" && ok "spawn --on 2 while it drains: exit 1, says draining" ||
  bad "spawn --on 2 while draining: rc=$rc: $out"

# --- what moved kept its state and its messages
good=0
for s in "${idle[@]}"; do
  at=$(where "$s")
  out=$(cl call xsource blast "$s 10 10" --on 3 2>&1) # the sink answers its 20th message's sender with the count
  if { [ "$at" = 1 ] || [ "$at" = 3 ]; } && [ "$out" = 20 ] && [ -z "$(where "$s")" ]; then
    good=$((good + 1))
  else
    bad "idle sink $s (on node '$at'): messages 10-19: '$out', still there: '$(where "$s")'"
  fi
done
[ $good = 6 ] && ok "the 6 idle sinks, on nodes 1 and 3, took messages 10-19 after 0-9, in order, and ended"
i=0 good=0
for p in "${streams[@]}"; do
  i=$((i + 1))
  wait "$p"; rc=$?
  [ $rc -eq 0 ] && [ "$(cat "$dir/source$i.out")" = $N ] && good=$((good + 1)) ||
    bad "stream $i: rc=$rc $(cat "$dir/source$i.out")"
done
[ $good = 4 ] && ok "the 4 streams: all $N messages of each acked, once and in order, across the drain"

# --- undrain
out=$(cl undrain --node 2 2>&1); rc=$?
is2() { [ "$(state_of 2)" = "$1" ]; }
wait_for 50 is2 up || bad "status: node 2 is '$(state_of 2)' after undrain"
s=$(cl spawn msink collect 5 --on 2 2>&1)
[ $rc -eq 0 ] && [ "${s%%.*}" = 2 ] && ok "undrain: node 2 takes spawns again ($s)" || bad "undrain: rc=$rc $out; spawn: $s"

# --- a process that cannot move: reported, left; --then-stop stops after the timeout
x=$(cl spawn xsink collect 5 --on 2)
t0=$(date +%s%N)
out=$(cl drain --node 2 --timeout 1500 --then-stop 2>&1); rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "$out" | sed 's/^/    /'
[ $rc -eq 5 ] && grep -q "^left 1 xsink: its type has no marshal and unmarshal$" <<<"$out" &&
  grep -q "^moved 1 msink$" <<<"$out" && [ $ms -ge 1500 ] &&
  ok "drain with an xsink ($x): exit 5 after the timeout, left with the reason, the msink moved" ||
  bad "drain with an xsink: rc=$rc after $ms ms: $out"
grep -q "stops now" <<<"$out" && ok "--then-stop: the report says the node stops" || bad "--then-stop: $out"
gone2() { ! kill -0 "${nodepid[2]}" 2>/dev/null; }
wait_for 100 gone2 && ok "node 2 exited after its drain" || bad "node 2 still runs 10 s after --then-stop"
wait "${nodepid[2]}"; rc=$?
[ $rc -eq 0 ] && ok "node 2 exit status 0 (an orderly shutdown)" || bad "node 2 exit status $rc"
wait_for 50 is2 left && ok "status: node 2 has left the cluster" ||
  bad "status: node 2 is '$(state_of 2)'"
finish
