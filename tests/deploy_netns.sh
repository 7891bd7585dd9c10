#!/usr/bin/env bash
# deploy_netns.sh - deploy/netns-cluster.sh: three nodes in their own network
# namespaces on a private bridge; messages across them; a cut link (the third
# node reaches both ends, so no one is declared down; a sender across it
# waits, its messages arrive after the heal) and its healing;
# an isolated node; kill -9 of a node and its restart; netem (or exit 3
# where the kernel has none); an up that fails or is interrupted undoes
# itself; down leaves nothing behind. Needs root and working namespaces,
# else exit 77 (skipped). Args: $1 schednode.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # absolute: it is linked and run from elsewhere
DEMO=$(dirname "$SN")/schednode-demo.so                # the demo and test types: a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
NC=$(cd "$(dirname "$0")/.." && pwd)/deploy/netns-cluster.sh

netns_ok || { echo "SKIP: $netns_why"; exit 77; }

# names and subnet unique to this run: tests may run in parallel
P="n$$t"
nsdir=$dir/ns
trap '"$NC" down --dir "$nsdir" >/dev/null 2>&1; "$NC" down --prefix "${P}f" >/dev/null 2>&1
      "$NC" down --prefix "${P}i" >/dev/null 2>&1; cleanup' EXIT
nc() { timeout 120 "$NC" "$@" --dir "$nsdir"; }

t0=$SECONDS
out=$(timeout 300 "$NC" up 3 --prefix "$P" --dir "$nsdir" --bin "$SN" --wait 120 -- --load "$DEMO" 2>&1); rc=$?
while IFS= read -r line; do echo "     $line"; done <<<"$out"
[ $rc -eq 0 ] && grep -q "^ready: 3 nodes up" <<<"$out" && ok "up 3: ready ($((SECONDS - t0)) s)" ||
  { bad "up 3: rc=$rc"; tail -n 5 "$nsdir"/n*.log; echo "$pass passed, $fail failed"; exit 1; }
grep -q "keys: $nsdir/keys" <<<"$out" && grep -q "log $nsdir/n1.log" <<<"$out" &&
  ok "up says where the keys and logs are" || bad "no keys/logs in: $out"
addr=() port=()
for i in 1 2 3; do addr[i]=$("$NC" addr "$i" --dir "$nsdir") port[i]=7100; done
[[ ${addr[1]} =~ ^10\.[0-9]+\.0\.1$ ]] && [ "${addr[3]%.3}" = "${addr[1]%.1}" ] && ok "addresses 10.R.0.1..3 (${addr[1]})" ||
  bad "addresses: ${addr[*]}"
[ "$(ip netns exec "${P}2" ip -4 -o addr show dev eth0 | awk '{print $4}')" = "${addr[2]}/24" ] &&
  [ "$(ip netns exec "${P}2" cat /sys/class/net/lo/operstate)" != down ] &&
  ok "namespace ${P}2 has eth0 with ${addr[2]}/24 and lo up" || bad "namespace ${P}2: $(ip netns exec "${P}2" ip -o addr)"
[ "$(ip -o link show master "${P}br" | wc -l)" = 3 ] && ok "three veths on bridge ${P}br" || bad "bridge ports"
for i in 1 2 3; do
  [ "$(ip netns identify "$(cat "$nsdir/n$i.pid")")" = "$P$i" ] || bad "node $i is not in namespace $P$i"
done

CL=(--cert "$nsdir/keys/client.cert" --authorized-keys "$nsdir/keys/authorized")
call_flags=("${CL[@]}") call_s=60 call_ms=30000
# status I: node I's status, asked inside I's namespace (view, state_of and all_up ask it)
status() { nc status --json --from "$1" 2>/dev/null; }

all_up 1 2 3 && ok "every node sees 1, 2, 3 up" || bad "views: $(views 1 2 3)"
table=$(nc status)
[ "$(grep -c " up " <<<"$table")" = 3 ] && grep -q "^NODE" <<<"$table" && ok "status prints the table" || bad "status: $table"

