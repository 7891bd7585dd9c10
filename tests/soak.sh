#!/usr/bin/env bash
# soak.sh - a bounded soak of three real nodes: rounds of imbalanced loads
# (10,000 short processes, or 1,000 of 1 ms that get stolen across nodes;
# each completed exactly once) and
# cross-node message streams (in order), a steady stream between nodes 1
# and 2 the whole time, and node 3 restarted every few rounds (SIGTERM and
# kill -9 in turn). Asserts: every round completes (no stall: each call is
# bounded), no process is lost or run twice and no message is lost between
# the nodes that stayed up, node 1's RSS is flat (end vs. after warm-up),
# and every node exits 0 on SIGTERM at the end (in the ASan build that
# includes LeakSanitizer: a leak makes the exit code non-zero).
# Args: $1 schednode. SN_SOAK_SECONDS (default 60) sets the length: e.g.
# SN_SOAK_SECONDS=7200 tests/soak.sh build/schednode for two hours.
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
secs=${SN_SOAK_SECONDS:-60}
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
# ASan keeps up to 256 MB of freed memory in quarantine by default, which
# would read as RSS growth: 16 MB is plenty to catch a use after free
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=16"

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
start_run() { # node-id [seed]: a new log per run (the wait reads it)
  local n=$1 seed=${2:-}
  up_wait=300 launch "$n" "$dir/node$n.$((++runs)).log" --load "$DEMO" -n "$n" -w 2 --listen "$(ep "$n")" --insecure \
    ${seed:+--join "$(ep "$seed")"}
}
runs=0
call_s=300 call_ms=240000
ups_are() { [ "$(up_count 1)" = "$1" ]; } # node 1 sees exactly $1 nodes up

start_run 1 && start_run 2 1 && start_run 3 1 || { bad "three nodes"; echo "$pass passed, $fail failed"; exit 1; }
wait_for 100 ups_are 3 || bad "cluster of 3 did not form"

# the steady stream: node 1 -> node 2, 2,000 messages at a time, until told to stop
(
  k=0
  while [ ! -f "$dir/stop" ]; do
    s=$(call spawn --connect "$(ep 2)" xsink collect 2000) || { echo "spawn failed" >>"$dir/steady"; break; }
    call call --connect "$(ep 1)" xsource blast "$s 2000" >>"$dir/steady" 2>&1
    k=$((k + 1))
  done
) &
steady=$!

end=$((SECONDS + secs))
round=0 procs=0 restarts=0 warm_rss=""
while [ $SECONDS -lt $end ]; do
  round=$((round + 1))
  # migratable processes spawned on node 1 (or 2), stolen by the others:
  # 10,000 that end at once, or 1,000 of 1 ms each (those move: stealing
  # and its forwarding entries are soaked too)
  at=$((1 + round % 2)) np=$((round % 2 ? 10000 : 1000)) ms=$((round % 2 ? 0 : 1))
  out=$(call call --connect "$(ep "$at")" spread run "$np $ms spin" 2>&1)
  if grep -q "^$np done:" <<<"$out" && ! grep -q missing <<<"$out"; then
    procs=$((procs + np))
  else
    bad "round $round: spread on node $at: $out"
    break
  fi
  # a stream node 2 -> node 1 (both stay up)
  s=$(call spawn --connect "$(ep 1)" xsink collect 20000)
  out=$(call call --connect "$(ep 2)" xsource blast "$s 20000" 2>&1)
  [ "$out" = "20000 messages in order" ] || { bad "round $round: stream 2 -> 1: $out"; break; }
  # warmed up a third of the way in: RSS from then to the end must stay flat
  [ -z "$warm_rss" ] && [ $((end - SECONDS)) -le $((secs * 2 / 3)) ] && warm_rss=$(rss_kb "$node_pid_1")
  # every third round node 3 restarts: gracefully, then with kill -9
  if [ $((round % 3)) = 0 ]; then
    restarts=$((restarts + 1))
    if [ $((restarts % 2)) = 1 ]; then
      kill -TERM "$node_pid_3"; wait "$node_pid_3"; rc=$?
      [ $rc -eq 0 ] || bad "node 3 exit $rc on SIGTERM (round $round)"
    else
      kill -9 "$node_pid_3"; wait "$node_pid_3" 2>/dev/null
      # the others see it down before it comes back (a new run then)
      wait_for 100 ups_are 2 ||
        bad "node 3 not seen down after kill -9: $(call status --json --connect "$(ep 1)" | jq -c '[.nodes[] | [.id, .state]]')"
    fi
    start_run 3 1 || { bad "node 3 restart (round $round)"; break; }
    wait_for 100 ups_are 3 || bad "node 3 not back up (round $round)"
  fi
done
touch "$dir/stop"
wait $steady
final_rss=$(rss_kb "$node_pid_1")

[ "$fail" = 0 ] && ok "$round rounds in ${secs} s: $procs processes each done exactly once ($(call status --json --connect "$(ep 1)" | jq '.nodes[0].migrated') moved from node 1), $((round * 20000)) messages in order, node 3 restarted $restarts times"
n_steady=$(grep -c "^2000 messages in order$" "$dir/steady")
n_bad=$(grep -vc "^2000 messages in order$" "$dir/steady")
[ "$n_steady" -ge 1 ] && [ "$n_bad" = 0 ] && ok "steady stream node 1 -> node 2: $n_steady streams of 2000, all in order" ||
  bad "steady stream: $n_steady good, $n_bad bad: $(grep -v "^2000 messages in order$" "$dir/steady" | head -3)"
if [ -n "$warm_rss" ]; then
  # flat: at most 25% and 32 MiB above the warm-up figure
  limit=$((warm_rss * 5 / 4 + 32768))
  [ "$final_rss" -le "$limit" ] && ok "node 1 RSS flat: $warm_rss kB after warm-up, $final_rss kB at the end" ||
    bad "node 1 RSS grew: $warm_rss kB -> $final_rss kB"
else
  echo "     (fewer than 2 rounds: no RSS comparison)"
fi
for n in 1 2 3; do
  eval "p=\$node_pid_$n"
  kill -TERM "$p"; wait "$p"; rc=$?
  [ $rc -eq 0 ] && ok "node $n exits 0 on SIGTERM (no leak report)" || { bad "node $n exit $rc"; tail -20 "$(ls -t "$dir"/node$n.*.log | head -1)"; }
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
