#!/usr/bin/env bash
# dashboard.sh - the dashboard (--dashboard) in a real browser: headless
# Chromium loads the page of a 3-node cluster on 127.0.0.1, runs its
# script, and the numbers it shows (node count, each node's state and
# processes, the total, the cluster's process table and its search) are checked
# against `schednode status --json` and the PIDs spawned. Skipped (77) only
# if Chromium is missing or cannot start, saying why. Args: $1 schednode.
set -u
SN=$1
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink, spread, ...): a plugin
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "SKIP: no chromium (Debian package 'chromium'; scripts/deps.sh installs it)"; exit 77; }
# as root Chromium needs --no-sandbox; a fresh profile, nothing fetched but the page
chrome() { # URL: the DOM after the page's script ran (3 s of virtual time)
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage \
    --user-data-dir="$(mktemp -d "$dir/profile.XXXX")" --virtual-time-budget=3000 --dump-dom "$1" 2>>"$dir/chrome.err"
}
if ! chrome "data:text/html,<p id=x>alive</p>" | grep -q '<p id="x">alive</p>'; then
  echo "SKIP: chromium cannot start: $(grep -v dbus "$dir/chrome.err" | tail -3)"
  exit 77
fi
ok "chromium starts headless"

declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
dport=$(free_port)
node_flags=(-w 1 --insecure)
start 1 "" --dashboard "tcp://127.0.0.1:$dport" && start 2 1 && start 3 1 ||
  { bad "three nodes"; echo "$pass passed, $fail failed"; exit 1; }
members() { [ "$(status 1 | jq '[.nodes[] | select(.state == "up" and .workers > 0)] | length')" = 3 ]; }
wait_for 100 members || bad "three members up, rows known"

# work that moves between the nodes, then processes that stay: sinks that
# wait for messages (3 on node 1, 5 on node 2, 2 on node 3)
out=$(call call --connect "$(ep 1)" spread run "300 2 spin" 2>&1)
grep -q "^300 done:" <<<"$out" || bad "spread: $out"
sinks1=()
for i in 1 2 3; do sinks1+=("$(call spawn --connect "$(ep 1)" msink collect 1000000)"); done
sinks2=()
for i in 1 2 3 4 5; do sinks2+=("$(call spawn --connect "$(ep 2)" msink collect 1000000)"); done
sinks3=()
for i in 1 2; do sinks3+=("$(call spawn --connect "$(ep 3)" msink collect 1000000)"); done
settled() { [ "$(call status --json --connect "$(ep 1)" | jq -c '[.nodes[] | .live]')" = "[3,5,2]" ]; }
wait_for 100 settled || bad "status shows 3, 5, 2 processes: $(call status --json --connect "$(ep 1)" | jq -c '[.nodes[] | .live]')"

# 20 messages from a process on node 3 to one on node 2 (both end once
# they are through): traffic between two nodes that are not the
# dashboard's
x=$(call spawn --connect "$(ep 2)" xsink collect 20)
out=$(call call --connect "$(ep 3)" xsource blast "$x 20" 2>&1)
[ "$out" = "20 messages in order" ] || bad "20 messages from node 3 to node 2: $out"
wait_for 100 settled || bad "the two ended: $(call status --json --connect "$(ep 1)" | jq -c '[.nodes[] | .live]')"

st=$(call status --json --connect "$(ep 1)")
dom=$(chrome "http://127.0.0.1:$dport/")
echo "$dom" >"$dir/dom.html"
grep -q 'data-ready="1"' <<<"$dom" && ok "the page loaded its data" || { bad "page not ready: $(grep -o '<span id="error">[^<]*' <<<"$dom")"; }
shown=$(sed -n 's/.*<span id="node-count">\([0-9]*\)<.*/\1/p' <<<"$dom")
[ "$shown" = "$(jq '.nodes | length' <<<"$st")" ] && [ "$shown" = 3 ] && ok "node count on the page: $shown" ||
  bad "node count: page '$shown', status $(jq '.nodes | length' <<<"$st")"
for n in 1 2 3; do
  row=$(grep -o "<tr data-node=\"$n\" data-state=\"[a-z]*\" data-live=\"[0-9]*\"" <<<"$dom")
  live=$(sed -n 's/.*data-live="\([0-9]*\)".*/\1/p' <<<"$row") state=$(sed -n 's/.*data-state="\([a-z]*\)".*/\1/p' <<<"$row")
  want_live=$(jq ".nodes[] | select(.id == $n) | .live" <<<"$st") want_state=$(jq -r ".nodes[] | select(.id == $n) | .state" <<<"$st")
  [ -n "$live" ] && [ "$live" = "$want_live" ] && [ "$state" = "$want_state" ] &&
    ok "node $n on the page: $state, $live processes (status --json: $want_state, $want_live)" ||
    bad "node $n: page '$state' '$live', status '$want_state' '$want_live'"
