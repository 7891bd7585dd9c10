#!/usr/bin/env bash
# relay.sh - real schednode processes on 127.0.0.1: messages between
# processes on different nodes, order under load, noproc / unreachable /
# nodedown errors, and a hostile client whose bad frames are counted and
# dropped while the node keeps serving. Args: $1 schednode, $2 rawzmq.
set -u
SN=$1 RAW=$2
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done

start_peered() { # node-id: starts it with the two others as peers, on a fresh log (the wait reads it)
  local n=$1 args=()
  for m in 1 2 3; do [ "$m" = "$n" ] || args+=(--peer "$m=$(ep "$m")"); done
  : >"$dir/node$n.log"
  up_wait=50 up_line="listening on" launch "$n" "$dir/node$n.log" --load "$DEMO" -n "$n" -w 2 --listen "$(ep "$n")" \
    --insecure --down-after-ms 3000 --max-frame 65536 "${args[@]}"
}

call_flags=() call_s=30 call_ms=20000

start_peered 1 && start_peered 2 && start_peered 3 || { bad "three nodes start"; echo "$pass passed, $fail failed"; exit 1; }
ok "three nodes start on free ports"

# messages between processes on different nodes
sink=$(call spawn --connect "$(ep 2)" xsink collect 1000)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 1000" 2>&1)
[ "$out" = "1000 messages in order" ] && ok "1000 messages node 1 -> node 2, in order" || bad "node 1 -> node 2: $out"

# order under load: three sources on two nodes at once, 20000 each
for i in 1 2 3; do s[$i]=$(call spawn --connect "$(ep 2)" xsink collect 20000); done
call call --connect "$(ep 1)" xsource blast "${s[1]} 20000" >"$dir/o1" 2>&1 &
c1=$!
call call --connect "$(ep 3)" xsource blast "${s[2]} 20000" >"$dir/o2" 2>&1 &
c2=$!
call call --connect "$(ep 1)" xsource blast "${s[3]} 20000" >"$dir/o3" 2>&1 &
c3=$!
wait $c1 $c2 $c3
if [ "$(cat "$dir/o1" "$dir/o2" "$dir/o3")" = "$(printf '20000 messages in order\n%.0s' 1 2 3)" ]; then
  ok "3 x 20000 concurrent messages from nodes 1 and 3, each stream in order"
else
  bad "order under load: $(cat "$dir/o1" "$dir/o2" "$dir/o3" | tr '\n' '|')"
fi

