#!/usr/bin/env bash
# ps.sh - process management from the command line, on two real nodes:
# ps (every node, --node, --json parsed with jq), types, kill (a process
# that ends on CANCEL and reports its result; one that ignores CANCEL and
# is forced; unknown and malformed PIDs), call --timeout (the message, the
# exit status, the cancel and --no-cancel-on-timeout), and --log-format
# json (every line of a node's log parses). The process type is the
# README's counter, cut out of README.md and built here as a plugin.
#
# usage: ps.sh SCHEDNODE PLUGIN_DIR README.md INCLUDE_DIR CC
set -u
[ $# -eq 5 ] || { echo "usage: $0 SCHEDNODE PLUGIN_DIR README.md INCLUDE_DIR CC" >&2; exit 2; }
SN=$1 PLUG=$2 README=$3 INC=$4 CC=$5
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "ps.sh needs jq (scripts/deps.sh installs it)"; exit 1; }

# The README's counter, as a reader would build it (no library linked: the
# program that loads it has the API).
awk '/^## Writing a process type/{f=1} f&&/^```c/{g=1;next} g&&/^```/{exit} g{print}' "$README" >"$dir/counter.c"
if ! "$CC" -shared -fPIC -I"$INC" "$dir/counter.c" -o "$dir/counter.so" 2>"$dir/cc.err"; then
  echo "FAIL the README's counter does not build: $(head -5 "$dir/cc.err")"
  exit 1
fi

p1=$(free_port) p2=$(free_port)
while [ "$p2" = "$p1" ]; do p2=$(free_port); done
ep1=tcp://127.0.0.1:$p1 ep2=tcp://127.0.0.1:$p2
LOADS=(--load "$dir/counter.so" --load "$PLUG/plugin_stubborn.so")
"$SN" --load "$DEMO" -n 1 --workers 2 --insecure --listen "$ep1" "${LOADS[@]}" 2>"$dir/n1.log" &
pids+=($!)
"$SN" --load "$DEMO" -n 2 --workers 2 --insecure --listen "$ep2" --join "$ep1" "${LOADS[@]}" --log-format json 2>"$dir/n2.log" &
pids+=($!)

