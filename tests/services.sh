#!/usr/bin/env bash
# services.sh - services across 3 real nodes (relay/services.c): `service
# add` of a movable msink; `service ls` shows it running, with its PID and
# node; kill -9 of the node running it, several rounds (the node restarted
# after each): within 3 s (measured from the kill, detection included)
# `whereis` on another node gives a PID on a surviving node and `send NAME`
# reaches it, the median and worst restart times printed; a second add of
# the same spec is accepted, another spec under the name is refused; a
# drain of its node moves it (same PID, restart count unchanged, running
# on another node); a service whose init fails backs off and shows
# `failing`; `service rm` stops the instance and forgets the service; bad
# flags exit 2 naming them. Stealing is off (--no-steal).
#
# usage: services.sh PATH/TO/schednode (SN_SERVICES_KILLS: kill rounds, default 5)
set -u
SN=$1
KILLS=${SN_SERVICES_KILLS:-5}
DEMO=$(dirname "$SN")/schednode-demo.so # msink: the demo plugin
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
node_flags=(-w 2 --insecure --no-steal ${SN_SERVICES_LOG_LEVEL:+--log-level "$SN_SERVICES_LOG_LEVEL"})
at() { local n=$1; shift; timeout 10 "$SN" --insecure --timeout 5000 --connect "$(ep "$n")" "$@"; }
quick() { local n=$1; shift; timeout 2 "$SN" --insecure --timeout 1500 --connect "$(ep "$n")" "$@" 2>/dev/null; }
up() { [ "$(at "$1" status --json 2>/dev/null | jq '[.nodes[] | select(.state == "up")] | length')" = 3 ]; }
row() { at "$1" service ls --json 2>/dev/null | jq -c --arg n "$2" '.services[] | select(.name == $n)'; }
field() { row "$1" "$2" | jq -r ".$3"; }
running_on() { [ "$(field "$1" svc state)" = running ] && [ "$(field "$1" svc node)" != null ]; }
others() { local k; for k in 1 2 3; do [ "$k" != "$1" ] && echo "$k"; done; }

start 1 "" && start 2 1 && start 3 1 || { bad "three nodes start"; finish; }
wait_for 100 up 1 && wait_for 100 up 2 && wait_for 100 up 3 && ok "three nodes up" || { bad "three nodes up"; finish; }

