#!/usr/bin/env bash
# promises.sh - the delivery promises (docs/guarantees.md) under one fault
# at a time, each as a scenario with real schednode processes on 127.0.0.1
# (one worker each):
#   superseded  a node frozen until declared down, whose id a new run takes
#               over, is told it is out when it resumes: it exits (status 3)
#               saying why, and every member sees the new run up.
#   monitor     processes monitored after they moved off their home node,
#               whose new node is kill -9'd (and restarted): the watcher
#               gets exactly one DOWN for each (nodedown or noproc; normal
#               for those that stayed and are stopped), and the home node
#               drops its forwarding entries toward the dead run.
#   freeze      (order after SIGSTOP) a stream from node 2 to sinks on
#               node 3, which is frozen past the down timeout three times:
#               what node 2 returned as nodedown may still arrive when node
#               3 resumes, but never after a later message of the stream.
#   flush       (no silent loss after a steal) sinks homed on a loaded
#               node 1, streamed to from node 2, are stolen by node 3,
#               which stops itself (SN_FAULT=stall-flush, relay/locate.c;
#               not in Release builds) as it is about to answer node 2's
#               flush (node 2 learned the sink moved and switches its
#               route), and is resumed 3.5 s later (past the 3 s a flush
#               waits, short of the down timeout): every message is
#               delivered or returned, in order.
# freeze fails if a monitor gets its DOWN twice; flush if a sink that
# ended normally gets noproc or nodedown, a message is reordered or a DOWN
# comes twice. SN_PROMISES="freeze flush" runs only those. Both record
# what each process sees (plugin_chaos.so) and check it with the checker
# of tests/chaos.sh (no message twice, order, none missing).
# Random faults are tests/chaos.sh's.
# Args: $1 schednode, $2 plugins dir (plugin_chaos.so).
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$1 PLUG=${2:-}
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3 4 5; do port[$n]=$(free_port); done
call_s=60 call_ms=30000
# start_named NAME NODE-ID PORT-SLOT SEED-SLOT [flags]: a node, logging to
# $dir/NAME.log, its PID in node_pid_NAME
start_named() {
  local name=$1 id=$2 slot=$3 seed=$4
  shift 4
  up_wait=150 launch "$name" "$dir/$name.log" --load "$DEMO" -n "$id" -w 1 --listen "$(ep "$slot")" --insecure \
    ${seed:+--join "$(ep "$seed")"} "$@"
}
endpoint_of() { status "$1" | jq -r ".nodes[] | select(.id == $2) | .endpoint"; }
alive() { kill -0 "$1" 2>/dev/null; }
stop_all() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }

# --- superseded: the same node id, two runs
superseded() {
  start_named n1 1 1 "" && start_named n2 2 2 1 && start_named n3 3 3 1 || { bad "superseded: three nodes"; return; }
  kill -STOP "$node_pid_n3"
  three_down() { [ "$(state_of 1 3)" = down ] && [ "$(state_of 2 3)" = down ]; }
  wait_for 100 three_down && ok "superseded: node 3 frozen, nodes 1 and 2 declare it down" ||
    bad "superseded: frozen node 3 not down: $(state_of 1 3) $(state_of 2 3)"
  start_named n3b 3 4 1 || { bad "superseded: a new run of node 3 on another port"; kill -CONT "$node_pid_n3"; return; }
  new_up() { [ "$(state_of 1 3)" = up ] && [ "$(endpoint_of 1 3)" = "$(ep 4)" ]; }
  wait_for 50 new_up && ok "superseded: the new run of node 3 (at $(ep 4)) is a member" ||
    bad "superseded: new run not seen: $(state_of 1 3) $(endpoint_of 1 3)"
  kill -CONT "$node_pid_n3"
  local t0=$SECONDS
  gone() { ! alive "$node_pid_n3"; }
  if wait_for 150 gone; then
    wait "$node_pid_n3"; local rc=$?
    [ "$rc" = 3 ] && grep -q "out of the cluster" "$dir/n3.log" &&
      ok "superseded: the old run, resumed, was told it is out and exited 3 within $((SECONDS - t0)) s: $(grep -o 'this run of node 3 is out.*' "$dir/n3.log" | head -1 | cut -c1-160)" ||
      bad "superseded: old run exited $rc: $(tail -3 "$dir/n3.log")"
  else
    bad "superseded: the old run of node 3 still runs 15 s after SIGCONT: $(tail -3 "$dir/n3.log")"
  fi
  converged() {
    local v
    for s in 1 2 4; do
      v=$(view "$s")
      [ "$v" = "[1,2,3]" ] || return 1
    done
    [ "$(endpoint_of 2 3)" = "$(ep 4)" ]
  }
  wait_for 100 converged && ok "superseded: nodes 1, 2 and the new 3 all see 1, 2, 3 up (3 at its new endpoint)" ||
    bad "superseded: views did not converge"
  # the new run works: a message to a process on it
  local sink out
  sink=$(call spawn --connect "$(ep 4)" xsink collect 100)
  out=$(call call --connect "$(ep 1)" xsource blast "$sink 100" 2>&1)
  [ "$out" = "100 messages in order" ] && ok "superseded: node 1 -> the new node 3: $out" || bad "superseded: send: $out"
  stop_all
}

