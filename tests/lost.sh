#!/usr/bin/env bash
# lost.sh - awaited children lost with a node that dies (docs/guarantees.md,
# SN_YIELD_AWAIT / SN_YIELD_MONITOR): a parent on node 1 spawns children
# (half with SN_YIELD_AWAIT, half with SN_YIELD_MONITOR) of many CPU steps;
# nodes 2 and 3 steal some; node 3 is killed with kill -9 while children
# it holds still run. Every child gets exactly one
# outcome at the parent: its result, or nodedown for each one that was on
# node 3 (as many as node 1 says it reported for node 3), none missing,
# none twice (the parent waits a while after the last to see a second).
# Node 3 restarts between rounds (a new run). Then the second hop: node 3,
# a steal partner of node 2 only, joins once node 2 has stolen and takes
# children from it (node 2 tells node 1 where they went: AWAITED); killed
# with kill -9, as in the first round. Then a freeze: node 3 stopped with
# SIGSTOP until node 1 declares it down, then resumed: its children live on, and their results,
# come after all, are dropped (or, stolen back by node 1, they run
# unawaited): still one outcome each.
# Args: $1 schednode, $2 plugins dir. SN_LOST_ROUNDS (default 1) kill rounds.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$1 PLUG=$2
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=${SN_LOST_ROUNDS:-1}
N=${SN_LOST_KIDS:-96}
WORK="10 3" # steps, ms of CPU each

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
node_flags=(-w 1 --insecure --log-level debug --heartbeat-ms 100 --down-after-ms 800 --load "$PLUG/plugin_lost.so")
field() { sed -n "s/.*[ (]$1[= ]\([0-9]*\).*/\1/p" <<<" $2"; }
# how many children node 1 reported as nodedown for node 3 (its log), in all
reported() { grep -o "node 3 is down: [0-9]* awaited" "$dir/node1.log" | awk '{s += $5} END {print s + 0}'; }
stolen_by_3() { grep -q "processes from node [12] run here now" "$dir/node3.log"; }

# (node 1 has type vtype in version 1: a node 3 with version 2 is no steal
# partner of node 1, only of node 2, which has no vtype)
start 1 "" --load "$PLUG/plugin_version1.so" && start 2 1 && start 3 1 || { bad "three nodes"; echo "$pass passed, $fail failed"; exit 1; }
wait_for 100 sees_up 1 1 2 3 || bad "the view did not converge: $(view 1)"

# checks one parent's result ($1) against what node 1 reported ($2: before)
check() {
  local out=$1 before=$2 what=$3 n normal nd missing twice other rep
  n=$(field n "$out") normal=$(field normal "$out") nd=$(field nodedown "$out")
  missing=$(field missing "$out") twice=$(field twice "$out") other=$(field other "$out")
  rep=$(($(reported) - before))
  if [ "$n" = "$N" ] && [ "$missing" = 0 ] && [ "$twice" = 0 ] && [ "$other" = 0 ] &&
    [ "$((normal + nd))" = "$N" ]; then
    ok "$what: every child had exactly one outcome: $out"
  else
    bad "$what: $out"
  fi
  [ "$nd" -gt 0 ] && [ "$(field await "$out")" -gt 0 ] && [ "$(field monitor "$out")" -gt 0 ] &&
    ok "$what: nodedown for $nd children (both kinds), as many as node 1 reported for node 3 ($rep)" ||
    bad "$what: nodedown $nd (node 1 reported $rep for node 3): $out"
  [ "$nd" = "$rep" ] || bad "$what: node 1 reported $rep for node 3, the parent got $nd"
}

# one round: a parent on node 1, node 3 killed once it holds children
for round in $(seq "$ROUNDS"); do
  before=$(reported)
  : >"$dir/out"
  call call --connect "$(ep 1)" lpar run "$N $WORK 60000" >"$dir/out" 2>&1 &
  job=$!
  if wait_for 300 stolen_by_3; then
    sleep 0.2
    kill -9 "$node_pid_3"
    wait "$node_pid_3" 2>/dev/null
  else
    bad "round $round: node 3 stole nothing"
    kill -9 "$node_pid_3"
  fi
  wait_for 600 bash -c "! kill -0 $job 2>/dev/null" || bad "round $round: the parent did not finish"
  wait "$job"
  check "$(cat "$dir/out")" "$before" "kill -9, round $round"
  kill -0 "$node_pid_1" && kill -0 "$node_pid_2" || bad "a node died: $(tail -5 "$dir"/node[12].log)"
  : >"$dir/node3.log" # the next run's log
  start 3 1 || { bad "node 3 restarts"; break; }
  wait_for 100 sees_up 1 1 2 3 || bad "round $round: node 3 did not rejoin: $(view 1)"
