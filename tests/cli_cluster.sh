#!/usr/bin/env bash
# cli_cluster.sh - the command line against real nodes: SIGINT and SIGTERM
# end every wait (a joining node, run, call, kill --timeout) at once and
# leave nothing running that was not asked for (the time is printed;
# the bound, 1 s, leaves room for a sanitizer build on a busy machine:
# a command that ignores the signal never ends); `send` exits the
# same through every node of a 3-node cluster; a node waiting for an absent
# seed, and an idle cluster, sleep in the kernel; a refused connection is
# said at once; a bare node has only the user's types.
#
# usage: cli_cluster.sh PATH/TO/schednode PLUGIN_DIR
set -u

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
SN=$1 PLUG=$2
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsink): a plugin
declare -A port
for n in 1 2 3 4; do port[$n]=$(free_port); done
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# ends PID SECONDS: waits up to SECONDS for PID (a child) to end; its
# status in $st, the time from the call in $ms (ms); 999999 if it did not.
ends() {
  local p=$1 t0 i
  t0=$(date +%s%N)
  for i in $(seq $(($2 * 1000))); do kill -0 "$p" 2>/dev/null || break; sleep 0.001; done
  ms=$((($(date +%s%N) - t0) / 1000000))
  if kill -0 "$p" 2>/dev/null; then kill -9 "$p"; ms=999999; fi
  wait "$p"; st=$?
}

# --- a refused connection: at once, no key hint with --insecure
t0=$(now_ms)
out=$(timeout 20 "$SN" status --connect "$(ep 4)" --insecure 2>&1); rc=$?
ms=$(($(now_ms) - t0))
[ $rc -eq 1 ] && [ $ms -lt 1000 ] && grep -q "connection refused" <<<"$out" && ! grep -q -- "--cert" <<<"$out" &&
  ok "a refused connection: exit 1 in $ms ms, said so, no key hint" || bad "refused connection: rc=$rc in $ms ms: $out"

# --- a node waiting 5 s for an absent seed sleeps (under 5 % of a core)
"$SN" -w 2 --insecure --listen "$(ep 4)" --join "tcp://127.0.0.1:$(free_port)" --join-timeout 8000 \
  >"$dir/wait.log" 2>&1 &
w=$!; pids+=($w)
sleep 1; c0=$(cpu_ticks $w); sleep 5; c1=$(cpu_ticks $w)
used=$(((c1 - c0) * 1000 / tick)) # ms of CPU in 5000 ms
[ $used -lt 250 ] && ok "a node waiting for an absent seed used $used ms of CPU in 5 s" ||
  bad "a node waiting for an absent seed used $used ms of CPU in 5 s (limit 250)"

# --- SIGINT and SIGTERM to a joining node: it ends at once, 130 / 143
kill -INT $w; ends $w 5
[ $st -eq 130 ] && [ $ms -le 1000 ] && ok "SIGINT to a joining node: exit 130 in $ms ms" ||
  bad "SIGINT to a joining node: exit $st in $ms ms: $(tail -2 "$dir/wait.log")"
"$SN" -w 2 --insecure --listen "$(ep 4)" --join "tcp://127.0.0.1:$(free_port)" >"$dir/wait2.log" 2>&1 &
w=$!; pids+=($w)
sleep 1; kill -TERM $w; ends $w 5
[ $st -eq 143 ] && [ $ms -le 1000 ] && ok "SIGTERM to a joining node: exit 143 in $ms ms" ||
  bad "SIGTERM to a joining node: exit $st in $ms ms: $(tail -2 "$dir/wait2.log")"

# --- run, stopped by a signal: ends at once (its process CANCELled
# by the shutdown), nothing left
for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  "$SN" -w 2 --load "$DEMO" run xsink collect 1000000 >"$dir/run.out" 2>"$dir/run.err" &
  r=$!; pids+=($r)
  wait_for 100 grep -q "loaded plugin" "$dir/run.err"; sleep 0.3
  kill -$sig $r; ends $r 5
  [ $st -eq $want ] && [ $ms -le 1000 ] && ok "SIG$sig to run: exit $st in $ms ms" ||
    bad "SIG$sig to run: exit $st in $ms ms: $(tail -2 "$dir/run.err")"
done

# --- a 3-node cluster: the user's type (plugin_good's echo) and the demo types
start_bg() { # node-id [seed-id]: starts it in the background, without waiting
  "$SN" -n "$1" -w 1 --insecure --listen "$(ep "$1")" ${2:+--join "$(ep "$2")"} --load "$PLUG/plugin_good.so" \
    --load "$DEMO" >"$dir/n$1.log" 2>&1 &
  pids+=($!)
}
start_bg 1 && wait_for 100 grep -q "up:" "$dir/n1.log" && start_bg 2 1 && start_bg 3 1
cl() { timeout 30 "$SN" --insecure --connect "$(ep "$1")" "${@:2}"; }
three_up() { [ "$(cl 1 status 2>/dev/null | grep -c " up ")" = 3 ]; }
wait_for 200 three_up && ok "three nodes up" || { bad "three nodes: $(tail -3 "$dir"/n*.log)"; echo "$pass passed, $fail failed"; exit 1; }

