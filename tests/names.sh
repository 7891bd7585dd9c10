#!/usr/bin/env bash
# names.sh - names across 3 real nodes (relay/names.c): `spawn --name`
# on each node, `whereis` from every node gives the same PID; a taken
# name exits 1 naming the holder and starts no process; a source streams
# to a sink by its name (looked up once: sn_out_name_whereis) while the
# sink is migrated round the cluster: every message once and in order,
# and `whereis` right after each move gives the same PID, which `ps` finds
# on the node it moved to; `send NAME` reaches it, an unknown name exits
# 4; the name goes when its holder ends (finished or killed); one name
# registered from all nodes at once, many rounds: exactly one winner each
# round, the others told the winner's PID; drain moves named processes
# with their names; kill -9 of a node: every name
# held on the other nodes still resolves (the copies of those it owned
# take over), those it held go; it comes back: the names it owns now move
# to it and still resolve. Stealing is off (--no-steal).
#
# Messages to a registry that are not a registry's are counted as bad
# frames and dropped. From a process (tests/plugins/plugin_names.c): a register of a taken
# name fails naming the holder; register, whereis, unregister, whereis,
# unregister complete as schednode.h says.
#
# usage: names.sh PATH/TO/schednode PLUGIN_DIR (SN_NAMES_ROUNDS: rounds)
set -u
SN=$1
PLUG=$2
ROUNDS=${SN_NAMES_ROUNDS:-20}
DEMO=$(dirname "$SN")/schednode-demo.so # msink, xsource: the demo plugin
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
ep() { echo "tcp://127.0.0.1:${port[$1]}"; }
start() { # node-id seed-id
  local n=$1 seed=$2
  "$SN" --load "$DEMO" --load "$PLUG/plugin_names.so" -n "$n" -w 2 --listen "$(ep "$n")" --insecure --no-steal ${seed:+--join "$(ep "$seed")"} \
    >>"$dir/node$n.log" 2>&1 &
  pids+=($!)
  wait_for 100 grep -q "up: " "$dir/node$n.log" || { echo "node $n did not come up"; cat "$dir/node$n.log"; return 1; }
}
at() { local n=$1; shift; timeout 30 "$SN" --insecure --connect "$(ep "$n")" "$@"; } # a command through node n
where() { at 1 ps --json | jq -r --arg p "$1" '.processes[] | select(.pid == $p) | .node'; }
nsinks() { at 1 ps --json | jq '[.processes[] | select(.type == "msink")] | length'; }
gone() { ! at "$2" whereis "$1" >/dev/null 2>&1; }

start 1 "" && start 2 1 && start 3 1 || { bad "three nodes start"; finish; }
up() { [ "$(at 1 status --json | jq '[.nodes[] | select(.state == "up" and .workers > 0)] | length')" = "$1" ]; }
wait_for 100 up 3 && ok "three nodes up" || { bad "three nodes up: $(at 1 status)"; finish; }

# --- a name on each node, seen alike from every node
for n in 1 2 3; do
  pid=$(at 1 spawn msink collect 100 --on "$n" --name "a$n" 2>&1)
  same=1
  for k in 1 2 3; do [ "$(at "$k" whereis "a$n")" = "$pid" ] || same=0; done
  [ "${pid%%.*}" = "$n" ] && [ $same = 1 ] && ok "spawn --on $n --name a$n: $pid, whereis says so on every node" ||
    bad "spawn --on $n --name a$n: '$pid'; whereis: $(at 2 whereis "a$n" 2>&1)"
