#!/usr/bin/env bash
# steal_faults.sh - crashes in the middle of a handover (SN_FAULT makes a
# node die right after the named step, like kill -9): the thief after its
# accept and after activating, the victim after its offer and after its
# commit. Checks: nothing ever runs twice (the driver fails on a second
# result), whatever is missing was handed to the node that crashed, the
# survivor keeps working and holds no half-moved process.
# Args: $1 schednode.
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

call_s=60 call_ms=50000
run_case() { # step crashing-node(A|B)
  local step=$1 who=$2 pa pb
  pa=$(free_port) pb=$(free_port)
  local fa="" fb=""
  [ "$who" = A ] && fa=$step || fb=$step
  rm -f "$dir/a.log" "$dir/b.log"
  SN_FAULT=$fa "$SN" --load "$DEMO" -n 1 -w 1 --listen "tcp://127.0.0.1:$pa" --insecure --log-level debug >"$dir/a.log" 2>&1 &
  local a=$!
  pids+=($a)
  wait_for 100 grep -q "up: " "$dir/a.log" || { bad "$step: node A did not start"; return; }
  SN_FAULT=$fb "$SN" --load "$DEMO" -n 2 -w 1 --listen "tcp://127.0.0.1:$pb" --join "tcp://127.0.0.1:$pa" --insecure \
    --down-after-ms 1000 --log-level debug >"$dir/b.log" 2>&1 &
  local b=$!
  pids+=($b)
  wait_for 100 grep -q "up: " "$dir/b.log" || { bad "$step: node B did not start"; return; }
  sleep 0.5
  # 600 processes of 2 ms on A; those that do not come back within 8 s are
  # reported missing (a second result would fail the driver)
  out=$(call call --connect "tcp://127.0.0.1:$pa" spread run "600 2 spin 8000" 2>&1)
  local victim=$a
  [ "$who" = B ] && victim=$b
  if ! wait_for 100 eval "! kill -0 $victim 2>/dev/null"; then
    bad "$step: node $who did not crash (no handover reached that step)"
    kill -9 "$a" "$b" 2>/dev/null; wait "$a" "$b" 2>/dev/null
    return
  fi
  if [ "$who" = B ]; then
    wait "$b" 2>/dev/null
    given=$(grep -o "[0-9]* committed to node 2" "$dir/a.log" | awk '{s += $1} END {print s + 0}')
    missing=$(grep -o "([0-9]* missing)" <<<"$out" | tr -dc 0-9)
    lost=$(grep -o "([0-9]* lost with their node)" <<<"$out" | tr -dc 0-9)
    if grep -q "done:" <<<"$out" && ! grep -q "twice" <<<"$out" && [ $((${missing:-0} + ${lost:-0})) -le "$given" ]; then
      ok "thief dies after '$step': nothing ran twice; ${lost:-0} lost with it, ${missing:-0} missing, all of them handed to the thief ($given)"
    else
      bad "thief dies after '$step': $out (given $given)"
    fi
    st=$(call status --json --connect "tcp://127.0.0.1:$pa")
    live() { call status --json --connect "tcp://127.0.0.1:$pa" | jq '.nodes[0].live'; }
    none_live() { [ "$(live)" = 0 ]; } # (a function: wait_for re-runs it)
    wait_for 50 none_live && ok "  the victim is left with no live or half-moved process" ||
      bad "  victim still holds processes: $st"
    out=$(call call --connect "tcp://127.0.0.1:$pa" spread run "50 1 spin" 2>&1)
    [ "$out" = "50 done: 50 on node 1" ] && ok "  the victim keeps working" || bad "  victim after crash: $out"
    kill -TERM "$a"; wait "$a"
  else
    wait "$a" 2>/dev/null
    # the driver died with A; B must drop what it had not been given and
    # finish what it had (their results have nowhere to go)
    live() { call status --json --connect "tcp://127.0.0.1:$pb" | jq '.nodes[0].live'; }
    none_live() { [ "$(live)" = 0 ]; }
    wait_for 100 none_live && ok "victim dies after '$step': the thief ends with no live or half-moved process" ||
      bad "victim dies after '$step': thief holds $(live) ($(grep -c 'run here' "$dir/b.log") batches ran)"
    out=$(call call --connect "tcp://127.0.0.1:$pb" spread run "50 1 spin" 2>&1)
    [ "$out" = "50 done: 50 on node 2" ] && ok "  the thief keeps working" || bad "  thief after crash: $out"
    kill -TERM "$b"; wait "$b"
  fi
}

for i in $(seq "${SN_FAULT_ROUNDS:-1}"); do # SN_FAULT_ROUNDS=N repeats each case (the crash lands elsewhere each time)
  run_case accept-sent B
  run_case activated B
  run_case offer-sent A
  run_case commit-sent A
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