# idle, the cluster sleeps: under 5 % of a core per node over 5 s
sleep 1; c0=0; c1=0
for p in "${pids[@]: -3}"; do c0=$((c0 + $(cpu_ticks "$p"))); done
sleep 5
for p in "${pids[@]: -3}"; do c1=$((c1 + $(cpu_ticks "$p"))); done
used=$(((c1 - c0) * 1000 / tick))
[ $used -lt 750 ] && ok "an idle 3-node cluster used $used ms of CPU in 5 s" ||
  bad "an idle 3-node cluster used $used ms of CPU in 5 s (limit 750)"

# nothing runs on the cluster: no process in ps
none_left() { [ "$(cl 1 ps --json 2>/dev/null | jq '.processes | length')" = 0 ]; }

# --- SIGINT and SIGTERM to call: ends at once, its process cancelled
for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  "$SN" --insecure --connect "$(ep 2)" call xsink collect 1000000 >"$dir/call.out" 2>"$dir/call.err" &
  c=$!; pids+=($c)
  wait_for 50 eval '[ "$(cl 1 ps --json 2>/dev/null | jq ".processes | length")" = 1 ]'
  kill -$sig $c; ends $c 5
  if [ $st -eq $want ] && [ $ms -le 1000 ] && wait_for 20 none_left; then
    ok "SIG$sig to call: exit $st in $ms ms, its process cancelled"
  else
    bad "SIG$sig to call: exit $st in $ms ms: $(cat "$dir/call.err"); left: $(cl 1 ps 2>&1 | tail -n +2)"
  fi
done

# --- SIGINT and SIGTERM to kill --timeout, waiting for a process that
# does not end on CANCEL (msink ignores it): ends at once, 130 / 143, says
# the CANCEL stands unforced; a forced kill then ends the process
for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  victim=$(cl 3 spawn msink collect 1000000)
  "$SN" --insecure --connect "$(ep 1)" kill "$victim" --timeout 60000 >"$dir/kill.out" 2>"$dir/kill.err" &
  k=$!; pids+=($k)
  sleep 1
  kill -$sig $k; ends $k 5
  if [ $st -eq $want ] && [ $ms -le 1000 ] && grep -q "stopped waiting (SIG$sig)" "$dir/kill.err" &&
    ! grep -q "ended" "$dir/kill.out"; then
    ok "SIG$sig to kill --timeout 60000: exit $st in $ms ms, $victim has the CANCEL"
  else
    bad "SIG$sig to kill --timeout 60000: exit $st in $ms ms: $(cat "$dir/kill.out" "$dir/kill.err")"
  fi
  cl 1 kill "$victim" --timeout 0 >/dev/null 2>&1 && wait_for 20 none_left ||
    bad "kill --timeout 0 (the force) did not end $victim: $(cl 1 ps 2>&1 | tail -n +2)"
done

# --- send: the same exit code through every node
live=$(cl 2 spawn xsink collect 1000000)
ended=$(cl 2 spawn xsink collect 1) && cl 2 send "$ended" 1 >/dev/null 2>&1
gone() { ! cl 2 ps 2>/dev/null | grep -q " $ended "; }
wait_for 50 gone
for n in 1 2 3; do
  codes=""
  for pid in "$live" "$ended" 2.12345 9.12345; do
    cl "$n" send "$pid" 2 >/dev/null 2>"$dir/send.err"
    codes="$codes $?"
  done
  [ "$codes" = " 0 4 4 4" ] && ok "send through node $n: live 0, ended 4, never was 4, unknown node 4" ||
    bad "send through node $n: exit codes$codes (want 0 4 4 4) for $live $ended 2.12345 9.12345: $(cat "$dir/send.err")"
done

# --- types on a bare node: only the user's
out=$(timeout 20 "$SN" -w 1 --load "$PLUG/plugin_good.so" run echo say hi 2>&1)
"$SN" -w 1 --insecure --listen "$(ep 4)" --load "$PLUG/plugin_good.so" >"$dir/bare.log" 2>&1 &
b=$!; pids+=($b)
wait_for 100 grep -q "up:" "$dir/bare.log"
types=$(cl 4 types --json | jq -r '[.nodes[].types[].name] | join(" ")')
[ "$types" = echo ] && ok "types on a bare node with one plugin: only its type ($types)" ||
  bad "types on a bare node: '$types' (want echo)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
