#!/usr/bin/env bash
# cluster.sh - membership with five real schednode processes on 127.0.0.1:
# joining through different seeds, every member converging on one view
# (read with `status --json` and jq), monitors across nodes, refused joins (taken id, another
# cluster, no seed), kill -9 of a member (declared down by every other
# member within the default timeout, and how long that took), the others
# working on, the restarted member (a new run: its old PIDs are dead) and a
# graceful leave (left, not down); an unauthorized key and an --insecure
# node refused, with the refusal logged on both sides; keys bound to nodes
# (a client's key, a certificate naming another endpoint or id, a live
# member's key: refused at join and as heartbeats), a seed that closes
# every connection before the handshake, and a node of a cluster just
# formed killed 0.5 s and 2 s after its join (declared down within 2.5 s).
# Args: $1 schednode, $2 rawzmq.
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
RAW=$2
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

declare -A port
for n in 1 2 3 4 5 6 7 8; do port[$n]=$(free_port); done

# keys: one per node (naming its endpoint, so others find its public key,
# and its id: the key is that node's only), one for the client commands;
# the authorized-keys directory gets the public halves. The rogue key is
# valid but not authorized. In $dir/extra, keys authorized only for the
# tests of keys bound to nodes: one naming node 2's endpoint, node 7's, and
# node 8's bound by its endpoint alone (no node id).
mkdir -p "$dir/auth"
for n in 1 2 3 4 5 6; do
  "$SN" keygen "$dir/keys" --name "n$n" --endpoint "$(ep $n)" -n "$n" >/dev/null || bad "keygen n$n"