# cli ARGS...: a client command (bounded), output in $out, errors in $err, status in $rc
cli() {
  timeout -k 5 60 "$SN" --insecure "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  out=$(cat "$dir/out") err=$(cat "$dir/err")
}
both_up() { [ "$(timeout 10 "$SN" status --json --insecure --connect "$ep1" 2>/dev/null |
  jq '[.nodes[] | select(.state == "up" and .workers > 0)] | length')" = 2 ]; }
if ! wait_for 150 both_up; then
  echo "FAIL the two nodes did not form a cluster: $(tail -3 "$dir/n1.log")"
  exit 1
fi

# ---------------------------------------------------------------- ps
cli spawn counter count --connect "$ep1"; c1=$out
cli spawn counter count --connect "$ep2"; c2=$out
for i in 1 2 3; do cli send "$c1" "hello $i" --connect "$ep1"; done
# its three messages taken (the mailbox empties as the steps run)
taken() { [ "$("$SN" --insecure ps --json --connect "$ep2" | jq -r ".processes[] | select(.pid == \"$c1\") | .mailbox")" = 0 ]; }
wait_for 100 taken
cli ps --json --connect "$ep2"
n=$(jq '.processes | length' <<<"$out")
row1=$(jq -c ".processes[] | select(.pid == \"$c1\")" <<<"$out")
row2=$(jq -c ".processes[] | select(.pid == \"$c2\")" <<<"$out")
if [ $rc -eq 0 ] && [ "$n" = 2 ] && [ "$(jq -r '.node, .type, .state, .mailbox, .moves' <<<"$row1" | tr '\n' ' ')" = "1 counter idle 0 0 " ] &&
  [ "$(jq -r '.node, .type, .state' <<<"$row2" | tr '\n' ' ')" = "2 counter idle " ] && [ "$(jq '.steps' <<<"$row1")" -ge 2 ] &&
  [ "$(jq '[.nodes[] | .total] | add' <<<"$out")" = 2 ] && [ "$(jq '[.nodes[] | .by_state.idle] | add' <<<"$out")" = 2 ]; then
  ok "ps --json lists the counter on each node: node, type, state idle, mailbox 0, steps, counts by state"
else
  bad "ps --json: rc=$rc $out $err"
fi
cli ps --json --node 2 --connect "$ep1"
[ $rc -eq 0 ] && [ "$(jq -r '[.processes[].pid] | join(" ")' <<<"$out")" = "$c2" ] && [ "$(jq '.nodes | length' <<<"$out")" = 1 ] &&
  ok "ps --node 2 lists node 2's process only" || bad "ps --node 2: rc=$rc $out $err"
cli ps --connect "$ep1"
[ $rc -eq 0 ] && grep -q "^NODE *PID *TYPE *STATE *MAILBOX *STEPS *MOVED" <<<"$out" && grep -q "^1 *$c1 *counter *idle" <<<"$out" &&
  ok "ps prints a table with a row per process" || bad "ps table: rc=$rc $out $err"
cli ps --node 9 --connect "$ep1"
[ $rc -eq 1 ] && grep -q "node 9 is not a member" <<<"$err" && ok "ps --node 9 (no such node) exits 1 saying so" || bad "ps --node 9: rc=$rc $err"

# ---------------------------------------------------------------- types
cli types --json --connect "$ep1"
[ $rc -eq 0 ] && [ "$(jq -r '[.nodes[].id] | join(" ")' <<<"$out")" = "1 2" ] &&
  [ "$(jq '[.nodes[] | .types[] | select(.name == "counter" or .name == "stubborn")] | length' <<<"$out")" = 4 ] &&
  ok "types --json: counter and stubborn on each of the two nodes" || bad "types --json: rc=$rc $out $err"
cli types --connect "$ep2"
[ $rc -eq 0 ] && grep -q "^2 *counter *1 *no" <<<"$out" && ok "types prints a table" || bad "types: rc=$rc $out"

# ---------------------------------------------------------------- kill
cli kill "$c1" --connect "$ep2"
[ $rc -eq 0 ] && grep -q "^$c1 ended after CANCEL (.* ms): done, result 3$" <<<"$out" &&
  ok "kill: the counter ends on CANCEL and reports its count (3)" || bad "kill counter: rc=$rc $out $err"
cli ps --json --connect "$ep1"
[ "$(jq "[.processes[] | select(.pid == \"$c1\")] | length" <<<"$out")" = 0 ] && ok "ps no longer lists it" || bad "ps after kill: $out"
cli kill "$c1" --connect "$ep1"
[ $rc -eq 4 ] && grep -q "has already ended: done, result 3" <<<"$err" && ok "kill of an ended process exits 4 saying how it ended" ||
  bad "kill again: rc=$rc $err"
cli kill 1.12345 --connect "$ep1"
[ $rc -eq 4 ] && grep -q "no process 1.12345 in the cluster" <<<"$err" && ok "kill of an unknown PID exits 4" || bad "kill unknown: rc=$rc $err"
cli kill 1.x --connect "$ep1"
[ $rc -eq 2 ] && grep -q "'1.x' is not a PID" <<<"$err" && ok "kill of a malformed PID exits 2" || bad "kill 1.x: rc=$rc $err"

cli spawn stubborn ignore --connect "$ep2"; s=$out
t0=$(date +%s%N)
cli kill "$s" --reason "test over" --timeout 300 --connect "$ep1"
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] && grep -q "^$s killed: still running 300 ms after CANCEL, forced: failed (killed): test over$" <<<"$out" &&
  [ $ms -ge 300 ] && ok "kill --timeout 300: a process that ignores CANCEL is forced after 300 ms ($ms ms), with the reason" ||
  bad "kill stubborn: rc=$rc ms=$ms $out $err"
cli ps --json --connect "$ep2"
[ "$(jq "[.processes[] | select(.pid == \"$s\")] | length" <<<"$out")" = 0 ] && ok "the forced process is gone" || bad "stubborn still there: $out"
grep -q "killing $s for a client: test over" "$dir/n2.log" && ok "its node logged the kill with the reason" || bad "no log line for the kill"

# ------------------------------------------------------- a moved process
# six spins of 2 s CPU each on node 1 (2 workers): node 2, idle, steals
# Ready ones; ps shows them on node 2 with node 1's PIDs, moved once. (A
# spin lasts 2 s so that a stolen one outlasts two looks even where one ps
# takes most of a second.)
for i in 1 2 3 4 5 6; do cli spawn spin work 2000 --connect "$ep1"; done
looks=0
moved() {
  looks=$((looks + 1))
  "$SN" --insecure ps --json --connect "$ep1" >"$dir/moved.json" 2>"$dir/moved.err" &&
    [ "$(jq '[.processes[] | select(.node == 2 and (.pid | startswith("1.")) and .type == "spin" and .moves == 1)] | length' "$dir/moved.json")" -ge 1 ]
}
t0=$(date +%s%N)
wait_for 150 moved && ok "ps shows a process that moved: on node 2, a PID of node 1, moved once" ||
  bad "no moved spin seen in $looks looks over $((($(date +%s%N) - t0) / 1000000)) ms: $(jq -c '.processes' "$dir/moved.json" 2>/dev/null) $(head -c 300 "$dir/moved.err"); the nodes: $("$SN" --insecure status --json \
    --connect "$ep1" 2>&1 | jq -c '[.nodes[] | {id, state, live, ready, steals_in, steals_out, migrated, refused}]' 2>&1)"
spins_done() { [ "$("$SN" --insecure ps --json --connect "$ep1" | jq '[.processes[] | select(.type == "spin")] | length')" = 0 ]; }
wait_for 300 spins_done || bad "the spins did not finish"

# ------------------------------------------------------- call --timeout
t0=$(date +%s%N)
cli call counter count --timeout 300 --connect "$ep1"
ms=$((($(date +%s%N) - t0) / 1000000))
cp=$(sed -n 's/.*(process \([0-9.]*\) was still running.*/\1/p' <<<"$err")
[ $rc -eq 5 ] && grep -q "the call timed out after 300 ms" <<<"$err" && grep -q "cancelled process $cp" <<<"$err" &&
  ! grep -q "listening" <<<"$err" && [ -n "$cp" ] && ok "call --timeout 300: exit 5, 'timed out after 300 ms', the process cancelled ($ms ms)" ||
  bad "call --timeout: rc=$rc $err"
gone() { [ "$("$SN" --insecure ps --json --connect "$ep1" | jq "[.processes[] | select(.pid == \"$cp\")] | length")" = 0 ]; }
wait_for 50 gone && ok "the timed-out call's process has ended" || bad "the timed-out call's process $cp is still there"
cli call counter count --timeout 200 --no-cancel-on-timeout --connect "$ep1"
cp=$(sed -n 's/.*(process \([0-9.]*\) was still running.*/\1/p' <<<"$err")
sleep 0.3
cli ps --json --connect "$ep1"
[ -n "$cp" ] && [ "$(jq "[.processes[] | select(.pid == \"$cp\")] | length" <<<"$out")" = 1 ] &&
  ok "--no-cancel-on-timeout leaves the process running" || bad "--no-cancel-on-timeout: $cp $out"
cli kill "$cp" --connect "$ep1"
[ $rc -eq 0 ] && ok "and kill ends it" || bad "kill $cp: rc=$rc $err"

# ---------------------------------------------------------- JSON logs
lines=$(wc -l <"$dir/n2.log")
good=$(jq -c 'select((.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$")) and .level != null and
  .node == 2 and (.message | type) == "string")' "$dir/n2.log" 2>/dev/null | wc -l)
[ "$lines" -ge 3 ] && [ "$good" = "$lines" ] && ok "--log-format json: all $lines lines of node 2's log parse, with time (ms), level, node, message" ||
  bad "--log-format json: $good of $lines lines good: $(head -3 "$dir/n2.log")"
timeout 10 "$SN" --log-format yaml run x y >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "log-format" "$dir/err" && ok "--log-format yaml exits 2 naming the flag" || bad "--log-format yaml: rc=$rc"
printf 'node\n    log-format = json\n' >"$dir/json.cfg"
timeout 10 "$SN" --config "$dir/json.cfg" --log-level debug run nosuchtype x >/dev/null 2>"$dir/err"
[ "$(grep -c '^{' "$dir/err")" -ge 1 ] && grep '^{' "$dir/err" | jq -e .level >/dev/null 2>&1 && ! grep -q '^[EWID]: ' "$dir/err" &&
  ok "node/log-format = json in a config file: the log lines are JSON" ||
  bad "log-format in a config file: $(head -3 "$dir/err")"
printf 'node\n    log-format = yaml\n' >"$dir/yaml.cfg"
timeout 10 "$SN" --config "$dir/yaml.cfg" run x y >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "log-format: 'yaml' is not text or json" "$dir/err" && ok "node/log-format = yaml exits 2 naming the key" ||
  bad "log-format = yaml: rc=$rc $(cat "$dir/err")"

# ------------------------------------------------ a clean stop, no reports
# (LeakSanitizer runs as the nodes exit, in ASan builds)
for i in 0 1; do kill -TERM "${pids[$i]}" 2>/dev/null; done
stopped=0
for i in 0 1; do
  for _ in $(seq 100); do kill -0 "${pids[$i]}" 2>/dev/null || break; sleep 0.1; done
  wait "${pids[$i]}" 2>/dev/null && stopped=$((stopped + 1))
done
[ $stopped = 2 ] && ok "both nodes stop with status 0 on SIGTERM" || bad "$((2 - stopped)) node(s) did not stop cleanly"
if grep -qE "Sanitizer|runtime error|Assertion" "$dir"/n*.log; then
  bad "sanitizer or assertion report in a node log"; grep -hE -m5 -A10 "Sanitizer|runtime error|Assertion" "$dir"/n*.log | head -40
else
  ok "no sanitizer or assertion report in the node logs"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