# --- flags
out=$(at 1 service add x msink collect 5 --restart sometimes 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--restart" <<<"$out" && ok "--restart sometimes: exit 2 naming it" || bad "--restart sometimes: $rc $out"
out=$(at 1 service ls --restart always 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--restart" <<<"$out" && ok "--restart on ls: exit 2" || bad "--restart on ls: $rc $out"
out=$(at 1 spawn msink collect 5 --within 10 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--within" <<<"$out" && ok "--within on spawn: exit 2" || bad "--within on spawn: $rc $out"
printf 'cluster\n    service = "onlyname"\n' >"$dir/bad.cfg"
out=$("$SN" --config "$dir/bad.cfg" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "cluster/service" <<<"$out" && ok "a bad service line in a config: exit 2 naming it" ||
  bad "a bad service line: $rc $out"
out=$(at 1 service frob 2>&1); rc=$?
[ $rc -eq 2 ] && ok "service frob: exit 2" || bad "service frob: $rc $out"

# --- add, ls
out=$(at 2 service add svc msink collect 1000000000 --restart always 2>&1) && ok "service add: $out" ||
  { bad "service add: $out"; finish; }
wait_for 50 running_on 1 && ok "service ls: $(row 1 svc)" || { bad "service ls: $(at 1 service ls 2>&1)"; finish; }
at 3 service add svc msink collect 1000000000 --restart always >/dev/null 2>&1 && ok "the same add again: accepted" ||
  bad "the same add again: refused"
out=$(at 3 service add svc msink collect 7 2>&1); rc=$?
[ $rc -eq 1 ] && ok "another spec under the name: exit 1 ($out)" || bad "another spec under the name: $rc $out"
pid=$(field 1 svc pid)
[ "$(at 3 whereis svc)" = "$pid" ] && ok "whereis svc on node 3: $pid" || bad "whereis svc: $(at 3 whereis svc 2>&1) vs $pid"
at 3 service ls | grep -q "^svc .* running" && ok "service ls (text)" || bad "service ls (text): $(at 3 service ls 2>&1)"

# --- kill -9 the node running it, KILLS rounds
times=()
for round in $(seq "$KILLS"); do
  victim=$(field 1 svc node)
  [ "$victim" = 1 ] && victim=$(field 2 svc node)
  old=$(field "$(others "$victim" | head -1)" svc pid)
  restarts=$(field "$(others "$victim" | head -1)" svc restarts)
  eval "vp=\$node_pid_$victim"
  t0=$(now_ms)
  kill -9 "$vp"
  ask=$(others "$victim" | head -1)
  new="" took=""
  while [ $(($(now_ms) - t0)) -lt 8000 ]; do
    p=$(quick "$ask" whereis svc)
    if [ -n "$p" ] && [ "$p" != "$old" ] && [ "${p%%.*}" != "$victim" ] && quick "$ask" send svc hello >/dev/null; then
      new=$p took=$(($(now_ms) - t0))
      break
    fi
    sleep 0.05
  done
  if [ -n "$took" ] && [ "$took" -le 3000 ]; then
    ok "kill -9 node $victim (round $round): svc runs again as $new, reached by name, in $took ms"
  else
    bad "kill -9 node $victim (round $round): '${new}' after ${took:-over 8000} ms"
    [ -n "${SN_SERVICES_LOGS:-}" ] && mkdir -p "$SN_SERVICES_LOGS" && cp "$dir"/node*.log "$SN_SERVICES_LOGS/"
  fi
  [ -n "$took" ] && times+=("$took")
  r2=$(field "$ask" svc restarts)
  [ "$r2" -gt "$restarts" ] 2>/dev/null && ok "restarts $restarts -> $r2" || bad "restarts $restarts -> $r2"
  start "$victim" "$ask" || { bad "node $victim restarts"; finish; }
  wait_for 100 up 1 && wait_for 100 up 2 && wait_for 100 up 3 || { bad "three up again"; finish; }
  wait_for 50 running_on 1 || bad "running after node $victim came back: $(row 1 svc)"
  # (a node accuses no one in its first 5 s, relay/swim.c: NEW_PERIODS; the
  # next kill waits for that, so detection is the usual 1-2 s)
  [ "$round" -lt "$KILLS" ] && sleep 5
done
if [ ${#times[@]} -gt 0 ]; then
  sorted=($(printf '%s\n' "${times[@]}" | sort -n))
  echo "restart times (ms): ${sorted[*]}; median ${sorted[$((${#sorted[@]} / 2))]}, worst ${sorted[-1]}"
fi

# --- drain: the instance moves, no restart
pid=$(field 1 svc pid) node=$(field 1 svc node) restarts=$(field 1 svc restarts)
ask=$(others "$node" | head -1) # (a draining node takes no call from a client: ls asks another)
out=$(at 1 drain --node "$node" 2>&1) || bad "drain node $node: $out"
moved() { [ "$(field "$ask" svc node)" != "$node" ] && [ "$(field "$ask" svc node)" != null ]; }
wait_for 50 moved
now_pid=$(field "$ask" svc pid) now_node=$(field "$ask" svc node) now_r=$(field "$ask" svc restarts)
[ "$now_pid" = "$pid" ] && [ "$now_node" != "$node" ] && [ "$now_r" = "$restarts" ] &&
  ok "drain of node $node: svc moved to node $now_node, same PID $pid, restarts $restarts" ||
  bad "drain of node $node: $pid@$node r$restarts -> $now_pid@$now_node r$now_r"
sleep 1.5
[ "$(field "$ask" svc pid)" = "$pid" ] && [ "$(field "$ask" svc restarts)" = "$restarts" ] &&
  ok "no restart after the move" || bad "after the move: $(row "$ask" svc)"
at 1 undrain --node "$node" >/dev/null 2>&1

# --- a failing service backs off
at 1 service add bad msink collect 0 --max-restarts 2 --within 10000 >/dev/null 2>&1 || bad "service add bad"
failing() { [ "$(field 2 bad state)" = failing ]; }
wait_for 60 failing && ok "a service whose init fails: $(row 2 bad)" || bad "bad: $(row 2 bad)"
r1=$(field 2 bad restarts)
sleep 1
r2=$(field 2 bad restarts)
[ $((r2 - r1)) -le 3 ] && ok "it backs off: restarts $r1 -> $r2 in 1 s" || bad "no backoff: $r1 -> $r2 in 1 s"

# --- rm
pid=$(field 1 svc pid)
out=$(at 3 service rm svc 2>&1) && ok "service rm svc" || bad "service rm svc: $out"
at 3 service rm bad >/dev/null 2>&1
gone() { ! at 2 whereis svc >/dev/null 2>&1 && [ -z "$(row 1 svc)" ] &&
  [ "$(at 1 ps --json | jq '[.processes[] | select(.type == "msink")] | length')" = 0 ]; }
wait_for 50 gone && ok "the instance stopped, the service forgotten" ||
  bad "after rm: whereis $(at 2 whereis svc 2>&1), ls $(row 1 svc), ps $(at 1 ps 2>&1 | grep msink)"
out=$(at 1 service rm svc 2>&1); rc=$?
[ $rc -eq 4 ] && ok "rm of no service: exit 4" || bad "rm of no service: $rc $out"

finish