# --- messages across namespaces (README "A cluster")
sink=$(call spawn --connect "$(ep 3)" xsink collect 1000)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 1000" 2>&1)
[ "$out" = "1000 messages in order" ] && ok "1000 messages node 1 -> node 3, in order" || bad "1 -> 3: $out"
sink=$(call spawn --connect "$(ep 2)" xsink collect 1)
call call --connect "$(ep 3)" xwatch watch "$sink" >"$dir/w" 2>&1 &
w=$!
pids+=("$w")
sleep 1 # the monitor is in place
out=$(call send "$sink" hello --connect "$(ep 1)" 2>&1); rc=$?
wait $w
[ $rc -eq 0 ] && grep -q "^down $sink: " "$dir/w" && ok "send from node 1's client to a sink on node 2 ends it; node 3 saw it go" ||
  bad "send: rc=$rc $out / $(cat "$dir/w")"
# shellcheck disable=SC2016 # expanded by the sh inside the namespace
out=$(timeout 60 "$NC" exec 2 --dir "$nsdir" sh -c '$SN_BIN status --connect $SN_EP $SN_CLIENT' 2>&1)
[ "$(grep -c " up " <<<"$out")" = 3 ] && ok "exec 2: a client inside namespace 2 with SN_BIN, SN_EP, SN_CLIENT" || bad "exec: $out"

# --- cut 1-3: node 2 still reaches both, so no one is declared down
# (SWIM's probes through other members); 1 -> 3 waits for the heal
out=$(nc cut 1 3 2>&1); rc=$?
[ $rc -eq 0 ] && ok "cut 1 3" || bad "cut: $rc $out"
sink13=$(call spawn --connect "$(ep 3)" xsink collect 100)
call call --connect "$(ep 1)" xsource blast "$sink13 100" >"$dir/blast13" 2>&1 &
blast=$!
sleep 6 # (a member that answers nothing is down within about 2 s)
all_up 1 2 3 && ok "after the cut every node still sees 1, 2, 3 up (node 2 vouches for both ends)" || bad "a false down in the cut: $(views 1 2 3)"
kill -0 $blast 2>/dev/null && ok "a sender 1 -> 3 in the cut waits" || bad "1 -> 3 in the cut: $(cat "$dir/blast13")"
sink=$(call spawn --connect "$(ep 2)" xsink collect 100)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 100" 2>&1)
[ "$out" = "100 messages in order" ] && ok "node 1 still reaches node 2 during the cut" || bad "1 -> 2 in cut: $out"
out=$(nc cut 1 3 2>&1); rc=$?
[ $rc -eq 0 ] && ok "cut again: idempotent" || bad "cut twice: $rc $out"
out=$(nc heal 1 3 2>&1); rc=$?
[ $rc -eq 0 ] && ok "heal 1 3" || bad "heal: $rc $out"
t0=$SECONDS
wait_for 300 all_up 1 2 3 && ok "healed: every node sees 1, 2, 3 up again ($((SECONDS - t0)) s)" || bad "after heal: $(views 1 2 3)"
wait $blast
[ "$(cat "$dir/blast13")" = "100 messages in order" ] && ok "the waiting sender's 100 messages arrived after the heal, in order" ||
  bad "1 -> 3 across the heal: $(cat "$dir/blast13")"
