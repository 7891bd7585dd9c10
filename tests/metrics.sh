#!/usr/bin/env bash
# metrics.sh - Prometheus metrics (--metrics) of a real 3-node cluster on
# 127.0.0.1 (one worker each): every node's GET /metrics passes a strict
# check of the text format (promcheck.awk) before and after work; the
# counters move with the work (spawned, finished, steps, messages per
# peer, steals, the step-time (one step in 16) and delivery histograms,
# probe RTTs); they
# agree with `status --json`; bad flags and paths are refused.
# Args: $1 schednode.
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
HERE=$(dirname "$0")
# shellcheck source=tests/lib.sh
. "$HERE/lib.sh"

declare -A port mport
for n in 1 2 3; do port[$n]=$(free_port); mport[$n]=$(free_port); done
node_flags=(-w 1 --insecure)
node_flags_of() { echo --metrics "tcp://127.0.0.1:${mport[$1]}"; }
scrape() { curl -sf --max-time 10 "http://127.0.0.1:${mport[$1]}/metrics"; }
# the value of one sample (NAME or NAME{LABELS}) in a scrape, 0 if absent
value() { awk -v k="$2" '$1 == k { v = $2 } END { print v == "" ? 0 : v }' <<<"$1"; }
# the sum of a family's samples over every label set
total() { awk -v k="$2" 'index($1, k "{") == 1 || $1 == k { s += $2 } END { print s + 0 }' <<<"$1"; }
check_format() { # node scrape label
  local out
  if out=$(awk -f "$HERE/promcheck.awk" <<<"$2"); then
    ok "node $1: /metrics $3 is valid exposition format ($(grep -c '^# TYPE' <<<"$2") families)"
  else
    bad "node $1: /metrics $3: $out"
  fi
}
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

start 1 "" && start 2 1 && start 3 1 || { bad "three nodes"; echo "$pass passed, $fail failed"; exit 1; }
members() { [ "$(up_count 1)" = 3 ]; }
wait_for 100 members || bad "three members up"

declare -A before after
for n in 1 2 3; do
  before[$n]=$(scrape "$n") || bad "node $n: GET /metrics failed"
  check_format "$n" "${before[$n]}" "at start"
done
[ "$(value "${before[1]}" 'schednode_info{node="1",version="0.1.0"}')" = 1 ] && ok "schednode_info names node 1" ||
  bad "schednode_info: $(grep '^schednode_info' <<<"${before[1]}")"

# --- work across the nodes: 600 CPU-bound processes spawned on node 1
# (nodes 2 and 3 steal some), and 5 streams of 300 messages from node 3 to
# sinks on node 1
out=$(call call --connect "$(ep 1)" spread run "600 2 spin" 2>&1)
grep -q "^600 done:" <<<"$out" && ok "600 processes ran: $out" || bad "spread: $out"
sinks=()
for i in $(seq 5); do sinks+=("$(call spawn --connect "$(ep 1)" msink collect 300)"); done
for s in "${sinks[@]}"; do call call --connect "$(ep 3)" xsource blast "$s 300" >>"$dir/sources" 2>&1; done
[ "$(grep -c '^300$' "$dir/sources")" = 5 ] && ok "5 streams of 300 messages from node 3 to node 1" ||
  bad "streams: $(cat "$dir/sources")"
sleep 0.5 # (a probe period or two: RTTs for every peer)

for n in 1 2 3; do
  after[$n]=$(scrape "$n") || bad "node $n: GET /metrics failed"
  check_format "$n" "${after[$n]}" "after the work"
done
a=${after[1]} b=${before[1]}
m=schednode_processes_spawned_total
gt "$(value "$a" $m)" "$(($(value "$b" $m) + 599))" && ok "node 1: $m went up by 600 or more ($(value "$a" $m))" ||
  bad "node 1: $m $(value "$b" $m) -> $(value "$a" $m)"
# (finished and steps: on whichever node ran the process)
for m in schednode_processes_finished_total schednode_steps_total; do
  s0=0 s1=0
  for n in 1 2 3; do s0=$((s0 + $(value "${before[$n]}" $m))) s1=$((s1 + $(value "${after[$n]}" $m))); done
  [ $((s1 - s0)) -ge 600 ] && ok "$m of the three nodes went up by $((s1 - s0))" || bad "$m: $s0 -> $s1"
