#!/usr/bin/env bash
# The main job: install what is missing, build (Release), start a secure
# three-node cluster on this machine, run a workload submitted at node 1
# that crosses nodes both ways -- messages between processes on different
# nodes, and an imbalanced load that the other nodes steal -- show live
# progress, print a table per node, and stop the cluster.
#   DEMO_PROCS (3000) spin processes of DEMO_MS (4) ms each, all spawned on
#   node 1; DEMO_MSGS (200000) messages from node 1 to each of nodes 2 and 3.
#   SN_PREFIX (/usr/local): where the build is installed afterwards
#   (`cmake --install`: schednode, the header, pkg-config modules, the CMake
#   package, man pages), so that plugins build against it at once;
#   SN_PREFIX=none installs nothing.
#   SCHEDNODE_BIN=PATH: use that program, skip installing and building (the
#   tests run the demo this way).
set -euo pipefail
cd "$(dirname "$0")/.."
procs=${DEMO_PROCS:-3000} ms=${DEMO_MS:-4} msgs=${DEMO_MSGS:-200000}

# install_sdk: cmake --install into $SN_PREFIX, as root or through sudo
install_sdk() {
  local prefix=${SN_PREFIX:-/usr/local} sudo=()
  [ "$prefix" != none ] || return 0
  if [ "$(id -u)" -ne 0 ] && ! { mkdir -p "$prefix" 2>/dev/null && [ -w "$prefix" ]; }; then
    sudo=(sudo)
    [ -t 0 ] || sudo=(sudo -n)
  fi
  echo "== installing into $prefix (SN_PREFIX=DIR for another prefix, SN_PREFIX=none for none) =="
  "${sudo[@]}" cmake --install build --prefix "$prefix" >/dev/null
  [ "$(id -u)" -ne 0 ] || ! command -v ldconfig >/dev/null || ldconfig # libschednode.so for embedders
  echo "   $prefix/bin/schednode; plugins: pkg-config schednode-plugin, or find_package(schednode) + schednode::plugin"
}

bin=${SCHEDNODE_BIN:-}
if [ -z "$bin" ]; then
  bash scripts/deps.sh
  echo "== building (Release) =="
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" >/dev/null
  install_sdk
  bin=build/schednode
fi

state=$(mktemp -d)
lc() { deploy/local-cluster.sh --dir "$state/cluster" --bin "$bin" "$@"; }
cleanup() { lc down >/dev/null 2>&1 || true; rm -rf "$state"; }
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping the cluster"; exit 130' INT TERM

echo "== starting a secure 3-node cluster on 127.0.0.1 =="
# the demo types (xsink, xsource, spread, ...) are a plugin next to the
# program, or in LIB/schednode when installed
demo_so=$(dirname "$bin")/schednode-demo.so
[ -f "$demo_so" ] || demo_so=$(find "$(dirname "$bin")/../lib"* -name schednode-demo.so 2>/dev/null | head -1)
lc up 3 -w 2 -- --load "$(realpath "$demo_so")"

# own_row I: node I's own counters (as it reports itself, not a heartbeat old)
own_row() { lc client -n "$1" status --json | jq -c '.nodes[0]'; }
declare -A before
for i in 1 2 3; do before[$i]=$(own_row "$i"); done

echo
echo "== workload, all submitted at node 1 =="
echo "  - $procs processes of ${ms} ms CPU each, spawned on node 1 (spread run): idle nodes steal them"
echo "  - $msgs numbered messages from a process on node 1 to one on node 2, and as many to one on node 3"
sink2=$(lc client -n 2 spawn xsink collect "$msgs")
sink3=$(lc client -n 3 spawn xsink collect "$msgs")
start=$(date +%s.%N)
lc client -n 1 call spread run "$procs $ms" >"$state/spread.out" 2>&1 &
spread_pid=$!
lc client -n 1 call xsource blast "$sink2 $msgs" >"$state/x2.out" 2>&1 &
x2_pid=$!
lc client -n 1 call xsource blast "$sink3 $msgs" >"$state/x3.out" 2>&1 &
x3_pid=$!

# live progress from node 1's view (other nodes' figures are at most one
# heartbeat, 200 ms, old)
echo
echo "(per node: ready processes, processes done, messages in/out, steals in/out)"
printf '%7s  %-34s %-34s %-34s\n' time "node 1" "node 2" "node 3"
while kill -0 $spread_pid 2>/dev/null || kill -0 $x2_pid 2>/dev/null || kill -0 $x3_pid 2>/dev/null; do
  now=$(date +%s.%N)
  IFS=$'\t' read -r c1 c2 c3 < <(lc client -n 1 status --json 2>/dev/null |
    jq -r '[.nodes | sort_by(.id)[] | "\(.ready) \(.completed) \(.msgs_in)/\(.msgs_out) \(.steals_in)/\(.steals_out)"] | @tsv' || true) || true
  printf '%6.1fs  %-34s %-34s %-34s\n' "$(awk "BEGIN { print $now - $start }")" "${c1:-?}" "${c2:-?}" "${c3:-?}"
  sleep 0.5
done
end=$(date +%s.%N)
rc=0
wait $spread_pid || rc=1
wait $x2_pid || rc=1
wait $x3_pid || rc=1

echo
echo "== results =="
echo "spread (node 1):      $(cat "$state/spread.out")"
echo "node 1 -> node 2:     $(cat "$state/x2.out")"
echo "node 1 -> node 3:     $(cat "$state/x3.out")"
elapsed=$(awk "BEGIN { print $end - $start }")
printf 'workload time:        %.2f s\n' "$elapsed"
echo
printf '%-5s %10s %10s %10s %10s %10s %9s %8s\n' NODE "PROCS_RUN" "MSGS_IN" "MSGS_OUT" "STEALS_IN" "STEALS_OUT" "MIGRATED" "UPTIME"
for i in 1 2 3; do
  after=$(own_row "$i")
  jq -nr --argjson a "$after" --argjson b "${before[$i]}" \
    '[$a.id, $a.completed - $b.completed, $a.msgs_in - $b.msgs_in, $a.msgs_out - $b.msgs_out,
      $a.steals_in - $b.steals_in, $a.steals_out - $b.steals_out, $a.migrated - $b.migrated,
      ($a.uptime_ms / 100 | floor) / 10] | @tsv' |
    awk -F'\t' '{ printf "%-5s %10s %10s %10s %10s %10s %9s %7.1fs\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
done
echo "(PROCS_RUN: processes that finished on the node; MSGS: messages that crossed nodes;"
echo " STEALS: batches taken from / given to other nodes; MIGRATED: processes that moved away;"
echo " UPTIME: how long the node has run)"
echo
echo "== stopping the cluster =="
lc down
trap - EXIT
rm -rf "$state"
exit $rc