done
"$SN" keygen "$dir/keys" --name client >/dev/null
"$SN" keygen "$dir/rogue" --name rogue --endpoint "$(ep 6)" >/dev/null
"$SN" keygen "$dir/extra" --name x2 --endpoint "$(ep 2)" -n 6 >/dev/null || bad "keygen x2"
"$SN" keygen "$dir/extra" --name n7 --endpoint "$(ep 7)" -n 7 >/dev/null || bad "keygen n7"
"$SN" keygen "$dir/extra" --name old8 --endpoint "$(ep 8)" >/dev/null || bad "keygen old8 (no node id)"
cp "$dir"/keys/*.cert "$dir/auth/"
[ "$(stat -c %a "$dir/keys/n1.cert_secret")" = 600 ] && [ -f "$dir/auth/n1.cert" ] && [ ! -f "$dir/auth/n1.cert_secret" ] &&
  ok "keygen writes a public certificate and a 0600 secret one" || bad "keygen files"
out=$("$SN" keygen "$dir/keys" --name n1 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "exists" <<<"$out" && ok "keygen does not overwrite a certificate" || bad "keygen overwrite: $out"
grep -qx '    node-id = "3"' "$dir/keys/n3.cert" && grep -qx "    endpoint = \"$(ep 3)\"" "$dir/keys/n3.cert" &&
  grep -qx '    role = "node"' "$dir/keys/n3.cert" && grep -qx '    role = "client"' "$dir/keys/client.cert" &&
  ! grep -q "node-id\|endpoint" "$dir/keys/client.cert" && ! grep -q "node-id" "$dir/extra/old8.cert" &&
  ok "keygen: a node's certificate names its endpoint and id (role node), the client's neither (role client)" ||
  bad "keygen metadata: $(grep -h ' = ' "$dir/keys/n3.cert" "$dir/keys/client.cert")"
out=$("$SN" keygen "$dir/keys" --name lone -n 7 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "needs --endpoint" <<<"$out" && [ ! -f "$dir/keys/lone.cert" ] &&
  ok "keygen -n without --endpoint: exit 2, nothing written" || bad "keygen -n alone: rc=$rc $out"
key_of() { sed -n 's/^ *public-key = "\(.*\)"$/\1/p' "$1"; }
CLIENT=(--cert "$dir/keys/client.cert" --authorized-keys "$dir/auth")

node_flags=(-w 2)
node_flags_of() { sec "n$1"; }
call_flags=("${CLIENT[@]}") call_s=30 call_ms=20000
# all_see NODE STATE ASKED...: every ASKED node reports NODE in STATE
all_see() {
  local n=$1 st=$2; shift 2
  for a in "$@"; do [ "$(state_of "$a" "$n")" = "$st" ] || return 1; done
}

# --- joining through different seeds: 1 starts the cluster, 2 joins
# through 1, 3 through 2, 4 through 3 (or 1), 5 through 4
start 1 && start 2 1 && start 3 2 && start 4 3 1 && start 5 4 ||
  { bad "five nodes join"; echo "$pass passed, $fail failed"; exit 1; }
ok "five nodes joined through four different seeds"
wait_for 100 all_up 1 2 3 4 5 && ok "every member sees the same five members up" ||
  bad "views differ: $(views 1 2 3 4 5)"
grep -q "joined cluster 'schednode' through node 4" "$dir/node5.log" && ok "node 5 logs whom it joined through" ||
  bad "no join log on node 5"
# (a member's row reaches node 1 with SWIM's probes: within a period per member)
rows_in() { [ "$(status 1 | jq '[.nodes[] | .workers] | add')" = 10 ]; }
wait_for 50 rows_in
st=$(status 1)
[ "$(jq '.nodes | length' <<<"$st")" = 5 ] && [ "$(jq '.nodes[0].id' <<<"$st")" = 1 ] &&
  [ "$(jq '[.nodes[] | .workers] | add' <<<"$st")" = 10 ] && [ "$(jq '.nodes[0].uptime_ms > 0' <<<"$st")" = true ] &&
  ok "status --json from node 1: five rows with workers and uptime" || bad "status: $st"
table=$(call status --connect "$(ep 1)")
grep -q "^NODE" <<<"$table" && [ "$(grep -c " up " <<<"$table")" = 5 ] && ok "status prints a table" ||
  bad "table: $table"

# --- messages between members that did not join through each other
sink=$(call spawn --connect "$(ep 5)" xsink collect 1000)
out=$(call call --connect "$(ep 2)" xsource blast "$sink 1000" 2>&1)
[ "$out" = "1000 messages in order" ] && ok "1000 messages node 2 -> node 5, in order" || bad "2 -> 5: $out"

# --- monitors across nodes: DOWN when the process ends, noproc for no
# process, unreachable for no such node
sink=$(call spawn --connect "$(ep 5)" xsink collect 10)
call call --connect "$(ep 1)" xwatch watch "$sink" >"$dir/w1" 2>&1 &
w1=$!
sleep 1 # the monitor is in place long before the sink ends
call call --connect "$(ep 2)" xsource blast "$sink 10" >/dev/null 2>&1
wait $w1
[ "$(cat "$dir/w1")" = "down $sink: finished" ] && ok "a process on node 1 monitoring one on node 5 gets its DOWN" ||
  bad "remote DOWN: $(cat "$dir/w1")"
out=$(call call --connect "$(ep 1)" xwatch watch "$sink" 2>&1)
[ "$out" = "down $sink: noproc" ] && ok "monitoring a finished remote process: DOWN noproc at once" ||
  bad "remote noproc: $out"
out=$(call call --connect "$(ep 1)" xwatch watch "99.1" 2>&1)
[ "$out" = "down 99.1: unreachable" ] && ok "monitoring a PID of no member: DOWN unreachable" || bad "unreachable: $out"

# --- refused joins: a taken id, another cluster, no seed at all
out=$(timeout 20 "$SN" --load "$DEMO" -n 3 --listen "$(ep 6)" $(sec n6) --join "$(ep 1)" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "node id 3 is taken by $(ep 3)" <<<"$out" && ok "a second node 3 is refused: id taken, exit 2" ||
  bad "taken id: rc=$rc $out"
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" $(sec n6) --join "$(ep 1)" --cluster other 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "cluster 'other', this is cluster 'schednode'" <<<"$out" &&
  ok "a node of another cluster is refused, exit 2" || bad "cluster name: rc=$rc $out"
grep -q "refused node 6 from $(ep 6)" "$dir/node1.log" && ok "the seed logs the refusal" || bad "no refusal log"
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" --insecure --join "tcp://127.0.0.1:$(free_port)" --join-timeout 1000 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "no seed answered within 1000 ms" <<<"$out" && ok "no seed: a clear error, exit 1" ||
  bad "no seed: rc=$rc $out"

# --- keys bound to nodes: a node's key joins only as the node its
# certificate names (endpoint, and id if it names one), never a client's,
# never one a live member holds. Each refusal: the joiner ends with the
# reason (exit 2: its configuration, not a timeout), node 1 logs it with the endpoint and
# key. bound_refused LABEL WANT NODE-ID CERT [OPTIONS]: node NODE-ID with
# CERT, listening at node 6's endpoint, joins through node 1 and must be
# refused with WANT in the reason. (Each case has an id of its own: a
# binary without these checks takes each in, and the next must not fail
# for that.)
bound_refused() {
  local label=$1 want=$2 n=$3 cert=$4 out rc line
  shift 4
  out=$(timeout 15 "$SN" --load "$DEMO" -n "$n" -w 1 --listen "$(ep 6)" --cert "$cert" --authorized-keys "$dir/auth" \
    --join "$(ep 1)" --join-timeout 5000 "$@" 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q "refused to let this node in: .*$want" <<<"$out"; then
    ok "$label: refused, the node says why and exits 2"
  else
    bad "$label: rc=$rc $(tail -3 <<<"$out")"
  fi
  line=$(grep -F "refused node $n from " "$dir/node1.log" | grep -F "(key $(key_of "$cert")): " | tail -1)
  grep -q "$want" <<<"$line" && ok "$label: node 1 logs the refusal with endpoint, key and reason" ||
    bad "$label: no refusal with key and reason in node 1's log: $(grep "refused node $n" "$dir/node1.log" | tail -1)"
}
# (a) the client's certificate names no node
bound_refused "(a) a node with the client's key" "names no node" 6 "$dir/keys/client.cert"
# (b) a certificate that names another node's endpoint (node 2's; made
# with -n 6, authorized) used at the joiner's own endpoint, and used with
# node 2's endpoint advertised (the endpoint check comes before the id's)
cp "$dir/extra/x2.cert" "$dir/auth/"
bound_refused "(b) a certificate naming node 2's endpoint, at another" "names the node at $(ep 2), but it says it is at $(ep 6)" \
  9 "$dir/extra/x2.cert"
bound_refused "(b) a certificate naming node 2's endpoint, advertising it" "its endpoint is node 2's (at $(ep 2)), which is up" \
  10 "$dir/extra/x2.cert" --advertise "$(ep 2)"
rm -f "$dir/auth/x2.cert"
# (c) node 2's key while node 2 is up, under another id
bound_refused "(c) node 2's key as node 11" "its key is node 2's (at $(ep 2)), which is up" 11 "$dir/keys/n2.cert"
# a certificate that names node 6, as node 7
bound_refused "a certificate naming node 6 used as node 7" "names node 6, but it says it is node 7" 7 "$dir/keys/n6.cert"
all_up 1 2 3 4 5 && ok "after the refusals the view is still the five nodes" || bad "view after refusals: $(view 1)"
# controls: node 7 with its own key, and node 8 with a key bound by its endpoint
# (no node id) join; each leaves again
cp "$dir/extra/n7.cert" "$dir/extra/old8.cert" "$dir/auth/"
for n in 7 8; do
  c=$dir/extra/$([ $n = 7 ] && echo n7 || echo old8).cert
  "$SN" --load "$DEMO" -n $n -w 1 --listen "$(ep $n)" --cert "$c" --authorized-keys "$dir/auth" --join "$(ep 1)" >"$dir/node$n.log" 2>&1 &
  pids+=($!); joiner=$!
  wait_for 100 all_up 1 2 3 4 5 $n && ok "node $n with its own key ($(basename "$c")) joins" ||
    bad "node $n with $(basename "$c"): $(tail -3 "$dir/node$n.log")"
  kill -TERM $joiner; wait $joiner
  wait_for 30 all_see $n left 1 || bad "node $n did not leave"
done
rm -f "$dir/auth/n7.cert" "$dir/auth/old8.cert"

# --- security: a key not authorized, a plain node, a plain client
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" --cert "$dir/rogue/rogue.cert" --authorized-keys "$dir/auth" \
  --join "$(ep 1)" --join-timeout 5000 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "refused this node: key not authorized" <<<"$out" &&
  ok "a node whose key is not authorized is refused, says so, exit 2" || bad "rogue key: rc=$rc $out"
rogue_key=$(sed -n 's/^ *public-key = "\(.*\)"$/\1/p' "$dir/rogue/rogue.cert")
wait_for 30 grep -qF "from 127.0.0.1 (key $rogue_key): key not authorized" "$dir/node1.log" &&
  ok "the seed logs the refused connection with its address and key" ||
  bad "no refused-key log naming 127.0.0.1 and $rogue_key on node 1: $(grep refused "$dir/node1.log" | tail -2)"
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" --insecure --join "$(ep 1)" --join-timeout 5000 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "security mismatch" <<<"$out" && ok "an --insecure node is refused by the secure cluster, exit 2" ||
  bad "insecure node: rc=$rc $out"
# a seed that hangs up on every connection before any handshake (as a
# CurveZMQ seed may, to a plain node): said at once, not at the timeout
cport=$(free_port)
"$RAW" "tcp://127.0.0.1:$cport" tcp:closer:8000 >"$dir/closer.out" 2>&1 &
closer=$!
pids+=("$closer")
wait_for 10 grep -q "closing every connection" "$dir/closer.out" || bad "rawzmq tcp:closer did not start"
t0=$(date +%s%N)
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" --insecure --join "tcp://127.0.0.1:$cport" --join-timeout 6000 2>&1)
rc=$?
took=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 2 ] && grep -q "refused this node: security mismatch" <<<"$out" && [ "$took" -lt 6000 ] &&
  ok "a seed that closes every connection before the handshake: refused in $took ms, exit 2" ||
  bad "closing seed: rc=$rc after $took ms: $out"
kill "$closer" 2>/dev/null; wait "$closer" 2>/dev/null
# the seed sees a mismatch, or a handshake the plain side broke off first
wait_for 30 grep -q "refused a connection .*\(security mismatch\|a client without keys\)" "$dir/node1.log" &&
  ok "the seed logs the insecure node's refusal" || bad "no mismatch log on node 1"
out=$(timeout 20 "$SN" status --connect "$(ep 1)" --timeout 5000 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "refused this client: security mismatch" <<<"$out" &&
  ok "a client without keys is refused with the reason" || bad "plain client: rc=$rc $out"
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" --cert "$dir/keys/n6.cert" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "go together" <<<"$out" && ok "--cert without --authorized-keys: exit 2" || bad "half keys: $rc $out"
out=$(timeout 20 "$SN" --load "$DEMO" -n 6 --listen "$(ep 6)" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "insecure" <<<"$out" && ok "a listening node without keys or --insecure: exit 2" ||
  bad "no keys: $rc $out"

# --- kill -9 of node 3: every other member declares it down in time
old=$(call spawn --connect "$(ep 3)" xsink collect 5)
call call --connect "$(ep 1)" xwatch watch "$old" >"$dir/w2" 2>&1 &
w2=$!
sleep 1 # the monitor is in place
kill -9 "$node_pid_3"; wait "$node_pid_3" 2>/dev/null
t0=$(date +%s%N)
if wait_for 100 all_see 3 down 1 2 4 5; then
  ms=$((($(date +%s%N) - t0) / 1000000))
  echo "     down-detection: every member saw node 3 down after $ms ms (timeout 1500 ms)"
  [ "$ms" -lt 3000 ] && ok "node 3 declared down by all four others within 3 s" || bad "down after $ms ms"
else
  bad "node 3 not down everywhere: $(for a in 1 2 4 5; do echo -n "$a:$(state_of $a 3) "; done)"
fi
wait $w2
[ "$(cat "$dir/w2")" = "down $old: nodedown" ] && ok "a monitor of a process on the killed node: DOWN nodedown" ||
  bad "nodedown DOWN: $(cat "$dir/w2")"
sink=$(call spawn --connect "$(ep 5)" xsink collect 1000)
out=$(call call --connect "$(ep 1)" xsource blast "$sink 1000" 2>&1)
[ "$out" = "1000 messages in order" ] && ok "the others keep working (1000 messages 1 -> 5)" || bad "1 -> 5: $out"
out=$(call call --connect "$(ep 1)" xsource blast "$old 1" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "nodedown" <<<"$out" && ok "a send to the dead node comes back: nodedown" ||
  bad "to dead node: rc=$rc $out"

# --- restart of node 3: a new run, its old PIDs dead
start 3 1 || bad "node 3 restarts"
wait_for 100 all_up 1 2 3 4 5 && ok "node 3 is back and every member sees five up" || bad "no rejoin: $(view 1)"
grep -q "node 3 .* restarted" "$dir/node1.log" && ok "node 1 logs the restart" || bad "no restart log"
out=$(call call --connect "$(ep 2)" xsource blast "$old 1" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "noproc" <<<"$out" && ok "a PID of node 3's earlier run is dead: noproc" ||
  bad "old PID: rc=$rc $out"
out=$(call call --connect "$(ep 2)" xwatch watch "$old" 2>&1)
[ "$out" = "down $old: noproc" ] && ok "monitoring a PID of the earlier run: DOWN noproc" || bad "old monitor: $out"
sink=$(call spawn --connect "$(ep 3)" xsink collect 1000)
out=$(call call --connect "$(ep 4)" xsource blast "$sink 1000" 2>&1)
[ "$out" = "1000 messages in order" ] && ok "the new node 3 works (1000 messages 4 -> 3)" || bad "4 -> 3: $out"

# --- graceful leave of node 4: left, not down, and not logged as a failure
kill -TERM "$node_pid_4"
wait "$node_pid_4"; rc=$?
[ $rc -eq 0 ] && ok "node 4 stops on SIGTERM with exit 0" || bad "node 4 exit $rc"
wait_for 30 all_see 4 left 1 2 3 5 && ok "every member reports node 4 as left" ||
  bad "node 4 not left everywhere: $(for a in 1 2 3 5; do echo -n "$a:$(state_of $a 4) "; done)"
sleep 2 # past the down timeout: a left node must not turn into a down one
all_see 4 left 1 2 3 5 && ! grep -q "node 4 .* is down" "$dir"/node[1235].log &&
  ok "a left node is never reported down" || bad "node 4 reported down after leaving"

# --- the founder (no seeds) dies and restarts alone: it starts a cluster of
# its own, but the members still heartbeat it, and it takes them in (the
# two views merge instead of staying split)
kill -9 "$node_pid_1"; wait "$node_pid_1" 2>/dev/null
wait_for 50 all_see 1 down 2 3 5 || bad "node 1 not down after kill -9"
start 1 || bad "node 1 restarts with no seed"
wait_for 100 all_up 1 2 3 5 && ok "the founder restarted alone and every node sees 1, 2, 3, 5 up (one cluster)" ||
  bad "split after the founder's restart: $(views 1 2 3 5)"

# --- but a node of another cluster that heartbeats a member is not taken
# in that way, even with a key the cluster knows: node 6, cluster 'other',
# configured with node 1 as its peer (no join, so no refusal either)
"$SN" --load "$DEMO" -n 6 -w 1 --listen "$(ep 6)" $(sec n6) --cluster other --peer "1=$(ep 1)" >>"$dir/node6.log" 2>&1 &
pids+=($!); other=$!
wait_for 100 grep -q "dropped a bad frame from node 6: heartbeat from a node of another cluster" "$dir/node1.log" &&
  ok "node 1 drops heartbeats from node 6 of cluster 'other', and says why" ||
  bad "no log of node 6's heartbeats: $(tail -3 "$dir/node1.log")"
sleep 0.5
all_up 1 2 3 5 && ok "node 6 of another cluster did not become a member" ||
  bad "node 6 taken in: $(views 1 2 3 5)"
kill -TERM "$other"; wait "$other" 2>/dev/null

# --- nor does a node that heartbeats a member with a key that is not its
# own: node 6 in a fixed cluster with node 1 (no join, so no Hello to
# refuse), with node 2's key and node 2's endpoint advertised, and with the
# client's key: node 1 drops the heartbeats, says why, and never takes it in
"$SN" --load "$DEMO" -n 6 -w 1 --listen "$(ep 6)" --advertise "$(ep 2)" $(sec n2) --peer "1=$(ep 1)" >>"$dir/node6.log" 2>&1 &
pids+=($!); other=$!
wait_for 100 grep -q "dropped a bad frame from node 6: heartbeat from node 6 at $(ep 2) .*its key is node 2's" "$dir/node1.log" &&
  ok "node 1 drops heartbeats from a node 6 with node 2's key, and says why" ||
  bad "no log of node 6's heartbeats with node 2's key: $(grep "node 6" "$dir/node1.log" | tail -2)"
sleep 0.5
all_up 1 2 3 5 && ok "node 6 with node 2's key did not become a member" ||
  bad "node 6 with node 2's key taken in: $(views 1 2 3 5)"
kill -TERM "$other"; wait "$other" 2>/dev/null
"$SN" --load "$DEMO" -n 6 -w 1 --listen "$(ep 6)" "${CLIENT[@]}" --peer "1=$(ep 1)" >>"$dir/node6.log" 2>&1 &
pids+=($!); other=$!
wait_for 100 grep -q "dropped a bad frame from node 0: a heartbeat with a client's key (it speaks for no node)" "$dir/node1.log" &&
  ok "node 1 drops heartbeats from a node 6 with the client's key, and says why" ||
  bad "no log of node 6's heartbeats with the client's key: $(grep "node 6" "$dir/node1.log" | tail -2)"
all_up 1 2 3 5 && ok "node 6 with the client's key did not become a member" ||
  bad "node 6 with the client's key taken in: $(views 1 2 3 5)"
kill -TERM "$other"; wait "$other" 2>/dev/null

for n in 1 2 3 5; do
  eval "p=\$node_pid_$n"
  kill -TERM "$p"; wait "$p"; rc=$?
  [ $rc -eq 0 ] && ok "node $n stops on SIGTERM with exit 0" || bad "node $n exit $rc"
done
# --- a node that dies in its first seconds: a cluster of three just formed
# (node 1 starts it, 2 and 3 join through it), node 3 killed 0.5 s after
# its join, then its next run killed 2 s after its join: nodes 1 and 2
# declare it down within 2.5 s each time (the founder accuses from the
# start, and a member's age does not lengthen its suspicion: relay/swim.c,
# NEW_PERIODS)
start 1 && start 2 1 || bad "a new cluster of nodes 1 and 2"
for age in 0.5 2; do
  joins=$(grep -c "joined cluster" "$dir/node3.log" 2>/dev/null)
  start 3 1 && wait_for 100 eval '[ "$(grep -c "joined cluster" "$dir/node3.log")" -gt "$joins" ]' ||
    { bad "node 3 did not join the new cluster"; continue; }
  sleep "$age"
  kday=$(date +%H:%M:%S.%N)
  kill -9 "$node_pid_3"; wait "$node_pid_3" 2>/dev/null
  if wait_for 100 all_see 3 down 1 2; then
    # the later of the two "is down" lines, by the logs' millisecond times
    ms=$(for n in 1 2; do grep -h "node=$n node 3 at .* is down" "$dir/node$n.log" | tail -1; done |
      awk -v k="$kday" 'function sec(t, a) { split(t, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        { d = sec($4) - sec(k); if (d < 0) d += 86400; if (d > m) m = d } END { printf "%d", m * 1000 }')
    echo "     down-detection: nodes 1 and 2 saw node 3, killed $age s after its join, down after $ms ms"
    [ "$ms" -lt 2500 ] && ok "node 3 killed $age s after its join: down by both others within 2.5 s" ||
      bad "node 3 killed $age s after its join: down after $ms ms (bound 2500)"
  else
    bad "node 3 killed $age s after its join: not down everywhere in 10 s: $(for a in 1 2; do echo -n "$a:$(state_of $a 3) "; done)"
  fi
done
for n in 1 2; do
  eval "p=\$node_pid_$n"
  kill -TERM "$p"; wait "$p"
done

if [ "$fail" -ne 0 ]; then
  grep -h "refused" "$dir"/node*.log | head -5
  for n in 1 3 5; do echo "--- node $n log (tail)"; tail -20 "$dir/node$n.log"; done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