# --- monitor: processes monitored after they moved, lost with their node
monitor() {
  [ -f "$PLUG/plugin_chaos.so" ] || { bad "monitor: no plugin_chaos.so in $PLUG"; return; }
  local log=$dir/mon; mkdir -p "$log"
  local L=(--load "$PLUG/plugin_chaos.so")
  export SN_CHAOS_LOG=$log
  start_named m1 1 1 "" "${L[@]}" && start_named m2 2 2 1 --no-steal "${L[@]}" && start_named m3 3 3 1 "${L[@]}" ||
    { bad "monitor: three nodes"; return; }
  sleep 0.5 # types by gossip
  # 12 sinks on node 1, each 3 ms of CPU a message: node 1 cannot keep up, node 3 steals
  local sinks=() i
  for i in $(seq 12); do sinks+=("$(call spawn --connect "$(ep 1)" csink collect "3000")"); done
  local src; src=$(call spawn --connect "$(ep 2)" csource send "600 100 ${sinks[*]}")
  on3() { [ "$(call status --json --connect "$(ep 3)" 2>/dev/null | jq '.nodes[0].live')" -ge 2 ]; }
  if ! wait_for 200 on3; then bad "monitor: no sink moved to node 3"; stop_all; return; fi
  # every message taken: the sinks are idle and stay where they are
  all_in() { [ "$(cat "$log"/*.log | grep -c "^R ")" -ge 1200 ]; }
  wait_for 300 all_in || bad "monitor: the sinks did not take their 1200 messages: $(cat "$log"/*.log | grep -c "^R ")"
  sleep 0.3
  local w; w=$(call spawn --connect "$(ep 2)" cwatch watch "0 ${sinks[*]}")
  wait_for 50 test "$(cat "$log"/*.log | grep -c "^W $w ")" -ge 12
  # the requests reach the nodes holding the sinks, which tell node 2
  # where each monitor is held (a node that dies before that is reported
  # as nodedown for the monitors it was asked for: not confirmed)
  sleep 1
  local moved; moved=$(call status --json --connect "$(ep 3)" | jq '.nodes[0].live')
  kill -9 "$node_pid_m3"
  # a new run of node 3 comes back, so the old run's PIDs and paths are gone for good
  start_named m3b 3 3 1 "${L[@]}" || bad "monitor: node 3 restarted"
  for s in "${sinks[@]}"; do call send --connect "$(ep 1)" "$s" stop >/dev/null 2>&1; done
  downs() { [ "$(cat "$log"/*.log | grep -c "^D $w ")" -ge 12 ]; }
  wait_for 150 downs
  local nd nn total dup
  total=$(cat "$log"/*.log | grep -c "^D $w ")
  nd=$(cat "$log"/*.log | grep "^D $w " | grep -cE " (nodedown|noproc) ")
  nn=$(cat "$log"/*.log | grep "^D $w " | grep -c " normal ")
  dup=$(cat "$log"/*.log | grep "^D $w " | awk '{print $3}' | sort | uniq -d | wc -l)
  [ "$total" = 12 ] && [ "$dup" = 0 ] && [ "$nd" = "$moved" ] && [ "$nn" = $((12 - moved)) ] &&
    ok "monitor: $moved sinks had moved to node 3 when monitored and died with it: each watcher monitor got exactly one DOWN ($nd nodedown/noproc, $nn normal)" ||
    { bad "monitor: $total DOWNs for 12 sinks ($dup twice), $nd nodedown/noproc for $moved on node 3, $nn normal: $(grep -h "^D $w " "$log"/*.log | cut -d' ' -f3,4 | tr '\n' ' ')"
      for s in "${sinks[@]}"; do echo "     $s: last on node $(cat "$log"/*.log | awk -v s="$s" '($1 == "R" || $1 == "M") && $2 == s {print $7, $6}' | sort -n | tail -1 | cut -d' ' -f2), DOWN $(grep -h "^D $w $s " "$log"/*.log | cut -d' ' -f4)"; done; }
  fwd() { call status --json --connect "$(ep 1)" 2>/dev/null | jq '.nodes[0].forwarding'; }
  no_fwd() { [ "$(fwd)" = 0 ]; }
  wait_for 50 no_fwd && ok "monitor: node 1 dropped its forwarding entries toward node 3's old run" ||
    bad "monitor: node 1 still holds $(fwd) forwarding entries"
  unset SN_CHAOS_LOG
  stop_all
}

# --- freeze and flush: streams of numbered messages under one kind of fault
# stream NAME: set-up and faults by name (see the header); the checker of
# chaos.sh reads what the processes logged
stream() {
  local name=$1
  [ -f "$PLUG/plugin_chaos.so" ] || { bad "$name: no plugin_chaos.so in $PLUG"; return; }
  local log=$dir/$name; mkdir -p "$log"
  local meta=$log/chaos.meta
  echo "SEED 0" >"$meta"
  export SN_CHAOS_LOG=$log
  local L=(--load "$PLUG/plugin_chaos.so") sinks=() srcs=() i k
  local frozen fnode fms rounds
  if [ "$name" = freeze ]; then
    L+=(--no-steal)
    start_named "${name}1" 1 1 "" "${L[@]}" && start_named "${name}2" 2 2 1 "${L[@]}" && start_named "${name}3" 3 3 1 "${L[@]}" ||
      { bad "$name: three nodes"; stop_all; return; }
    sleep 0.5
    for i in 1 2 3 4; do sinks+=("$(call spawn --connect "$(ep 3)" csink collect 0)"); done
    srcs+=("$(call spawn --connect "$(ep 2)" csource send "800 0 ${sinks[*]}")")
    frozen=$(eval echo "\$node_pid_${name}3") fnode=3 fms=2900 rounds=3
  else
    L+=(--down-after-ms 10000)
    start_named "${name}1" 1 1 "" "${L[@]}" && start_named "${name}2" 2 2 1 --no-steal "${L[@]}" &&
      SN_FAULT=stall-flush start_named "${name}3" 3 3 1 "${L[@]}" || { bad "$name: three nodes"; stop_all; return; }
    sleep 0.5
    for i in $(seq 8); do sinks+=("$(call spawn --connect "$(ep 1)" csink collect "3000")"); done
    for i in 1 2; do srcs+=("$(call spawn --connect "$(ep 2)" csource send "150 0 ${sinks[*]}")"); done
    fms=3500 rounds=0
  fi
  for s in "${sinks[@]}"; do echo "SINK $s" >>"$meta"; done
  # the watcher on a node with little to do, so that it monitors at once
  local wnode=1; [ "$name" = flush ] && wnode=2
  local w; w=$(call spawn --connect "$(ep $wnode)" cwatch watch "0 ${sinks[*]}")
  for k in $(seq $rounds); do # freeze: the test freezes node 3
    sleep 1.5
    echo "FAULT long-freeze $fnode $fms $(date +%s%6N)" >>"$meta"
    kill -STOP "$frozen"; sleep "$(printf '%d.%03d' $((fms / 1000)) $((fms % 1000)))"; kill -CONT "$frozen"
  done
  local stalls=0 t_end=$((SECONDS + 15)) n p
  resume_stalled() { # flush: node 2 or 3 stopped itself; resume it 3.5 s later
    for n in 2 3; do
      p=$(eval echo "\$node_pid_${name}$n")
      [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" = T ] || continue
      echo "FAULT long-freeze $n $fms $(date +%s%6N)" >>"$meta"
      stalls=$((stalls + 1)); sleep 3.5; kill -CONT "$p"
    done
  }
  while [ "$name" = flush ] && [ $SECONDS -lt $t_end ]; do resume_stalled; sleep 0.05; done # 15 s of stream
  if [ "$name" = flush ]; then # from now on a node that stops itself is resumed at once, to the end
    local p2 p3
    p2=$(eval echo "\$node_pid_${name}2") p3=$(eval echo "\$node_pid_${name}3")
    (while kill -CONT "$p2" "$p3" 2>/dev/null; do sleep 0.1; done) &
    pids+=($!)
  fi
  sleep 2
  for s in "${srcs[@]}"; do call send --connect "$(ep "${srcs[0]%%.*}")" "$s" stop >/dev/null 2>&1; done
  # every message sent delivered or returned (at most 60 s), then quiet
  # (no new line for 2 s, at most 30 s more)
  settled() { [ "$(cat "$log"/*.log | grep -c "^[RE] ")" -ge "$(cat "$log"/*.log | grep -c "^S ")" ]; }
  wait_for 600 settled
  local prev=-1 cur still=0
  for _ in $(seq 60); do
    [ "$name" = flush ] && resume_stalled
    cur=$(cat "$log"/*.log | wc -l)
    if [ "$cur" = "$prev" ]; then still=$((still + 1)); [ $still -ge 4 ] && break; else still=0; fi
    prev=$cur; sleep 0.5
  done
  [ "$name" = flush ] && { resume_stalled; kill -CONT "$(eval echo "\$node_pid_${name}2")" "$(eval echo "\$node_pid_${name}3")"; }
  for s in "${sinks[@]}"; do
    e=$(call send --connect "$(ep 1)" "$s" stop 2>&1); echo "STOP $s $? $e" >>"$meta"
  done
  downs() { [ "$(cat "$log"/*.log | grep -c "^D $w ")" -ge ${#sinks[@]} ]; }
  wait_for 100 downs
  sleep 0.5
  echo "SHUTDOWN $(date +%s%6N)" >>"$meta"
  local out nd nflush
  out=$(bash "$(dirname "$0")/chaos.sh" --check "$log")
  nd=$(grep -h "^E " "$log"/*.log | grep -c " nodedown ")
  nflush=$(cat "$dir/${name}"*.log | grep -c "no flush answer")
  if [ "$name" = flush ] && [ $stalls = 0 ]; then
    ok "$name: skipped: node 3 never stopped itself (a Release build has no SN_FAULT)"
  elif grep -q "chaos-check: PASS" <<<"$out"; then
    ok "$name: $(grep -o '[0-9]* messages sent, [0-9]* delivered' <<<"$out"), $nd returned nodedown, $(grep -c "^M " <(cat "$log"/*.log)) moves, $nflush flushes that timed out ($stalls stalls): none twice, none out of order, none missing"
  else
    bad "$name: the checker found violations:"; echo "$out" | sed 's/^/     /'
  fi
  unset SN_CHAOS_LOG
  stop_all
}

for scenario in ${SN_PROMISES:-superseded monitor freeze flush}; do
  case $scenario in freeze|flush) stream "$scenario" ;; *) "$scenario" ;; esac
done

for f in "$dir"/*.log; do
  if grep -qE "AddressSanitizer|runtime error|ThreadSanitizer|Assertion" "$f"; then
    bad "sanitizer or assertion report in $(basename "$f")"; grep -E -m5 -A5 "AddressSanitizer|runtime error|ThreadSanitizer|Assertion" "$f"
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