done
total=$(sed -n 's/.*<span id="proc-count">\([0-9]*\)<.*/\1/p' <<<"$dom")
[ "$total" = "$(jq '[.nodes[].live] | add' <<<"$st")" ] && ok "total processes on the page: $total" || bad "total: $total"
# the process table: every sink of the cluster, each with its node
listed=$(grep -o '<tr data-pid="[0-9.]*" data-node="[0-9]*"' <<<"$dom" | sed 's/.*data-pid="\([0-9.]*\)" data-node="\([0-9]*\)"/\1 \2/' | sort)
want=$( (for p in "${sinks1[@]}"; do echo "$p 1"; done; for p in "${sinks2[@]}"; do echo "$p 2"; done
  for p in "${sinks3[@]}"; do echo "$p 3"; done) | sort)
[ "$listed" = "$want" ] && ok "the process table lists the cluster's 10 sinks, each with its node" ||
  bad "process table: '$listed', spawned '$want'"
grep -q '<svg id="flows"[^>]*>.*<circle' <<<"$dom" && ok "the flow picture has the nodes" || bad "no flow picture"
drawn=$(grep -o '<line data-from="3" data-to="2" data-kind="msg" data-total="[0-9]*"' <<<"$dom" | sed 's/.*data-total="\([0-9]*\)"/\1/')
counted=$(curl -sf --max-time 10 "http://127.0.0.1:$dport/api/status" | jq '.flows[] | select(.from == 3 and .peer == 2) | .msgs_out')
[ -n "$drawn" ] && [ "$drawn" -ge 20 ] && [ "$drawn" = "$counted" ] &&
  ok "the picture has node 3's messages to node 2 ($drawn, as node 3 counts them)" ||
  bad "arrow 3->2: drawn '$drawn', node 3 counts '$counted'"
steals=$(grep -o '<line data-from="1" data-to="[23]" data-kind="steal"' <<<"$dom" | wc -l)
[ "$steals" -ge 1 ] && ok "and node 1's steals given to $steals other node(s)" || bad "no steal arrows from node 1"

# the search box (filled from the address: #q=...) filters the table
dom=$(chrome "http://127.0.0.1:$dport/#q=${sinks1[1]}")
found=$(grep -o '<tr data-pid="[0-9.]*"' <<<"$dom" | sed 's/.*="\(.*\)"/\1/')
[ "$found" = "${sinks1[1]}" ] && grep -q '1 of 10 shown' <<<"$dom" && ok "searching ${sinks1[1]} shows that process only" ||
  bad "search: '$found'"
dom=$(chrome "http://127.0.0.1:$dport/#q=node%202")
found=$(grep -o '<tr data-pid="[0-9.]*"' <<<"$dom" | sed 's/.*="\(.*\)"/\1/' | sort)
[ "$found" = "$(printf '%s\n' "${sinks2[@]}" | sort)" ] && grep -q '5 of 10 shown' <<<"$dom" &&
  ok "searching 'node 2' shows node 2's 5 sinks" || bad "search node 2: '$found'"

# the JSON the page reads has the rows of status --json, key for key
api=$(curl -sf --max-time 10 "http://127.0.0.1:$dport/api/status")
[ "$(jq -c '[.nodes[] | {id, state, live, workers}]' <<<"$api")" = "$(jq -c '[.nodes[] | {id, state, live, workers}]' <<<"$st")" ] &&
  ok "/api/status rows match status --json" || bad "/api/status: $api"
curl -sf --max-time 10 "http://127.0.0.1:$dport/metrics" | grep -q '^schednode_steps_total ' &&
  ok "--dashboard serves /metrics too" || bad "no /metrics on the dashboard"
"$SN" --dashboard nowhere >"$dir/bad" 2>&1
[ $? = 2 ] && grep -q -- "--dashboard" "$dir/bad" && ok "a bad --dashboard exits 2 naming it" || bad "bad flag: $(cat "$dir/bad")"

# each count with its noun, singular for one (dashboard.html noun()):
# "3 nodes, 10 processes" above; a node alone with one process: "1 node,
# 1 process"
counts() { sed -n 's|.*<span id="node-count">\([0-9]*\)</span> <span id="node-noun">\([a-z]*\)</span>, <span id="proc-count">\([0-9]*\)</span> <span id="proc-noun">\([a-z]*\)</span>.*|\1 \2, \3 \4|p'; }
said=$(counts <"$dir/dom.html")
[ "$said" = "3 nodes, 10 processes" ] && ok "the page says '$said'" || bad "the page says '$said' (want 3 nodes, 10 processes)"
port[4]=$(free_port) dport4=$(free_port)
start 4 "" --dashboard "tcp://127.0.0.1:$dport4" || bad "a fourth node, alone"
call spawn --connect "$(ep 4)" msink collect 1000000 >/dev/null
one() { [ "$(call status --json --connect "$(ep 4)" | jq -c '[.nodes[] | .live]')" = "[1]" ]; }
wait_for 100 one || bad "node 4 has one process: $(call status --json --connect "$(ep 4)" | jq -c '[.nodes[] | .live]')"
said=$(chrome "http://127.0.0.1:$dport4/" | counts)
[ "$said" = "1 node, 1 process" ] && ok "a node alone with one process: the page says '$said'" ||
  bad "the page of a node alone with one process says '$said' (want 1 node, 1 process)"

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