done
for n in 1 2 3; do
  steps=$(value "${after[$n]}" schednode_steps_total) timed=$(value "${after[$n]}" schednode_step_duration_seconds_count)
  # Two threads run steps: the one worker, and the relay's I/O thread (inline
  # delivery, sched/guest.c). Each times its own steps 1, 17, 33, ...:
  # with a and b steps, ceil(a/16) + ceil(b/16) of a + b, which is
  # ceil((a+b)/16) or one more.
  want=$(((steps + 15) / 16))
  gt "$steps" 0 && { [ "$timed" = "$want" ] || [ "$timed" = $((want + 1)) ]; } &&
    ok "node $n: one step in 16 timed ($timed of $steps)" || bad "node $n: $steps steps, $timed timed"
done
r13=$(value "$a" 'schednode_messages_received_total{peer="3"}') s31=$(value "${after[3]}" 'schednode_messages_sent_total{peer="1"}')
gt "$r13" 1500 && gt "$s31" 1500 && ok "messages from node 3 to node 1: node 3 sent $s31, node 1 received $r13" ||
  bad "per-peer messages: node 3 sent $s31, node 1 received $r13"
d=$(value "$a" schednode_message_delivery_seconds_count)
gt "$d" 1500 && ok "node 1 timed the delivery of $d messages from other nodes" || bad "delivery histogram count $d"
steals=$(total "$a" schednode_steals_out_total)
st=$(call status --json --connect "$(ep 1)")
gt "$steals" 0 && [ "$steals" = "$(jq '.nodes[0].steals_out' <<<"$st")" ] &&
  ok "steals: node 1 gave $steals batches (metrics = status --json)" ||
  bad "steals: node 1 metrics $steals, status $(jq '.nodes[0].steals_out' <<<"$st")"
for n in 2 3; do # each pair's two ends agree
  o=$(value "$a" "schednode_steals_out_total{peer=\"$n\"}") i=$(value "${after[$n]}" 'schednode_steals_in_total{peer="1"}')
  [ "$o" = "$i" ] && ok "node 1 gave node $n $o batches, node $n took $i from node 1" || bad "steals 1->$n: $o out, $i in"
done
[ "$(value "$a" 'schednode_processes_migrated_total{direction="out"}')" = "$(jq '.nodes[0].migrated' <<<"$st")" ] &&
  ok "migrated out agrees with status --json ($(jq '.nodes[0].migrated' <<<"$st"))" ||
  bad "migrated: metrics $(value "$a" 'schednode_processes_migrated_total{direction="out"}'), status $st"
rtts=$(grep -c '^schednode_peer_rtt_seconds{peer="[23]"}' <<<"$a")
[ "$rtts" = 2 ] && ok "node 1 has a probe RTT for both peers" || bad "RTTs: $(grep rtt <<<"$a")"
[ "$(value "$a" 'schednode_peer_up{peer="2"}')" = 1 ] && [ "$(value "$a" 'schednode_peer_up{peer="3"}')" = 1 ] &&
  ok "both peers up" || bad "peer_up: $(grep peer_up <<<"$a")"

# --- refusals
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${mport[1]}/nothing")
[ "$code" = 404 ] && ok "an unknown path is 404" || bad "unknown path: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:${mport[1]}/metrics")
[ "$code" = 405 ] && ok "POST is 405" || bad "POST: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${mport[1]}/")
[ "$code" = 404 ] && ok "--metrics alone serves no dashboard" || bad "/ on --metrics: $code"
"$SN" --metrics 127.0.0.1:9 >"$dir/badflag" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--metrics" "$dir/badflag" && ok "a bad --metrics endpoint exits 2 naming the flag" ||
  bad "bad --metrics: exit $rc: $(cat "$dir/badflag")"
timeout 10 "$SN" -w 1 --metrics "tcp://127.0.0.1:${mport[2]}" >"$dir/taken" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "cannot serve HTTP" "$dir/taken" && ok "a port in use: exit 1, says so" ||
  bad "port in use: exit $rc: $(cat "$dir/taken")"

# every node stops cleanly (under a sanitizer, a report makes its exit status nonzero)
n=0
for p in "${pids[@]}"; do
  n=$((n + 1))
  kill -TERM "$p"
  wait "$p"
  rc=$?
  [ $rc -eq 0 ] && ok "node $n stops on SIGTERM with exit 0" || { bad "node $n exit $rc"; tail -40 "$dir/node$n.log"; }
done
pids=()

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