done

# the second hop: node 3 leaves; a parent's children spread to node 2
# first, then node 3 (a new run, a steal partner of node 2 only) joins and
# steals from node 2, which tells node 1 where they went (AWAITED); node 3
# is killed with kill -9, as in the first round.
kill -TERM "$node_pid_3"
wait "$node_pid_3" 2>/dev/null
: >"$dir/node3.log"
before=$(reported)
took2() { grep -c "processes from node 1 run here now" "$dir/node2.log"; }
t0=$(took2)
call call --connect "$(ep 1)" lpar run "$N $WORK 60000" >"$dir/out" 2>&1 &
job=$!
stole2() { [ "$(took2)" -gt "$t0" ]; }
wait_for 300 stole2 || bad "second hop: node 2 stole nothing"
start 3 1 --load "$PLUG/plugin_version2.so" || bad "node 3 restarts"
wait_for 300 stolen_by_3 || bad "second hop: node 3 stole nothing"
sleep 0.2
kill -9 "$node_pid_3"
wait "$node_pid_3" 2>/dev/null
via2=$(grep -o "[0-9]* processes from node 2 run here now" "$dir/node3.log" | awk '{s += $1} END {print s + 0}')
from1=$(grep -c "processes from node 1 run here now" "$dir/node3.log")
[ "$via2" -gt 0 ] && [ "$from1" = 0 ] && ok "second hop: node 3 took $via2 children from node 2, none from node 1" ||
  bad "second hop: node 3 took $via2 from node 2, $from1 batches from node 1"
wait_for 600 bash -c "! kill -0 $job 2>/dev/null" || bad "second hop: the parent did not finish"
wait "$job"
check "$(cat "$dir/out")" "$before" "second hop"
: >"$dir/node3.log"
start 3 1 || bad "node 3 restarts"
wait_for 100 sees_up 1 1 2 3 || bad "node 3 did not rejoin: $(view 1)"

# a freeze: node 3 stopped until node 1 declares it down, then resumed
before=$(reported)
dropped0=$(grep -c "after its parent had nodedown: \(dropped\|unawaited\)" "$dir/node1.log")
# (the parent waits after its last outcome until told to end: for the late results)
call call --connect "$(ep 1)" lpar run "$N $WORK 90000 90000" >"$dir/out" 2>&1 &
job=$!
lpar_pid() { call ps --json --node 1 --connect "$(ep 1)" | jq -r '.processes[] | select(.type == "lpar") | .pid'; }
par=
have_par() { par=$(lpar_pid) && [ -n "$par" ]; }
wait_for 100 have_par || bad "freeze: no parent in ps on node 1"
wait_for 300 stolen_by_3 || bad "freeze: node 3 stole nothing"
sleep 0.2
kill -STOP "$node_pid_3"
down_seen() { [ "$(reported)" -gt "$before" ]; }
wait_for 150 down_seen || bad "freeze: node 1 did not report node 3's children"
sleep 0.3
kill -CONT "$node_pid_3"
# node 3's children run on (there, or stolen again) and end while the
# parent still waits: a result reaching node 1 is dropped there, one that
# node 1 steals back runs unawaited (the parent had nodedown for them)
late_lines() { grep -c "after its parent had nodedown: \(dropped\|unawaited\)" "$dir/node1.log"; }
kids_left() { call ps --json --connect "$(ep 1)" | jq '[.processes[] | select(.type == "lkid")] | length'; }
no_kids() { [ "$(kids_left)" = 0 ]; }
wait_for 600 no_kids || bad "freeze: $(kids_left) children still run after 60 s"
late=$(($(late_lines) - dropped0))
[ "$late" -gt 0 ] && ok "freeze: $late children of node 3 lived on, their late results dropped or unawaited" ||
  bad "freeze: no child of node 3 lived on past its nodedown"
call send --connect "$(ep 1)" "$par" end >/dev/null || bad "freeze: cannot end the parent $par"
wait_for 300 bash -c "! kill -0 $job 2>/dev/null" || bad "freeze: the parent did not finish"
wait "$job"
check "$(cat "$dir/out")" "$before" "freeze"
wait_for 150 sees_up 1 1 2 3 && ok "node 3 is up again after the freeze" || echo "     (node 3: $(view 1))"

[ -n "${SN_LOST_KEEP:-}" ] && cp -r "$dir" "$SN_LOST_KEEP"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
