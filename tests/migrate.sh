#!/usr/bin/env bash
# migrate.sh - placement and migration through one client, on 3 real
# nodes: `spawn --on N` starts a process on each node whatever node the
# client talks to, and says why when it cannot (no such node, no such
# type); `migrate PID --to N` moves a sink with state (msink: it counts
# numbered messages and fails on a gap, a repeat or a reorder) round the
# cluster and back twice while a source on another node streams to it:
# every move says where it is, `ps` finds it there, and the source gets
# the sink's ack of every message, once and in order. A sleeping process
# moves mid-sleep and wakes on its new node when its sleep is over. A
# process whose type has no marshal says so; a PID nobody has exits 4.
# Stealing is off
# (--no-steal), so only the moves asked for move anything.
#
# usage: migrate.sh PATH/TO/schednode
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # msink, xsink, xsource, sleeper: the demo plugin
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
ep() { echo "tcp://127.0.0.1:${port[$1]}"; }
start() { # node-id seed-id
  local n=$1 seed=$2
  "$SN" --load "$DEMO" -n "$n" -w 2 --listen "$(ep "$n")" --insecure --no-steal ${seed:+--join "$(ep "$seed")"} \
    >>"$dir/node$n.log" 2>&1 &
  pids+=($!)
  wait_for 100 grep -q "up: " "$dir/node$n.log" || { echo "node $n did not come up"; cat "$dir/node$n.log"; return 1; }
}
cl() { timeout 60 "$SN" --insecure --connect "$(ep 1)" "$@"; } # every command through node 1
where() { cl ps --json | jq -r --arg p "$1" '.processes[] | select(.pid == $p) | .node'; }
finish() { echo "$pass passed, $fail failed"; [ $fail -eq 0 ]; exit; }

start 1 "" && start 2 1 && start 3 1 || { bad "three nodes start"; finish; }
up3() { [ "$(cl status --json | jq '[.nodes[] | select(.state == "up" and .workers > 0)] | length')" = 3 ]; }
wait_for 100 up3 && ok "three nodes up" || { bad "three nodes up: $(cl status)"; finish; }

# --- placement: one process on each node, all through node 1
for n in 1 2 3; do
  pid=$(cl spawn msink collect 100 --on "$n" 2>&1)
  [ "${pid%%.*}" = "$n" ] && [ "$(where "$pid")" = "$n" ] && ok "spawn --on $n through node 1: $pid runs on node $n" ||
    bad "spawn --on $n: '$pid' is on node '$(where "$pid")'"
done
sink2=$(cl spawn msink collect 10 --on 2)
out=$(cl call xsource blast "$sink2 10" --on 3 2>&1)
[ "$out" = 10 ] && ok "call --on 3 runs there and answers (10 messages to a sink on node 2)" || bad "call --on 3: $out"
out=$(cl spawn msink collect 10 --on 9 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "node 9: no such node" <<<"$out" && ok "spawn --on 9 (no such node): exit 1, said" ||
  bad "spawn --on 9: rc=$rc: $out"
out=$(cl spawn nosuchtype run --on 2 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "unknown process type" <<<"$out" && ok "spawn --on 2 of a type node 2 lacks: exit 1, said" ||
  bad "spawn --on 2 nosuchtype: rc=$rc: $out"

# --- migrate: round the cluster and back, twice, under a stream
N=6000 # 10 every 5 ms: about 3 s of stream
sink=$(cl spawn msink collect $N --on 1)
timeout 60 "$SN" --insecure --connect "$(ep 3)" call xsource pace "$sink $N 5" >"$dir/source.out" 2>&1 &
src=$!; pids+=($src)
sleep 0.3
moves=0
for to in 2 3 1 2 3 1; do
  out=$(cl migrate "$sink" --to $to 2>&1); rc=$?
  at=$(where "$sink")
  if [ $rc -eq 0 ] && [ "$out" = "$sink on node $to" ] && [ "$at" = $to ]; then
    moves=$((moves + 1))
  else
    bad "migrate $sink --to $to: rc=$rc '$out', ps says node '$at'"
  fi
done
[ $moves -eq 6 ] && ok "migrate under a stream: 6 moves (1 -> 2 -> 3 -> 1, twice), each printed and seen by ps"
kill -0 $src 2>/dev/null && ok "the stream was still flowing after the last move" ||
  bad "the stream ended before the moves did (the test moved nothing under load)"
wait $src; rc=$?
[ $rc -eq 0 ] && [ "$(cat "$dir/source.out")" = $N ] &&
  ok "the sink acked all $N messages: state kept, every message once, in order" ||
  bad "the stream: rc=$rc $(cat "$dir/source.out")"
moved=$(cl ps --json | jq -r --arg p "$sink" '.processes[] | select(.pid == $p) | .moves')
[ -z "$moved" ] && ok "the sink ended after its last message" || bad "the sink is still there (moves $moved)"

# --- a sleeping process moves mid-sleep, its timer with it: a sleeper
# dozing 3000 ms on node 2, moved to node 3 after about 1.5 s, is on node 3
# until its sleep ends, and ends there then: not before 3 s from its
# start, and before a whole sleep again after the move (4.5 s)
ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(ms)
z=$(cl spawn sleeper doze 3000 --on 2)
[ "$(where "$z")" = 2 ] || bad "sleeper $z is not on node 2"
sleep 1.5
out=$(cl migrate "$z" --to 3 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" = "$z on node 3" ] && [ "$(where "$z")" = 3 ] &&
  ok "a sleeping process moves mid-sleep (migrate --to 3)" || bad "migrate sleeping $z --to 3: rc=$rc '$out'"
while [ "$(where "$z")" = 3 ] && [ $(($(ms) - t0)) -lt 10000 ]; do sleep 0.05; done
gone=$(($(ms) - t0)) at=$(where "$z")
[ -z "$at" ] && [ $gone -ge 3000 ] && [ $gone -lt 4500 ] &&
  ok "it stayed on node 3 and ended there when its sleep was over (${gone} ms from its start)" ||
  bad "the moved sleeper: ended after ${gone} ms, now on node '$at'"

# --- what cannot move says why
x=$(cl spawn xsink collect 5 --on 2)
out=$(cl migrate "$x" --to 3 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no marshal" <<<"$out" && [ "$(where "$x")" = 2 ] &&
  ok "a type without marshal: exit 1, says so, stays on node 2" || bad "migrate xsink: rc=$rc: $out"
out=$(cl migrate 2.999999 --to 3 2>&1); rc=$?
[ $rc -eq 4 ] && ok "migrate of a PID nobody has: exit 4" || bad "migrate 2.999999: rc=$rc: $out"
m=$(cl spawn msink collect 5 --on 2)
out=$(cl migrate "$m" --to 9 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "node 9 is not a member" <<<"$out" && ok "migrate --to 9 (no such node): exit 1, said" ||
  bad "migrate --to 9: rc=$rc: $out"
out=$(cl migrate "$m" --to 2 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" = "$m on node 2" ] && ok "migrate to where it is: nothing to do, says where" ||
  bad "migrate to its own node: rc=$rc: $out"
finish
