#!/usr/bin/env bash
# autoid.sh - nodes started without -n: the first picks a random id, the
# others join with `--listen A --join B` and nothing else, each with an id
# of its own, and work together; a random id that is taken (forced with
# SN_FAULT_FIRST_ID, built in non-Release builds) makes the joiner pick
# another and join; a taken id given with -n is refused (exit 2); a node
# whose certificate names an id takes that one; a join nobody answers
# exits 1.
# Args: $1 schednode.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

declare -A port
for i in 1 2 3 4 5 6; do port[$i]=$(free_port); done
# node I [FLAGS...]: starts node I at its endpoint with FLAGS (no -n)
node() { local i=$1; shift; launch "$i" "$dir/n$i.log" --load "$DEMO" -w 1 --listen "$(ep "$i")" --insecure "$@"; }
call_s=30 call_ms=20000
id_of() { status "$1" | jq '.nodes[0].id'; }

# --- three nodes, no -n anywhere
node 1 && node 2 --join "$(ep 1)" && node 3 --join "$(ep 2)" ||
  { bad "three nodes without -n start"; echo "$pass passed, $fail failed"; exit 1; }
ok "three nodes without -n: the first alone, two with --listen and --join only"
id1=$(id_of 1) id2=$(id_of 2) id3=$(id_of 3)
[[ $id1 =~ ^[0-9]+$ && $id2 =~ ^[0-9]+$ && $id3 =~ ^[0-9]+$ ]] && [ "$id1" -ge 1 ] && [ "$id2" -ge 1 ] &&
  [ "$id3" -ge 1 ] && [ "$id1" -le 4294967295 ] && [ "$id2" -le 4294967295 ] && [ "$id3" -le 4294967295 ] &&
  [ "$id1" != "$id2" ] && [ "$id2" != "$id3" ] && [ "$id1" != "$id3" ] &&
  ok "three different ids in 1..2^32-1: $id1 $id2 $id3" || bad "ids: '$id1' '$id2' '$id3'"
grep -q "node=$id2 .*joined cluster 'schednode' through node $id1" "$dir/n2.log" &&
  ok "node 2's log names its id and the seed's" || bad "n2 log: $(grep joined "$dir/n2.log")"
want=$(printf "%s\n" "$id1" "$id2" "$id3" | sort -n | jq -sc .)
all3() { for i in 1 2 3; do [ "$(view "$i")" = "$want" ] || return 1; done; }
wait_for 100 all3 && ok "every node sees the three up" || bad "views: $(view 1) $(view 2) $(view 3)"
sink=$(call spawn --connect "$(ep 3)" xsink collect 500)
[ "${sink%%.*}" = "$id3" ] && ok "a PID spawned on node 3 names its id: $sink" || bad "pid $sink (node 3 is $id3)"
out=$(call call --connect "$(ep 1)" xsource blast "$sink 500" 2>&1)
[ "$out" = "500 messages in order" ] && ok "500 messages from node 1 to node 3 in order" || bad "1 -> 3: $out"

# --- a random id that is taken: another one, and the join goes on
SN_FAULT_FIRST_ID=$id1 node 4 --join "$(ep 2)"
if grep -q "node id $id1 (picked at random) is taken: trying again as node" "$dir/n4.log"; then
  id4=$(id_of 4)
  [ -n "$id4" ] && [ "$id4" != "$id1" ] && wait_for 100 grep -q "joined cluster" "$dir/n4.log" &&
    ok "a random id that is taken ($id1): the joiner says so, picks $id4 and joins" || bad "retry: $(cat "$dir/n4.log")"
  grep -q "refused node $id1 from $(ep 4)" "$dir/n2.log" && ok "the seed logged the refusal of the taken id" ||
    bad "no refusal in node 2's log"
else
  echo "SKIP a taken random id: SN_FAULT_FIRST_ID is not built in (Release build)"
fi

# --- a taken id given with -n: the configuration is wrong, exit 2
out=$(timeout 20 "$SN" --load "$DEMO" -n "$id2" -w 1 --listen "$(ep 5)" --insecure --join "$(ep 1)" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "refused to let this node in: node id $id2 is taken by $(ep 2)" <<<"$out" &&
  ok "-n $id2 (taken): refused, exit 2, no other id tried" || bad "-n taken: rc=$rc $out"
! grep -q "trying again" <<<"$out" || bad "-n taken: it tried another id"

# --- nobody answers: exit 1 (it may work later)
out=$(timeout 20 "$SN" --load "$DEMO" -w 1 --listen "$(ep 5)" --insecure --join "tcp://127.0.0.1:$(free_port)" --join-timeout 500 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "no seed answered within 500 ms" <<<"$out" && ok "no seed answers: exit 1" ||
  bad "no seed: rc=$rc $out"

# --- a certificate that names an id: without -n, that is the node's id
mkdir -p "$dir/auth"
"$SN" keygen "$dir/keys" --name s1 --endpoint "$(ep 5)" >/dev/null &&
  "$SN" keygen "$dir/keys" --name s2 --endpoint "$(ep 6)" --node-id 77 >/dev/null &&
  "$SN" keygen "$dir/keys" --name client >/dev/null && cp "$dir/keys"/*.cert "$dir/auth/" ||
  bad "keygen"
# shellcheck disable=SC2046
"$SN" --load "$DEMO" -w 1 --listen "$(ep 5)" $(sec s1) >"$dir/n5.log" 2>&1 &
pids+=($!)
wait_for 100 grep -q "up: " "$dir/n5.log" || bad "secure node 5: $(cat "$dir/n5.log")"
# shellcheck disable=SC2046
"$SN" --load "$DEMO" -w 1 --listen "$(ep 6)" $(sec s2) --join "$(ep 5)" >"$dir/n6.log" 2>&1 &
pids+=($!)
wait_for 100 grep -q "up: " "$dir/n6.log" || bad "secure node 6: $(cat "$dir/n6.log")"
# shellcheck disable=SC2046
ids=$(timeout 30 "$SN" status --json --connect "$(ep 5)" $(sec client) 2>/dev/null | jq -c '[.nodes[] | .id] | sort')
grep -q "^\[.*77.*\]$" <<<"$ids" && [ "$(jq length <<<"$ids")" = 2 ] &&
  ok "secure: a certificate made with --node-id 77 makes the node 77 without -n; its seed picked its own: $ids" ||
  bad "secure ids: $ids $(tail -3 "$dir/n6.log")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
