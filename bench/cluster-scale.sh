#!/usr/bin/env bash
# cluster-scale.sh - what a cluster of N nodes costs on this machine, as a
# user would run it: N schednode processes with one worker each, all
# joining through node 1 on 127.0.0.1. For each N it prints
#   RESULT cluster-join-N <s> s          start of the joins until every node
#                                        has logged every other as a member
#   RESULT cluster-settle-cpu-N <pct> %  CPU of the whole cluster while it
#                                        settles: from the joins' end for N
#                                        probe periods plus 5 s (every node
#                                        has probed every member once), or
#                                        until every node has a TCP
#                                        connection to every other if that
#                                        comes first (the probes made them
#                                        when they went over TCP); the
#                                        connections then are printed below
#   RESULT cluster-idle-cpu-N <pct> %    CPU of the whole cluster over
#                                        SCALE_IDLE_S seconds idle, once it
#                                        has settled, in % of one core
#                                        (utime+stime of all nodes)
#   RESULT cluster-idle-wakeups-N <n> /node/s  thread wake-ups meanwhile
#                                        (context switches of every thread
#                                        of every node, per node per second)
#   RESULT cluster-spread-N <s> s        a spread of SCALE_SPREAD processes
#                                        (5 ms each) from node 1, stealing on
#   RESULT cluster-false-downs-N <n>     "is down" lines logged before any
#                                        node was killed (join, idle, spread)
#   RESULT cluster-detect-N <ms> ms      kill -9 of node N until every other
#                                        node has logged it down (the logs'
#                                        millisecond times)
# A benchmark, not a test: nothing is asserted; a step that does not finish
# in its bound prints "timeout" as its value.
# Usage: cluster-scale.sh SCHEDNODE [N...] (default: 10 20 50 100)
# Env: SCALE_IDLE_S (10), SCALE_SPREAD (4000), SCALE_QUIET_S (0: seconds
# more of idle before the kill, to count false downs over a longer time),
# SCALE_KEEP (a directory to keep the last size's node logs in).
set -u
SN=$(realpath "$1")
DEMO=$(dirname "$SN")/schednode-demo.so # the demo types (spread, spin): a plugin
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 20 50 100)
IDLE=${SCALE_IDLE_S:-10} SPREAD=${SCALE_SPREAD:-4000} QUIET=${SCALE_QUIET_S:-0}
HB=$(grep -o -- '--heartbeat-ms [0-9]*' <<<"${SCALE_FLAGS:-}" | awk '{print $2}')
HB=${HB:-200} # --heartbeat-ms: the default unless SCALE_FLAGS sets it
# the probe period at N nodes (ms): it grows with log10 N past ten (swim.c, period_scale)
period() { awk -v hb="$HB" -v n="$1" 'BEGIN { l = log(n) / log(10); if (l < 1) l = 1; printf "%d", hb * (1 + (l - 1) / 2) }'; }
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; if [ -n "${SCALE_KEEP:-}" ]; then rm -rf "$SCALE_KEEP"; mv "$dir" "$SCALE_KEEP"; else rm -rf "$dir"; fi; }
trap cleanup EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# how many of the N logs name all N-1 others as members
all_see_all() {
  local n=$1
  awk -v want=$((n - 1)) '
    FNR == 1 { if (f != "") { if (c >= want) ok++ } f = FILENAME; c = 0; delete seen }
    / is a member/ { for (i = 1; i < NF; i++) if ($i == "node" && $(i + 2) == "at") { if (!seen[$(i + 1)]++) c++; break } }
    END { if (f != "" && c >= want) ok++; print ok + 0 }' "$dir"/n*.log
}
# how many logs other than node $2's say node $2 is down
seen_down() { grep -l "node=[0-9]* node $2 at .* is down" "$dir"/n*.log 2>/dev/null | grep -vc "/n$2.log$"; }
# established TCP connection ends on 127.0.0.1 with a node's listening
# port on one side (a connection between two nodes has two ends)
mesh_sockets() {
  local ports
  ports=$(grep -ho "listening on tcp://127.0.0.1:[0-9]*" "$dir"/n*.log | sed 's/.*://' | tr '\n' ' ')
  ss -Htn state established 2>/dev/null | awk -v ports="$ports" '
    BEGIN { split(ports, p, " "); for (i in p) lp[p[i]] = 1 }
    { l = $(NF - 1); r = $NF; sub(/.*:/, "", l); sub(/.*:/, "", r); if ((l in lp) || (r in lp)) c++ }
    END { print c + 0 }'
}
# Each sample is one read of every node's /proc files (one cat), so that
# its time stays small beside the interval it bounds however many nodes
# there are (with a process per node per sample, a sample takes seconds on
# a loaded machine, and the CPU of those seconds would count against an
# interval that does not include them).
wakeups() { # context switches of every thread of every node
  local p files=()
  for p in "${pids[@]}"; do files+=(/proc/"$p"/task/*/status); done
  cat "${files[@]}" 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'
}
cpu_ticks() { # utime + stime of every node, in clock ticks
  local p files=()
  for p in "${pids[@]}"; do files+=(/proc/"$p"/stat); done
  cat "${files[@]}" 2>/dev/null | awk '{ t += $14 + $15 } END { print t + 0 }'
}

for n in "${sizes[@]}"; do
  pids=()
  rm -f "$dir"/n*.log
  "$SN" --load "$DEMO" ${SCALE_FLAGS:-} -n 1 -w 1 --insecure --listen 'tcp://127.0.0.1:*' >"$dir/n1.log" 2>&1 &
  pids+=($!)
  ep=""
  for _ in $(seq 100); do
    ep=$(grep -o "listening on tcp://[0-9.:]*" "$dir/n1.log" | head -1 | cut -d' ' -f3)
    [ -n "$ep" ] && break
    sleep 0.1
  done
  [ -n "$ep" ] || { echo "node 1 did not start: $(cat "$dir/n1.log")"; exit 1; }
  t0=$(now_ms)
  for i in $(seq 2 "$n"); do
    "$SN" --load "$DEMO" ${SCALE_FLAGS:-} -n "$i" -w 1 --insecure --listen 'tcp://127.0.0.1:*' --join "$ep" >"$dir/n$i.log" 2>&1 &
    pids+=($!)
  done
  join="timeout"
  while [ $(($(now_ms) - t0)) -lt 120000 ]; do
    if [ "$(all_see_all "$n")" -ge "$n" ]; then
      join=$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.2f", ms / 1000 }')
      break
    fi
    sleep 0.1
  done
  echo "RESULT cluster-join-$n $join s"
  fd_join=$(cat "$dir"/n*.log | grep -c " is down")
  # Settling: a cluster that just formed is busier for about N periods (a
  # node's first probe of each member; with probes over TCP, a connection
  # made at each). Idle is measured after N periods and 5 s, or once every
  # node has a TCP connection to every other (then the probes are done
  # making them), whichever comes first.
  c0=$(cpu_ticks) w0=$(now_ms) want=$((2 * n * (n - 1))) got=0
  settle=$((n * $(period "$n") + 5000))
  while [ $(($(now_ms) - w0)) -lt $settle ]; do
    got=$(mesh_sockets)
    [ "$got" -ge "$want" ] && break
    sleep 0.5
  done
  c1=$(cpu_ticks) w1=$(now_ms)
  hz=$(getconf CLK_TCK)
  awk -v c=$((c1 - c0)) -v hz="$hz" -v ms=$((w1 - w0)) -v got="$got" -v want="$want" -v n="$n" \
    'BEGIN { printf "RESULT cluster-settle-cpu-%d %.1f %%\n    settle: %.1f s; %d of %d TCP connection ends between nodes\n", n, 100 * c / hz / (ms / 1000), ms / 1000, got, want }'
  sleep 1
  x0=$(wakeups) c0=$(cpu_ticks) w0=$(now_ms)
  sleep "$IDLE"
  c1=$(cpu_ticks) w1=$(now_ms) x1=$(wakeups)
  awk -v c=$((c1 - c0)) -v hz="$hz" -v ms=$((w1 - w0)) 'BEGIN { printf "RESULT cluster-idle-cpu-'"$n"' %.1f %%\n", 100 * c / hz / (ms / 1000) }'
  awk -v x=$((x1 - x0)) -v n="$n" -v ms=$((w1 - w0)) 'BEGIN { printf "RESULT cluster-idle-wakeups-'"$n"' %.1f /node/s\n", x / n / (ms / 1000) }'
  fd_idle=$(cat "$dir"/n*.log | grep -c " is down")
  s0=$(now_ms)
  out=$(timeout 300 "$SN" --insecure --timeout 240000 call --connect "$ep" spread run "$SPREAD 5" 2>&1)
  if grep -q "^$SPREAD done:" <<<"$out" && ! grep -q missing <<<"$out"; then
    awk -v ms=$(($(now_ms) - s0)) 'BEGIN { printf "RESULT cluster-spread-'"$n"' %.2f s\n", ms / 1000 }'
    echo "    spread: $(grep -o "on node" <<<"$out" | wc -l) nodes ran spins"
  else
    echo "RESULT cluster-spread-$n failed s"
    echo "    spread: $out" | head -3
  fi
  sleep "$QUIET"
  false_downs=$(cat "$dir"/n*.log | grep -c " is down")
  echo "RESULT cluster-false-downs-$n $false_downs"
  [ "$false_downs" -gt 0 ] && echo "    false downs: $fd_join by the end of the joins, $((fd_idle - fd_join)) idle, $((false_downs - fd_idle)) in the spread; first: $(grep -h " is down" "$dir"/n*.log | head -1)"
  k0=$(now_ms) kday=$(date +%H:%M:%S.%N)
  kill -9 "${pids[$((n - 1))]}"
  wait "${pids[$((n - 1))]}" 2>/dev/null
  detect="timeout"
  while [ $(($(now_ms) - k0)) -lt 60000 ]; do
    if [ "$(seen_down "$n" "$n")" -ge $((n - 1)) ]; then
      # the last of the down lines, by its time in the log (ms), less the kill's
      detect=$(grep -h "node=[0-9]* node $n at .* is down" "$dir"/n*.log | awk -v k="$kday" '
        function sec(t, a) { split(t, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        { d = sec($4) - sec(k); if (d < 0) d += 86400; if (d > m) m = d } END { printf "%d", m * 1000 }')
      break
    fi
    sleep 0.05
  done
  echo "RESULT cluster-detect-$n $detect ms"
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=()
done