# errors come back to the sending process with the reason
out=$(call call --connect "$(ep 1)" xsource blast "2.999999 1" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "noproc" <<<"$out" && ok "send to an unknown PID on node 2: noproc" || bad "noproc: rc=$rc $out"
out=$(call call --connect "$(ep 1)" xsource blast "$sink 1" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "noproc" <<<"$out" && ok "send to a finished process on node 2: noproc" || bad "finished: rc=$rc $out"
out=$(call call --connect "$(ep 1)" xsource blast "77.1 1" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "unreachable" <<<"$out" && ok "send to a node nobody knows: unreachable" || bad "unreachable: rc=$rc $out"

# hostile client: every bad frame counted and dropped, the node serves on
for f in garbage truncated oversize:70000 version multipart nobody; do
  "$RAW" "$(ep 2)" "$f" || bad "rawzmq $f could not send"
done
for _ in $(seq 50); do
  st=$(call status --json --connect "$(ep 2)")
  grep -q '"bad_frames": 6' <<<"$st" && break; sleep 0.1
done
grep -q '"bad_frames": 6' <<<"$st" && ok "6 hostile frames counted as bad" || bad "bad frames: $st"
sink=$(call spawn --connect "$(ep 2)" xsink collect 10)
out=$(call call --connect "$(ep 3)" xsource blast "$sink 10" 2>&1)
[ "$out" = "10 messages in order" ] && ok "node 2 still serves its peers after the hostile frames" || bad "after hostile: $out"
lines=$(grep -c "dropped a bad frame" "$dir/node2.log")
[ "$lines" -ge 1 ] && ok "bad frames are logged" || bad "no log line for bad frames"
[ "$lines" -lt 6 ] && ok "the bad-frame log is rate-limited ($lines lines for 6 frames)" || bad "one log line per bad frame: not rate-limited"

# hostile datagrams on node 2's probe port (UDP, its TCP port's number):
# junk, a probe in node 2's own name, 2,000 bytes: each counted, logged, dropped
sleep 1.1 # (the rate limit of the bad-frame lines: one a second for non-peers)
b0=$(call status --json --connect "$(ep 2)" | jq '.nodes[] | select(.id == 2) | .bad_frames')
for f in udp:garbage udp:own:2 udp:oversize; do "$RAW" "$(ep 2)" "$f" >/dev/null || bad "rawzmq $f could not send"; done
for _ in $(seq 50); do
  b1=$(call status --json --connect "$(ep 2)" | jq '.nodes[] | select(.id == 2) | .bad_frames')
  [ "$b1" = $((b0 + 3)) ] && break; sleep 0.1
done
[ "$b1" = $((b0 + 3)) ] && ok "3 hostile datagrams counted as bad" || bad "bad datagrams: bad_frames $b0 -> $b1"
grep -q "dropped a bad frame from .*datagram" "$dir/node2.log" && ok "bad datagrams are logged" ||
  bad "no log line for bad datagrams"
sleep 1
for m in 1 3; do
  st=$(call status --json --connect "$(ep $m)" | jq -r '.nodes[] | select(.id == 2) | .state')
  [ "$st" = up ] && ok "node $m still sees node 2 up after the hostile datagrams" || bad "node $m sees node 2 $st"
done

# a frozen node: its messages are in the pipe, never acknowledged; once it
# is declared down they come back to the sender as nodedown (not lost)
sink=$(call spawn --connect "$(ep 2)" xsink collect 5)
kill -STOP "$node_pid_2"
out=$(call call --connect "$(ep 1)" xsource blast "$sink 5" 2>&1); rc=$?
kill -CONT "$node_pid_2"
[ $rc -eq 1 ] && grep -q "nodedown" <<<"$out" && ok "sends to a frozen node come back as nodedown" || bad "frozen: rc=$rc $out"
for _ in $(seq 100); do grep -q "node 2 .* is up again" "$dir/node1.log" && break; sleep 0.1; done
grep -q "node 2 .* is up again" "$dir/node1.log" && ok "node 2 is up again after SIGCONT" || bad "node 2 not back up"

# nodedown: kill -9 node 2; senders get nodedown once it is declared down
# ... with 5 messages to node 1 in flight, which node 1, frozen meanwhile,
# reads once node 2 is gone: it owes node 2 an acknowledgement it cannot
# send, and must not spin on it while it waits 3 s to declare node 2 down
# (its I/O thread retried it every turn)
sink=$(call spawn --connect "$(ep 2)" xsink collect 5)
far=$(call spawn --connect "$(ep 1)" xsink collect 10)
kill -STOP "$node_pid_1"
call call --connect "$(ep 2)" xsource blast "$far 5" >/dev/null 2>&1 &
blast=$!
sleep 0.5
kill -9 "$node_pid_2"; wait "$node_pid_2" 2>/dev/null
kill -CONT "$node_pid_1"; wait "$blast" 2>/dev/null
c0=$(cpu_ns "$node_pid_1") t0=$(date +%s%N)
sleep 2
cpu_ms=$((($(cpu_ns "$node_pid_1") - c0) / 1000000)) wall_ms=$((($(date +%s%N) - t0) / 1000000))
[ $cpu_ms -lt $((wall_ms / 4)) ] && ok "node 1 idles while node 2 is silent ($cpu_ms ms of CPU in $wall_ms ms)" ||
  bad "node 1 spun while node 2 was silent: $cpu_ms ms of CPU in $wall_ms ms"
sleep 2 # down after 3000 ms of silence
out=$(call call --connect "$(ep 1)" xsource blast "$sink 5" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "nodedown" <<<"$out" && ok "send to a killed node: nodedown" || bad "nodedown: rc=$rc $out"
grep -q "node 2 .* is down" "$dir/node1.log" && ok "node 1 logs that node 2 is down" || bad "no down log on node 1"

# node 2 comes back (a new incarnation on the same endpoint) and serves
# again; its probe port (UDP) is held by another program, so it says so
# and its probes go over TCP, both ways: no one declares it down
"$RAW" "$(ep 2)" udp:hold:9000 >"$dir/hold.out" 2>&1 &
hold=$!
pids+=($hold)
wait_for 50 grep -q holding "$dir/hold.out" || bad "could not hold node 2's UDP port: $(cat "$dir/hold.out")"
downs=$(cat "$dir"/node[13].log | grep -c "node 2 .* is down")
start_peered 2 || bad "node 2 restarts"
for _ in $(seq 100); do grep -q "node 2 .* restarted" "$dir/node1.log" && break; sleep 0.1; done
grep -q "node 2 .* restarted" "$dir/node1.log" && ok "node 1 sees node 2 restarted" || bad "restart not seen by node 1"
grep -q "cannot bind udp://.*probes to and from this node go over TCP" "$dir/node2.log" &&
  ok "node 2 says its probe port is taken and probes go over TCP" || bad "no word of the UDP bind: $(head -3 "$dir/node2.log")"
sink=$(call spawn --connect "$(ep 2)" xsink collect 1000)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 1000" 2>&1)
[ "$out" = "1000 messages in order" ] && ok "the restarted node 2 receives 1000 messages in order" || bad "after restart: $out"
sleep 4 # past --down-after-ms, probed over TCP meanwhile
n=$(cat "$dir"/node[13].log | grep -c "node 2 .* is down")
[ "$n" = "$downs" ] && ! grep -q " is down" "$dir/node2.log" &&
  ok "node 2 without UDP: no one is declared down over 4 s" ||
  bad "node 2 without UDP: $((n - downs)) new down lines on 1 and 3, $(grep -c " is down" "$dir/node2.log") on 2"
kill "$hold" 2>/dev/null; wait "$hold" 2>/dev/null

# the survivors keep working with each other
sink=$(call spawn --connect "$(ep 3)" xsink collect 100)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 100" 2>&1)
[ "$out" = "100 messages in order" ] && ok "nodes 1 and 3 keep working after node 2 died" || bad "survivors: $out"

# graceful stop
kill -TERM "$node_pid_1" "$node_pid_2" "$node_pid_3"
for n in 1 2 3; do
  p=$(eval echo "\$node_pid_$n"); for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then bad "node $n did not stop on SIGTERM"; else wait "$p"; rc=$?
    [ $rc -eq 0 ] && ok "node $n stops on SIGTERM with exit 0" || bad "node $n exit $rc: $(tail -3 "$dir/node$n.log")"; fi
done

if [ $fail -ne 0 ]; then
  for n in 1 2 3; do echo "--- node $n log (tail)"; tail -40 "$dir/node$n.log"; done
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