sink=$(call spawn --connect "$(ep 3)" xsink collect 100)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 100" 2>&1)
[ "$out" = "100 messages in order" ] && ok "node 1 -> node 3 works again after the heal" || bad "1 -> 3 healed: $out"
out=$(nc heal 1 3 2>&1); rc=$?
[ $rc -eq 0 ] && ok "heal again: idempotent" || bad "heal twice: $rc $out"
out=$(nc cut 2 2 2>&1); rc=$?
[ $rc -eq 2 ] && ok "cut 2 2: exit 2" || bad "cut 2 2: $rc $out"
out=$(nc cut 1 9 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "bad node '9'" <<<"$out" && ok "cut 1 9: exit 2, no such node" || bad "cut 1 9: $rc $out"

# --- isolate 3: the others see it down, it sees them down (asked inside its namespace)
nc isolate 3 >/dev/null || bad "isolate 3"
isolated() { [ "$(view 1)" = "[1,2]" ] && [ "$(view 2)" = "[1,2]" ] && [ "$(view 3)" = "[3]" ]; }
wait_for 300 isolated &&
  ok "isolate 3: nodes 1 and 2 lose 3, node 3 loses both" || bad "isolated: $(views 1 2 3)"
nc rejoin 3 >/dev/null || bad "rejoin 3"
wait_for 300 all_up 1 2 3 && ok "rejoin 3: all up again" || bad "after rejoin: $(views 1 2 3)"

# --- kill -9 of node 2, then start it again
old2=$(cat "$nsdir/n2.pid")
out=$(nc kill 2 KILL 2>&1); rc=$?
[ $rc -eq 0 ] && ok "kill 2 KILL" || bad "kill: $rc $out"
t0=$(date +%s%N)
two_down() { [ "$(state_of 1 2)" = down ] && [ "$(state_of 3 2)" = down ]; }
wait_for 300 two_down &&
  ok "nodes 1 and 3 declare node 2 down ($((($(date +%s%N) - t0) / 1000000)) ms)" ||
  bad "after kill: 1 sees 2 $(state_of 1 2), 3 sees 2 $(state_of 3 2)"
out=$(nc kill 2 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "not running" <<<"$out" && ok "kill of a node that is not running: exit 1" || bad "kill twice: $rc $out"
out=$(nc start 2 --wait 120 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(cat "$nsdir/n2.pid")" != "$old2" ] && ok "start 2: back with a new pid" || bad "start 2: $rc $out"
wait_for 300 all_up 1 2 3 && ok "node 2 is up again in every view" || bad "after start: $(views 1 2 3)"
grep -q "node 2 .* restarted" "$nsdir/n1.log" && ok "node 1 logs node 2's restart" || bad "no restart log"
out=$(nc start 2 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "is running" <<<"$out" && ok "start of a running node: exit 1" || bad "start twice: $rc $out"
sink=$(call spawn --connect "$(ep 2)" xsink collect 100)
out=$(call call --connect "$(ep 3)" xsource blast "$sink 100" 2>&1)
[ "$out" = "100 messages in order" ] && ok "the new node 2 works (100 messages 3 -> 2)" || bad "3 -> 2: $out"

# --- netem: works, or says clearly that this kernel has none
out=$(nc delay 1 50 10 2>&1); rc=$?
if [ $rc -eq 0 ]; then
  ok "delay 1 50 10: netem applied"
  out=$(nc loss 1 1 2>&1) && ok "loss 1 1" || bad "loss: $out"
  out=$(nc clear 1 2>&1) && ok "clear 1" || bad "clear: $out"
elif [ $rc -eq 3 ] && grep -q "netem is not available in this kernel: " <<<"$out"; then
  ok "delay: exit 3, netem is not available in this kernel (said so)"
  out=$(nc loss 1 5 2>&1); rc=$?
  [ $rc -eq 3 ] && ok "loss: exit 3 as well" || bad "loss: $rc $out"
else
  bad "delay: rc=$rc $out"
fi
out=$(nc delay 1 fast 2>&1); rc=$?
[ $rc -eq 2 ] || [ $rc -eq 3 ] && ok "delay with a bad number: refused" || bad "delay fast: $rc $out"
all_up 1 2 3 && ok "after all that, still 1, 2, 3 up everywhere" || bad "end views: $(views 1 2 3)"

# --- help, usage
out=$("$NC" --help 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^usage:" <<<"$out" && ok "--help" || bad "--help: $rc"
good=1
for s in up down status addr exec kill start cut heal isolate rejoin delay loss clear; do
  out=$("$NC" "$s" --help 2>&1) && grep -q "usage: netns-cluster.sh" <<<"$out" || { good=0; echo "     $s --help: $out"; }
done
[ $good = 1 ] && ok "--help of every subcommand" || bad "subcommand help"
out=$("$NC" up 3 --prefix 9bad 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "bad prefix" <<<"$out" && ok "a bad prefix: exit 2" || bad "prefix: $rc $out"
out=$("$NC" up 3 --prefix "$P" --dir "$nsdir" --bin "$SN" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "is up" <<<"$out" && ok "a second up on a running cluster: refused" || bad "second up: $rc $out"

# --- down: nothing left, and a second down is fine
nodes=$(cat "$nsdir"/n*.pid)
out=$(nc down 2>&1); rc=$?
left=$(ip netns list | grep -c "^${P}[0-9]")
links=$(ip -o link show | grep -c ": $P")
alive=0
for p in $nodes; do [ -d "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" && alive=1; done
[ $rc -eq 0 ] && [ "$left" = 0 ] && [ "$links" = 0 ] && [ $alive = 0 ] &&
  ok "down: no namespace, veth or bridge of $P left, no node running" ||
  bad "down: rc=$rc namespaces=$left links=$links alive=$alive $out"
[ "$(grep -l "SIGTERM: shutting down" "$nsdir"/n[123].log | wc -l)" = 3 ] && [ "$(grep -c "stopped: " "$nsdir"/n1.log)" = 1 ] &&
  ok "down stops the nodes with SIGTERM (each logs its shutdown)" || bad "no SIGTERM shutdown logged"
out=$(nc down 2>&1); rc=$?
[ $rc -eq 0 ] && ok "down again: exit 0" || bad "down twice: $rc $out"

# --- an up that fails (node 1 exits: a seed whose key nobody has) undoes itself
out=$(timeout 120 "$NC" up 2 --prefix "${P}f" --dir "$dir/f" --bin "$SN" --wait 60 -- \
  --join tcp://127.0.0.1:9 --join-timeout 1000 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "undoing" <<<"$out" && ! ip netns list | grep -q "^${P}f[0-9]" &&
  ! ip link show "${P}fbr" >/dev/null 2>&1 && ok "a failed up: exit 1, everything it made is gone" || bad "failed up: $rc $out"

# --- an up interrupted (SIGTERM) while it waits for node 1 undoes itself:
# this schednode takes 30 s to start
# shellcheck disable=SC2016 # $1 and $@ are the wrapper's
printf '#!/bin/sh\ncase $1 in keygen) ;; *) sleep 30 ;; esac\nexec '\''%s'\'' "$@"\n' "$SN" >"$dir/slow-schednode"
chmod +x "$dir/slow-schednode"
"$NC" up 2 --prefix "${P}i" --dir "$dir/i" --bin "$dir/slow-schednode" >"$dir/i.out" 2>&1 &
upid=$!
pids+=("$upid")
wait_for 300 test -s "$dir/i/n1.pid" || bad "the interrupted up never started node 1"
n1=$(cat "$dir/i/n1.pid" 2>/dev/null)
kill -TERM "$upid"
wait "$upid"; rc=$?
gone_n1=1
[ -n "$n1" ] && [ -d "/proc/$n1" ] && ! grep -q '^State:.*Z' "/proc/$n1/status" && gone_n1=0
[ $rc -eq 143 ] && [ $gone_n1 = 1 ] && grep -q "undoing" "$dir/i.out" && ! ip netns list | grep -q "^${P}i[0-9]" && ! ip link show "${P}ibr" >/dev/null 2>&1 &&
  ok "an interrupted up: its node stopped, namespaces and bridge gone" || bad "interrupted up: rc=$rc n1 gone=$gone_n1 $(cat "$dir/i.out")"

if [ "$fail" -ne 0 ]; then
  for i in 1 2 3; do echo "--- node $i log (tail)"; tail -n 15 "$nsdir/n$i.log"; done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
