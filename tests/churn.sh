#!/usr/bin/env bash
# churn.sh - members come and go for good, as under systemd restarting a
# crashing node: N nodes started without -n (a random id each) join one
# seed, one after another, and are killed (kill -9) once joined, while 4
# more members stay up. Every join is admitted (the member table grows
# and rows are reclaimed: relay/table.c, members.c forget_old), and at the
# end the seed's table holds the live nodes and only the recently dead
# (down for less than --forget-after-ms, here 4 s).
# N: SN_CHURN_NODES (default 300, past the 256 rows a fixed table would
# hold; 100 under a sanitizer, whose runtime slows every start).
# Args: $1 schednode.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$1
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

N=${SN_CHURN_NODES:-300}
[ -n "${SN_SANITIZE:-}" ] && [ -z "${SN_CHURN_NODES:-}" ] && N=100
FORGET_MS=4000
FLAGS=(-w 1 --insecure --forget-after-ms "$FORGET_MS" --down-after-ms 1000 --log-level info)
call_s=30 call_ms=20000
declare -A port # the seed: 1; the kept nodes: 2 to 5; the joiner of the moment: 6

port[1]=$(free_port)
"$SN" -n 1 --listen "$(ep 1)" "${FLAGS[@]}" >"$dir/seed.log" 2>&1 &
pids+=($!)
wait_for 100 grep -q "up: " "$dir/seed.log" || { cat "$dir/seed.log"; bad "the seed starts"; echo "$pass passed, $fail failed"; exit 1; }
for k in 2 3 4 5; do
  port[$k]=$(free_port)
  "$SN" -n "$k" --listen "$(ep "$k")" --join "$(ep 1)" "${FLAGS[@]}" >"$dir/keep$k.log" 2>&1 &
  pids+=($!)
done
for k in 2 3 4 5; do wait_for 100 grep -q "joined cluster" "$dir/keep$k.log" || bad "kept node $k joins"; done

# node I: started without -n, joined (its log says so) or refused, then kill -9
admitted=0 refused=0 t0=$(date +%s%N)
for i in $(seq 1 "$N"); do
  port[6]=$(free_port)
  "$SN" --listen "$(ep 6)" --join "$(ep 1)" "${FLAGS[@]}" >"$dir/c$i.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  if wait_for 200 grep -q "joined cluster" "$dir/c$i.log"; then
    admitted=$((admitted + 1))
  else
    refused=$((refused + 1))
    [ "$refused" -le 3 ] && { echo "join $i not admitted:"; tail -3 "$dir/c$i.log"; }
  fi
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
done
secs=$((($(date +%s%N) - t0) / 1000000000))
[ "$refused" -eq 0 ] && ok "$admitted of $N joins admitted, each killed once joined ($secs s)" ||
  bad "$refused of $N joins not admitted (admitted $admitted)"

# after the dead are seen down and then forgotten (bounded: 180 s): the
# seed's table holds the 4 kept members (and itself), and only the dead
# of the last FORGET_MS
rows() { call status --json --connect "$(ep 1)" | jq '.nodes | length'; }
small() { r=$(rows); [ -n "$r" ] && [ "$r" -le 5 ]; }
t1=$(date +%s%N)
wait_for 1800 small
ms=$((($(date +%s%N) - t1) / 1000000))
r=$(rows)
ups=$(call status --json --connect "$(ep 1)" | jq '[.nodes[] | select(.state == "up")] | length')
[ "$ups" = 5 ] && ok "the seed sees its 5 members up" || bad "members up at the seed: '$ups'"
[ -n "$r" ] && [ "$r" -le 5 ] && ok "the seed's table holds $r rows $ms ms after the last death: the live members, the dead forgotten" ||
  bad "the seed's table holds '$r' rows 180 s after $N deaths (the live are 5)"
n=$(grep -c "forgotten: down for" "$dir/seed.log")
[ "$n" -ge "$N" ] && ok "the seed forgot all $N dead ($n rows)" || bad "the seed forgot $n rows of the $N dead"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
