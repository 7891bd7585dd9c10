#!/usr/bin/env bash
# holes.sh - one scenario for each hole issue 14 found in the delivery
# promises, with real schednode processes on 127.0.0.1 (one worker each):
#   superseded  a node frozen until declared down, whose id a new run takes
#               over, is told it is out when it resumes: it exits (status 3)
#               saying why, and every member sees the new run up.
#   monitor     a process monitored after it moved off its home node, whose
#               new node is kill -9'd: the watcher gets exactly one DOWN
#               (nodedown); once that node restarts, the home node drops its
#               forwarding entries toward the old run.
#   hop         messages to processes that moved, passing through their home
#               node, when the node they moved to is frozen and then killed:
#               every message is delivered or comes back to its sender.
#   frozen      a node holding receivers frozen past the down timeout while
#               senders stream to them: no stream is reordered or duplicated
#               when it resumes, and every message is delivered or returned.
# The last three use the chaos test's plugin and checker (tests/chaos.sh,
# tests/plugins/plugin_chaos.c). Args: $1 schednode, $2 plugins dir.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$1 PLUG=${2:-}
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3 4 5; do port[$n]=$(free_port); done
ep() { echo "tcp://127.0.0.1:${port[$1]}"; }
call() { timeout 60 "$SN" --timeout 30000 --insecure "$@"; }
# start NAME NODE-ID PORT-SLOT SEED-SLOT [flags]: a node, logging to $dir/NAME.log
start() {
  local name=$1 id=$2 slot=$3 seed=$4
  shift 4
  "$SN" -n "$id" -w 1 --listen "$(ep "$slot")" --insecure ${seed:+--join "$(ep "$seed")"} "$@" \
    >>"$dir/$name.log" 2>&1 &
  pids+=($!); eval "pid_$name=$!"
  wait_for 150 grep -q "up: " "$dir/$name.log" || { echo "$name did not come up:"; cat "$dir/$name.log"; return 1; }
}
# state NODE-SLOT ID: the state node at slot sees node ID in
state() { call status --json --connect "$(ep "$1")" 2>/dev/null | jq -r ".nodes[] | select(.id == $2) | .state"; }
endpoint_of() { call status --json --connect "$(ep "$1")" 2>/dev/null | jq -r ".nodes[] | select(.id == $2) | .endpoint"; }
alive() { kill -0 "$1" 2>/dev/null; }
stop_all() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }

# --- superseded: the same node id, two runs
superseded() {
  start n1 1 1 "" && start n2 2 2 1 && start n3 3 3 1 || { bad "superseded: three nodes"; return; }
  kill -STOP "$pid_n3"
  three_down() { [ "$(state 1 3)" = down ] && [ "$(state 2 3)" = down ]; }
  wait_for 100 three_down && ok "superseded: node 3 frozen, nodes 1 and 2 declare it down" ||
    bad "superseded: frozen node 3 not down: $(state 1 3) $(state 2 3)"
  start n3b 3 4 1 || { bad "superseded: a new run of node 3 on another port"; kill -CONT "$pid_n3"; return; }
  new_up() { [ "$(state 1 3)" = up ] && [ "$(endpoint_of 1 3)" = "$(ep 4)" ]; }
  wait_for 50 new_up && ok "superseded: the new run of node 3 (at $(ep 4)) is a member" ||
    bad "superseded: new run not seen: $(state 1 3) $(endpoint_of 1 3)"
  kill -CONT "$pid_n3"
  local t0=$SECONDS
  gone() { ! alive "$pid_n3"; }
  if wait_for 150 gone; then
    wait "$pid_n3"; local rc=$?
    [ "$rc" = 3 ] && grep -q "out of the cluster" "$dir/n3.log" &&
      ok "superseded: the old run, resumed, was told it is out and exited 3 within $((SECONDS - t0)) s: $(grep -o 'this run of node 3 is out.*' "$dir/n3.log" | head -1 | cut -c1-160)" ||
      bad "superseded: old run exited $rc: $(tail -3 "$dir/n3.log")"
  else
    bad "superseded: the old run of node 3 still runs 15 s after SIGCONT: $(tail -3 "$dir/n3.log")"
  fi
  converged() {
    local v
    for s in 1 2 4; do
      v=$(call status --json --connect "$(ep "$s")" 2>/dev/null | jq -c '[.nodes[] | select(.state == "up") | .id] | sort')
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

superseded

for f in "$dir"/*.log; do
  if grep -qE "AddressSanitizer|runtime error|ThreadSanitizer|Assertion" "$f"; then
    bad "sanitizer or assertion report in $(basename "$f")"; grep -E -m5 -A5 "AddressSanitizer|runtime error|ThreadSanitizer|Assertion" "$f"
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
