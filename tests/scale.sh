#!/usr/bin/env bash
# scale.sh - a cluster of many nodes on this machine: N
# schednode processes with one worker each (SN_SCALE_NODES, default 50;
# 12 under a sanitizer, whose runtime costs CPU of its own), all joining
# through node 1 on 127.0.0.1. Checks:
#   - every node comes to know every other (within 60 s),
#   - 10 s idle: no node is declared down,
#   - kill -9 of one node: every other declares it down (within 30 s),
#   - and no other node is declared down at any time (no false downs).
# Times are printed, not asserted (bench/cluster-scale.sh measures them).
# Args: $1 schednode.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$1
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
N=${SN_SCALE_NODES:-50}
[ -n "${SN_SANITIZE:-}" ] && [ -z "${SN_SCALE_NODES:-}" ] && N=12
# how many of the n logs name all n-1 others as members
all_see_all() {
  awk -v want=$((N - 1)) '
    FNR == 1 { if (f != "") { if (c >= want) ok++ } f = FILENAME; c = 0; delete seen }
    / is a member/ { for (i = 1; i < NF; i++) if ($i == "node" && $(i + 2) == "at") { if (!seen[$(i + 1)]++) c++; break } }
    END { if (f != "" && c >= want) ok++; print ok + 0 }' "$dir"/n*.log
}
downs_of() { grep -h "node=[0-9]* node $1 at .* is down" "$dir"/n*.log 2>/dev/null | grep -o "node=[0-9]*" | sort -u | wc -l; }

"$SN" -n 1 -w 1 --insecure --listen 'tcp://127.0.0.1:*' >"$dir/n1.log" 2>&1 &
pids+=($!)
ep=""
wait_for 100 grep -q "listening on" "$dir/n1.log" && ep=$(grep -o "listening on tcp://[0-9.:]*" "$dir/n1.log" | head -1 | cut -d' ' -f3)
[ -n "$ep" ] || { bad "node 1 did not start: $(cat "$dir/n1.log")"; exit 1; }
t0=$(now_ms)
for i in $(seq 2 "$N"); do
  "$SN" -n "$i" -w 1 --insecure --listen 'tcp://127.0.0.1:*' --join "$ep" >"$dir/n$i.log" 2>&1 &
  pids+=($!)
done
converged() { [ "$(all_see_all)" -ge "$N" ]; }
if wait_for 600 converged; then
  ok "$N nodes: every node knows every other ($(($(now_ms) - t0)) ms from the first join)"
else
  bad "$N nodes: only $(all_see_all) of them know all the others after 60 s"
fi
sleep 10
d=$(cat "$dir"/n*.log | grep -c " is down")
[ "$d" -eq 0 ] && ok "10 s idle: no node declared down" || bad "10 s idle: $d false downs: $(grep -h " is down" "$dir"/n*.log | head -3)"
victim=$N
kill -9 "${pids[$((N - 1))]}"
wait "${pids[$((N - 1))]}" 2>/dev/null
k0=$(now_ms)
seen_dead() { [ "$(downs_of "$victim")" -ge $((N - 1)) ]; }
if wait_for 300 seen_dead; then
  ok "kill -9 of node $victim: all $((N - 1)) others declared it down ($(($(now_ms) - k0)) ms)"
else
  bad "kill -9 of node $victim: $(downs_of "$victim") of $((N - 1)) declared it down within 30 s"
fi
others=$(grep -h " is down" "$dir"/n*.log | grep -vc "node=[0-9]* node $victim at ")
[ "$others" -eq 0 ] && ok "no live node was ever declared down" ||
  bad "$others false downs: $(grep -h " is down" "$dir"/n*.log | grep -v "node $victim at " | head -3)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