done
holder=$(at 3 whereis a1)
before=$(nsinks)
out=$(at 2 spawn msink collect 100 --name a1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "held by $holder" <<<"$out" && [ "$(nsinks)" = "$before" ] &&
  ok "a taken name: exit 1, names the holder ($holder), no process started" ||
  bad "a taken name: rc=$rc '$out', sinks $before -> $(nsinks)"
out=$(at 2 call namer claim a1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "taken by $holder" <<<"$out" && ok "a process's register of a taken name: SN_EEXIST with the holder" ||
  bad "namer claim a1: rc=$rc '$out'"
out=$(at 3 call namer cycle c1 2>&1)
[ "$out" = "cycle ok" ] && ok "a process: register, whereis (itself), unregister, whereis (noproc), unregister (noproc)" ||
  bad "namer cycle: $out"
out=$(at 1 call namer claim fresh 2>&1)
[ "$out" = held ] && wait_for 50 gone fresh 2 && ok "a process's own register; its name ends with it" ||
  bad "namer claim fresh: '$out'; whereis: $(at 2 whereis fresh 2>&1)"
[ "$(at 2 names --json | jq -r '[.names[].name] | join(",")')" = "a1,a2,a3" ] &&
  ok "names --json lists the three, sorted" || bad "names --json: $(at 2 names --json)"

# --- a stream by name while the named sink moves round the cluster
N=3000
sink=$(at 1 spawn msink collect $N --on 1 --name sink)
timeout 60 "$SN" --insecure --connect "$(ep 3)" call xsource pace "sink $N 5" >"$dir/source.out" 2>&1 &
src=$!; pids+=($src)
sleep 0.3
moves=0
for to in 2 3 1 2; do
  out=$(at 1 migrate "$sink" --to $to 2>&1); rc=$?
  w=$(at 2 whereis sink)
  if [ $rc -eq 0 ] && [ "$w" = "$sink" ] && [ "$(where "$sink")" = $to ]; then
    moves=$((moves + 1))
  else
    bad "migrate the named sink --to $to: rc=$rc '$out'; whereis '$w'; ps: node '$(where "$sink")'"
  fi
done
[ $moves -eq 4 ] && ok "the named sink moved 4 times under the stream; whereis right after each move: $sink"
kill -0 $src 2>/dev/null && ok "the stream was still flowing after the last move" ||
  bad "the stream ended before the moves did (the test moved nothing under load)"
wait $src; rc=$?
[ $rc -eq 0 ] && [ "$(cat "$dir/source.out")" = $N ] &&
  ok "a stream by name: all $N messages once and in order across the moves" ||
  bad "the stream by name: rc=$rc $(cat "$dir/source.out")"
wait_for 50 gone sink 3 && ok "the sink finished: its name is gone (whereis exits 1)" ||
  bad "the finished sink's name: $(at 3 whereis sink 2>&1)"

# --- send by name; an unknown name; a killed holder
at 3 send a2 hi >/dev/null 2>&1 && ok "send NAME: exit 0" || bad "send a2: $(at 3 send a2 hi 2>&1)"
out=$(at 3 send nosuchname hi 2>&1); rc=$?
[ $rc -eq 4 ] && grep -q "no process is named nosuchname" <<<"$out" && ok "send to an unknown name: exit 4, said" ||
  bad "send nosuchname: rc=$rc $out"
out=$(at 1 whereis nosuchname 2>&1); rc=$?
[ $rc -eq 1 ] && ok "whereis an unknown name: exit 1" || bad "whereis nosuchname: rc=$rc $out"
a2=$(at 1 whereis a2)
at 1 kill "$a2" --timeout 100 >/dev/null 2>&1
wait_for 50 gone a2 1 && wait_for 50 gone a2 3 && ok "a killed holder's name is gone, also from the caches" ||
  bad "a2 after its kill: $(at 1 whereis a2 2>&1)"

# --- one name from every node at once, ROUNDS rounds: one winner each
wins_ok=0
for r in $(seq "$ROUNDS"); do
  racers=()
  for n in 1 2 3; do
    at "$n" spawn msink collect 1000 --on "$n" --name "race$r" >"$dir/race$n" 2>&1 &
    racers+=($!)
  done
  wait "${racers[@]}"
  w=$(at 1 whereis "race$r")
  won=0 told=0
  for n in 1 2 3; do
    if [ "$(cat "$dir/race$n")" = "$w" ]; then won=$((won + 1)); elif grep -q "held by $w" "$dir/race$n"; then
      told=$((told + 1))
    fi
  done
  [ $won -eq 1 ] && [ $told -eq 2 ] && wins_ok=$((wins_ok + 1)) ||
    bad "round $r: $won winners, $told told the holder $w: $(cat "$dir"/race?)"
done
[ $wins_ok -eq "$ROUNDS" ] && ok "$ROUNDS rounds of one name from 3 nodes at once: exactly one winner each"
[ "$(nsinks)" = "$((ROUNDS + 2))" ] && ok "the losers started no process ($(nsinks) sinks)" ||
  bad "sinks: $(nsinks), want $((ROUNDS + 2))"

# --- a registry takes only its own messages: others are counted and dropped
badn() { at 1 status --json | jq '.nodes[] | select(.id == 1) | .bad_frames'; }
b0=$(badn)
at 2 call xsource blast "1.18446744073709551615 5" --timeout 1000 >/dev/null 2>&1 & # (no ack comes: cancelled)
bl=$!
more() { [ "$(badn)" -ge $((b0 + 5)) ]; }
wait_for 50 more && [ "$(at 1 whereis a1)" = "$holder" ] &&
  ok "5 messages that are not the registry's: counted as bad ($b0 -> $(badn)), dropped, node 1 serves on" ||
  bad "bad messages to node 1's registry: bad_frames $b0 -> $(badn)"
wait $bl
nsources() { [ "$(at 1 ps --json | jq '[.processes[] | select(.type == "xsource")] | length')" = 0 ]; }
wait_for 50 nsources || bad "the blast to the registry did not end"

# --- drain: the named processes of node 2 move, their names with them
on2=$(at 1 names | awk '$2 ~ /^2\./ { print $1; exit }')
p2=$(at 1 whereis "$on2")
out=$(at 1 drain --node 2 --timeout 10000 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(at 3 whereis "$on2")" = "$p2" ] && w=$(where "$p2") && [ -n "$w" ] && [ "$w" != 2 ] &&
  ok "drain of node 2: nothing left, $on2 ($p2) resolves alike and lives on node $w" ||
  bad "drain of node 2: rc=$rc '$out'; $on2 -> '$(at 3 whereis "$on2" 2>&1)' on node '$(where "$p2")'"
at 1 undrain --node 2 >/dev/null 2>&1

# --- kill -9 of a node: names held elsewhere resolve through the copies
for i in $(seq 30); do at 1 spawn msink collect 100 --on $((i % 2 + 1)) --name "k$i" >"$dir/k$i" 2>&1; done
kill -9 "${pids[2]}"
down3() { [ "$(at 1 status --json | jq -r '.nodes[] | select(.id == 3) | .state')" = down ]; }
wait_for 100 down3 || bad "node 3 is not seen down"
sleep 0.3 # (a registry looks at the membership every 100 ms)
right=0
for i in $(seq 30); do
  [ "$(at 1 whereis "k$i" 2>/dev/null)" = "$(cat "$dir/k$i")" ] && [ "$(at 2 whereis "k$i" 2>/dev/null)" = "$(cat "$dir/k$i")" ] &&
    right=$((right + 1))
done
[ $right -eq 30 ] && ok "node 3 killed: all 30 names held on nodes 1 and 2 resolve alike on both" ||
  bad "node 3 killed: $right of 30 names resolve"
wait_for 50 gone a3 1 && ok "node 3 killed: the name it held (a3) is gone" || bad "a3: $(at 1 whereis a3 2>&1)"
out=$(at 2 spawn msink collect 100 --name a3 2>&1) && ok "its name is free again: $out" || bad "a3 again: $out"

# --- node 3 back (a new run): the names it now owns move to it, all resolve
start 3 1 && wait_for 100 up 3 || bad "node 3 back"
sleep 0.3
right=0
for i in $(seq 30); do
  [ "$(at 3 whereis "k$i" 2>/dev/null)" = "$(cat "$dir/k$i")" ] && [ "$(at 1 whereis "k$i" 2>/dev/null)" = "$(cat "$dir/k$i")" ] &&
    right=$((right + 1))
done
[ $right -eq 30 ] && ok "node 3 back: all 30 names resolve alike from nodes 3 and 1 (those it owns now moved to it)" ||
  bad "node 3 back: $right of 30 names resolve"
out=$(at 3 spawn msink collect 100 --name k7 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "held by $(cat "$dir/k7")" <<<"$out" && ok "node 3 back: a taken name is still refused" ||
  bad "node 3 back, k7 again: rc=$rc $out"
finish
