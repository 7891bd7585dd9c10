#!/usr/bin/env bash
# chaos.sh - a Jepsen-style check of the delivery guarantees
# (docs/guarantees.md) under faults, with a seed printed so that a failure
# can be tried again.
#
#   chaos.sh SCHEDNODE PLUGINS_DIR    the test (CTest: chaos)
#   chaos.sh --check LOGDIR           the checker alone, on a kept log dir
#   chaos.sh --selftest               the checker on hand-made good and bad
#                                     logs (CTest: chaos_selftest)
#
# Four insecure nodes on 127.0.0.1, one worker each, stealing on (the
# default), all loading plugin_chaos.so (its header says what each process
# logs). 16 movable sinks (csink) homed on node 1; 6 sources (csource), 3 on
# node 1 and 3 on node 2, each sending numbered messages round robin to all
# 16 sinks at a bounded rate, most of them a few bytes, 1 in 100 large (64
# KiB to 4 MiB, each doubling as likely: 1 MiB on average; which ones and
# their sizes follow from the seed); one watcher (cwatch) on node 2 that monitors
# every sink from half-time on (a monitored process never moves: before
# that the sinks move freely). A sink lost with its node (no delivery for
# 8 s) is replaced by a new one on node 1 that the sources and the watcher
# are told to add, so that about 16 live sinks take traffic all the time;
# a source gives up on a sink after 20 noproc errors. Faults, picked by a seeded RNG, one at a
# time: kill -9 of node 3 or 4 then a restart after a moment (a new
# incarnation: same id and port); a short freeze (SIGSTOP/SIGCONT,
# 0.2-1 s; from 0.7 s on it may be declared down: DOWN_MIN_MS) of any
# node; a long freeze (2-4 s, past --down-after-ms) of node 3 or 4; where
# network namespaces work (root, iproute2, not a chroot: lib.sh's
# netns_ok), a link cut (0.5-4 s) between any two nodes, each node then in
# a namespace of its own on a bridge (deploy/netns-cluster.sh up
# --no-nodes; else every node on 127.0.0.1 and no cuts, and the output
# says why). A node process that ends is restarted, as a supervisor would (a
# node declared down may be told it is out and exit 3); that is a failure
# only if it crashed (a signal we did not send, or a sanitizer or assertion
# report in its log), or if it was never faulted.
#
# At the end: every node resumed and restarted, the sources stopped, the
# cluster left to quieten (bounded), "stop" sent to every sink, the DOWNs
# awaited (bounded), the nodes stopped; then the checker reads every line
# and checks, per source -> sink pair:
#   (a) no message delivered twice;
#   (b) messages delivered in the order sent (the sink's lines are ordered
#       by its delivery count K, which moves with it from node to node);
#   (c) every message sent was delivered or came back as an error (both
#       only for nodedown, which means "not confirmed"); none is missing,
#       except to a sink lost with its node (its DOWN says nodedown or
#       noproc) or from a source whose node died, and never one before a
#       later message of the same pair that was delivered (a gap);
#   (d) no sink step ran twice (every sink, K appears once), none is absent,
#       and nothing ran after the sink ended;
#   (e) the watcher got exactly one DOWN per sink: normal for a sink that
#       ended by "stop", nodedown or noproc for one lost with its node;
#   (f) every large message delivered came whole: its length as sent, and
#       every byte the pattern of its source and number (the sink checks
#       them: plugin_chaos.c).
#
# A DOWN nodedown for a sink that lived on is allowed only while the sink's
# node was frozen for longer than the shortest time to a down (a long
# freeze, or a short one past DOWN_MIN_MS below), or cut off from the
# watcher's.
#
# Environment: SN_CHAOS_SEED (the RNG seed; printed), SN_CHAOS_SECONDS
# (chaos time, default 60), SN_CHAOS_RATE (messages/s per source, default
# 250), SN_CHAOS_WORK (a sink's CPU: "US EVERY BURST_US", default "200 100
# 20000": 200 us a message and 20 ms more every 100th, so that Ready sinks
# queue up on node 1 and the other nodes steal them), SN_CHAOS_BIG (large
# messages per 1000, default 10; 0: none),
# SN_CHAOS_KEEP (a directory to copy the logs to; on FAIL they are copied
# to ./chaos-logs-SEED anyway), SN_CHAOS_CUTS=0 (no namespaces, no link
# cuts). TSan builds skip it (77) unless
# SN_CHAOS_TSAN=1: four nodes under TSan are too slow for the fault timing.
#
# SN_CHAOS_MODE=upgrade (CTest: upgrade): a rolling upgrade instead of
# faults. 32 sinks; the watcher monitors every sink from the start, from
# a fifth node (a process that monitors others does not move), where 3 of
# the sources run too (their streams go on through every upgrade); then,
# SN_CHAOS_ROUNDS times (default 2), each of nodes 1-4 in turn is drained
# (`schednode drain --then-stop`: its movable processes go to the others
# with their state), stops, and starts again (a new run, as after an
# upgrade of its binary), while the sources stream. The checker is the
# same, and more must hold: every sink lives to the end (none lost with a
# node, none replaced), every drain exits 0 (everything moved: the sinks,
# and the sources sleeping between their sends) and its node exits 0, and
# no sink gets a DOWN before its stop but nodedown from a node that left
# right after it drained the sink, before the watcher's node heard that
# the monitor moved (not confirmed: docs/guarantees.md, "Known holes").
set -u
here=$(cd "$(dirname "$0")" && pwd)

# --------------------------------------------------------------- checker
# Reads LOGDIR/*.log (the plugin's lines) and LOGDIR/chaos.meta (what the
# driver did: SINK, DEAD, FAULT, STOP lines). Prints counts, violations by
# kind with their first lines, and "chaos-check: PASS" or "...: FAIL".
CHECKER='
function base(f,   b) { b = f; sub(/.*\//, "", b); sub(/\.log$/, "", b); return b }
function viol(kind, msg) {
  if (!(kind in nv)) { nv[kind] = 0; kname[++nkinds] = kind }
  nv[kind]++; totalv++
  if (nv[kind] <= MAXSHOW) vtext[kind] = vtext[kind] "      " msg "\n"
}
function isdead(f) { return (f in dead) }
function stopped(s) { return (s in xs) && xwhy[s] == "stop" }
function lostok(s) { return (s in dwhy) && (dwhy[s] == "nodedown" || dwhy[s] == "noproc") }
# A DOWN nodedown for a sink that lived on: allowed when it came while the
# node the sink was on was frozen for longer than the shortest time to a
# down (a long freeze; a short one of DOWNMIN ms or more, chaos.meta):
# nodedown means the node stopped answering, not that the process ended
# (docs/guarantees.md; as noconnection in Erlang).
# A link cut between the node of the watcher and that of the sink is the same to the
# watcher. Window i: node lfn[i] unreachable (from lfw[i] only, if set)
# from lffrom[i] to lfto[i] (3 s after it ended, for the DOWN to come).
# (A sink with no line before the window was on its home node, the first
# number of its PID.) A sink that left node lfn[i] less than LEFTMS before
# the window counts as on it too: the others learn of a move from the node
# it left (its redirect, when they next send it something through there),
# and one that froze right after could not tell them, so a monitor set
# meanwhile goes to it (seen: a sink moved 3 -> 1, node 3 froze 6 ms later,
# the watcher monitored it 1.2 s later through node 3: nodedown). So
# does one with a line on node lfn[i] less than ARRIVEMS after the window
# began: the driver notes the fault just before it signals, and a sink that
# arrived there meanwhile ran (and logged) before the stop landed (seen: a
# sink moved 4 -> 3 and logged there 12 ms after the long freeze of node 3
# was noted; the monitor of the watcher went to it there: nodedown).
function frozen_down(s,   i, at, pp) {
  split(s, pp, ".")
  for (i = 1; i <= nlf; i++) {
    at = ((i, s) in lastnd) ? lastnd[i, s] : pp[1] + 0
    if (dts[s] >= lffrom[i] && dts[s] <= lfto[i] && (at == lfn[i] || (i, s, lfn[i]) in leftnd) &&
        (!lfw[i] || lfw[i] == dnode[s])) return 1
  }
  return 0
}
function leftat(s, node, ts,   i) { # M: the sink left node at ts
  for (i = 1; i <= nlf; i++)
    if (ts < lffrom[i] && ts >= lffrom[i] - LEFTMS * 1000) leftnd[i, s, node] = 1
}
function window(node, from_node, ts, ms) { nlf++; lfn[nlf] = node; lfw[nlf] = from_node; lffrom[nlf] = ts; lfto[nlf] = ts + ms * 1000 + 3000000 }
function whereat(s, node, ts,   i) { # the last line of the sink before each long freeze
  for (i = 1; i <= nlf; i++) {
    if (ts < lffrom[i] && (!((i, s) in lastts) || ts >= lastts[i, s])) { lastts[i, s] = ts; lastnd[i, s] = node }
    if (node == lfn[i] && ts >= lffrom[i] && ts < lffrom[i] + ARRIVEMS * 1000) leftnd[i, s, node] = 1
  }
}
BEGIN { MAXSHOW = 8; LEFTMS = 1000; ARRIVEMS = 200; nkinds = 0; totalv = 0; nsinks = 0; nf = 0 }
FNR == 1 { file = base(FILENAME); ismeta = (FILENAME ~ /\.meta$/) }
ismeta {
  if ($1 == "SINK") { if (!($2 in issink)) { issink[$2] = 1; sinkid[++nsinks] = $2 } }
  else if ($1 == "DEAD") dead[$2] = $0
  else if ($1 == "FAULT") {
    if (!($2 in nfault)) { nfault[$2] = 0; fname[++nf] = $2 } nfault[$2]++
    if ($2 == "long-freeze" && NF >= 5) window($3 + 0, 0, $5 + 0, $4 + 0)
    # a node upgraded (drained, then left) may leave before the watcher
    # heard that a sink it held moved on: nodedown, not confirmed
    if ($2 == "upgrade" && NF >= 5) window($3 + 0, 0, $5 + 0, $4 + 0)
    if ($2 == "freeze" && NF >= 5 && downmin && $4 + 0 >= downmin) window($3 + 0, 0, $5 + 0, $4 + 0)
    if ($2 == "cut" && NF >= 6) { window($3 + 0, $6 + 0, $5 + 0, $4 + 0); window($6 + 0, $3 + 0, $5 + 0, $4 + 0) }
  }
  else if ($1 == "DOWNMIN") downmin = $2 + 0
  else if ($1 == "STOP") stoprc[$2] = $3
  else if ($1 == "SHUTDOWN") cutoff = $2 + 0
  next
}
{ where = file ".log:" FNR ": " $0 }
$1 == "S" {
  key = $2 SUBSEP $3 SUBSEP $4
  if (key in sent) viol("sent-twice", where "   first: " sent[key])
  else { sent[key] = where; nsent++ }
  srcfile[$2] = file
  next
}
$1 == "R" {
  whereat($2, $6 + 0, $7 + 0)
  sk = $2 SUBSEP $3
  if (sk in rstep) viol("step-twice", where "   and: " rstep[sk])
  else { rstep[sk] = where; rsrc[sk] = $4; rseq[sk] = $5 + 0 }
  if (!($2 in maxk) || $3 + 0 > maxk[$2]) maxk[$2] = $3 + 0
  key = $4 SUBSEP $2 SUBSEP $5
  if (key in recv) viol("delivered-twice", where "   and: " recv[key])
  else recv[key] = where
  p = $4 SUBSEP $2
  if (!(p in maxr) || $5 + 0 > maxr[p]) maxr[p] = $5 + 0
  ndeliv++; rnode[$6]++
  if ($7 + 0 > seen[$2]) { seen[$2] = $7 + 0; seenw[$2] = where }
  if (!($2 in issink)) { issink[$2] = 1; sinkid[++nsinks] = $2 }
  next
}
$1 == "X" {
  if ($2 in xs) viol("ended-twice", where "   and: " xs[$2])
  else { xs[$2] = where; xk[$2] = $3 + 0; xwhy[$2] = $4 }
  if ($6 + 0 > seen[$2]) { seen[$2] = $6 + 0; seenw[$2] = where }
  if (!($2 in issink)) { issink[$2] = 1; sinkid[++nsinks] = $2 }
  next
}
# (f) a large message came whole: the sink saw its length and pattern (a
# B line, written with its R line), and the length the source sent (its L
# line); a damaged one (Z) or one delivered without its B is a violation
$1 == "L" { big[$2 SUBSEP $3 SUBSEP $4] = $5 + 0; nbig++; bigbytes += $5; next }
$1 == "B" { key = $4 SUBSEP $2 SUBSEP $5; gotbig[key] = $6 + 0; gotbigw[key] = where; next }
$1 == "Z" { viol("bad-payload", where); nbad++; badseen[$4 SUBSEP $2 SUBSEP $5] = 1; next }
$1 == "M" { whereat($2, $6 + 0, $7 + 0); leftat($2, $4 + 0, $7 + 0); moves++; if (!($2 in moved)) { moved[$2] = 1; nmoved++ } next }
$1 == "U" { viol("bad-message", where); next }
$1 == "E" {
  key = $2 SUBSEP $3 SUBSEP $4
  # nodedown (not confirmed) and then the fate of a message a node had
  # passed on before it stopped answering (noproc), or the other way
  # round: allowed once, counted; any other repeat is a violation
  if ((key in err) && !(key in err2) && (err[key] == "nodedown") != ($5 == "nodedown")) {
    err2[key] = 1; ndown_fate++
    if ($5 != "nodedown") err[key] = $5
  } else if (key in err) viol("error-twice", where "   and: " errw[key])
  else { err[key] = $5; errw[key] = where; errts[key] = $7 + 0; nerr[$5]++; if (!($5 in ek)) { ek[$5] = 1; ename[++ne] = $5 } }
  next
}
$1 == "F" || $1 == "Q" { next }
$1 == "W" { watched[$3] = 1; watcherfile = file; next }
$1 == "D" { # (a DOWN written after SHUTDOWN came as the nodes were stopped)
  late = (cutoff && $6 + 0 > cutoff); nlate += late
  dcount[$3]++; watcherfile = file
  if (dcount[$3] > 1) viol("down-twice", where "   first: " dw[$3])
  else { dwhy[$3] = $4; dw[$3] = where; dlate[$3] = late; dts[$3] = $6 + 0; dnode[$3] = $5 + 0 }
  next
}
NF > 0 { viol("unknown-line", where) }
END {
  # (b) and (d): each sink in its delivery order
  for (i = 1; i <= nsinks; i++) {
    s = sinkid[i]
    top = (s in maxk) ? maxk[s] : -1
    if ((s in xk) && xk[s] - 1 > top) top = xk[s] - 1
    for (k = 0; k <= top; k++) {
      sk = s SUBSEP k
      if (!(sk in rstep)) {
        viol("step-absent", "sink " s ": no line for its delivery " k (s in xs ? " (it ended after " xk[s] ")" : ""))
        continue
      }
      if ((s in xk) && k >= xk[s]) viol("ran-after-end", rstep[sk] "   ended: " xs[s])
      p = rsrc[sk] SUBSEP s
      if ((p in last) && rseq[sk] <= last[p]) viol("reorder", rstep[sk] "   after: " lastw[p])
      last[p] = rseq[sk]; lastw[p] = rstep[sk]
    }
  }
  # (c): the fate of every message sent
  for (key in sent) {
    split(key, f, SUBSEP); src = f[1]; s = f[2]; seq = f[3] + 0; p = src SUBSEP s
    r = (key in recv); e = (key in err)
    if (r && e) {
      if (err[key] == "nodedown") ndown_deliv++
      else viol("error-and-delivered", recv[key] "   error: " errw[key])
    } else if (r) {
      nok++
    } else if (e) {
      nbounced++
      if (err[key] == "noproc" && errts[key] < seen[s])
        viol("noproc-but-alive", errw[key] "   yet the sink ran later: " seenw[s])
    } else if ((p in maxr) && seq < maxr[p]) {
      viol("gap", sent[key] "   yet " maxr[p] " of that pair was delivered")
    } else if (!stopped(s)) {
      if (lostok(s)) miss_sink++
      else if (isdead(srcfile[src])) miss_src++
      else if (s in xs) viol("missing", sent[key] "   (sink " s " was alive until the nodes stopped: " xs[s] ")")
      else viol("missing-no-down", sent[key] "   (sink " s " never ended, and no DOWN nodedown/noproc for it)")
    } else if (isdead(srcfile[src])) {
      miss_src++
    } else {
      viol("missing", sent[key] "   (sink ended: " xs[s] ")")
    }
  }
  for (key in recv) if (!(key in sent)) viol("never-sent", recv[key])
  # (f): the large ones
  for (key in gotbig) {
    if (!(key in big)) viol("bad-payload", gotbigw[key] "   but it was sent small: " sent[key])
    else if (gotbig[key] != big[key]) viol("bad-payload", gotbigw[key] "   but " big[key] " bytes were sent: " sent[key])
    else { nbigok++; bigokbytes += big[key] }
  }
  for (key in big) if ((key in recv) && !(key in gotbig) && !(key in badseen)) viol("bad-payload", recv[key] "   without its " big[key] " bytes: " sent[key])
  for (key in err) if (!(key in sent)) viol("never-sent", errw[key])
  # (e): the DOWNs
  wdead = (watcherfile != "" && isdead(watcherfile))
  for (i = 1; i <= nsinks; i++) {
    s = sinkid[i]
    if (stopped(s)) nstopped++; else if (s in xs) ncancel++; else nlost++
    if ((s in stoprc) && stoprc[s] != 0) nstopfail++
    if (wdead) continue
    if (!(s in dcount)) {
      viol("no-down", "sink " s (s in xs ? " ended: " xs[s] : " never ended (lost with its node?)") (s in watched ? "" : "; not even monitored"))
      continue
    }
    if (dlate[s]) {
      viol("no-down", "sink " s ": no DOWN until the nodes were stopped: " dw[s])
      continue
    }
    if (stopped(s) && dwhy[s] == "nodedown" && frozen_down(s)) nfrozendown++
    else if (stopped(s) && dwhy[s] != "normal") viol("down-reason", dw[s] "   but it ended normally: " xs[s])
    if (!stopped(s) && !lostok(s)) viol("down-reason", dw[s] "   but it did not end by stop" (s in xs ? ": " xs[s] : " (no X line)"))
  }
  printf "chaos-check: %d messages sent, %d delivered (", nsent, ndeliv
  sep = ""; for (n = 1; n <= 64; n++) if (n in rnode) { printf "%s%d on node %d", sep, rnode[n], n; sep = ", " }
  printf ")\n"
  printf "chaos-check: large messages: %d sent (%.0f MiB), %d delivered whole (%.0f MiB), %d damaged\n", nbig, bigbytes / 1048576, nbigok, bigokbytes / 1048576, nbad
  printf "chaos-check: errors returned:"
  if (ne == 0) printf " none"
  for (i = 1; i <= ne; i++) printf " %s %d", ename[i], nerr[ename[i]]
  printf "; delivered and nodedown %d; nodedown and then noproc %d\n", ndown_deliv, ndown_fate
  printf "chaos-check: missing but allowed: %d to sinks lost with their node, %d from sources whose node died\n", miss_sink, miss_src
  printf "chaos-check: sinks %d: %d ended by stop, %d lost with a node, %d alive until the nodes stopped (no stop reached them); %d of them moved (%d moves)\n", nsinks, nstopped, nlost, ncancel, nmoved, moves
  if (nfrozendown) printf "chaos-check: %d DOWNs said nodedown for a sink on a node frozen past the shortest time to a down that lived on (allowed: not confirmed)\n", nfrozendown
  if (nstopfail) printf "chaos-check: \"schednode send SINK stop\" failed for %d sinks\n", nstopfail
  printf "chaos-check: faults:"
  if (nf == 0) printf " none"
  for (i = 1; i <= nf; i++) printf " %s %d", fname[i], nfault[fname[i]]
  printf "\n"
  if (wdead) printf "chaos-check: the watcher died with its node: DOWNs not checked\n"
  if (nlate) printf "chaos-check: %d DOWNs came while the nodes were being stopped\n", nlate
  if (totalv == 0) { print "chaos-check: no violations"; print "chaos-check: PASS"; exit 0 }
  printf "chaos-check: %d violations:", totalv
  for (i = 1; i <= nkinds; i++) printf " %s %d", kname[i], nv[kname[i]]
  printf "\n"
  for (i = 1; i <= nkinds; i++) {
    printf "    %s (%d), first ones:\n%s", kname[i], nv[kname[i]], vtext[kname[i]]
  }
  print "chaos-check: FAIL"
  exit 1
}'

# What happened around the first lost or reordered message, for a failure
# seen only in a run whose logs stay on another machine (CI): the sink's
# moves and the pair's deliveries in the seconds around it, the faults
# then, and what the nodes logged about that sink. Reads the checker's
# output (stdin) and LOGDIR's parent (the node logs).
story() { # LOGDIR
  local d=$1 line src sink seq ts pid from to what kind
  # the first violation that names a message, and its kind: one sent (S:
  # lost) or delivered (R: out of order, or without its bytes)
  IFS='|' read -r kind line < <(awk '/^    [a-z-]+ \([0-9]+\), first ones:$/ { kind = $1 }
    /^ +[^ ]+\.log:[0-9]+: [SR] / { sub(/^ *[^ ]*: /, ""); print kind "|" $0; exit }')
  [ -n "$line" ] || return 0
  case $line in
    S*) read -r _ src sink seq _ ts _ <<<"$line"; what="sent ($kind)" ;;
    *) read -r _ sink _ src seq _ ts _ <<<"$line"; what="delivered ($kind)" ;;
  esac
  [ -n "$ts" ] || return 0
  from=$((ts - 4000000)) to=$((ts + 4000000))
  echo "chaos: the first one: source $src, sink $sink, seq $seq, $what at $(date -u -d "@$((ts / 1000000))" +%T).$(printf %06d $((ts % 1000000)))"
  echo "chaos: that sink's moves, and the pair's deliveries, 4 s either side (node, then time):"
  cat "$d"/*.log | awk -v s="$sink" -v src="$src" -v a="$from" -v b="$to" '
    # (a PID compared as a number would match its neighbours: strings)
    $1 == "M" && $2 "" == s && $7 + 0 >= a && $7 + 0 <= b { print $7, "  moved from node " $4 " to node " $5 " (delivery " $3 ")" }
    $1 == "R" && $2 "" == s && $4 "" == src && $7 + 0 >= a && $7 + 0 <= b { r[++n] = $7 "  got " $5 " on node " $6 }
    $1 == "E" && $2 "" == src && $3 "" == s && $7 + 0 >= a && $7 + 0 <= b { print $7, "  error for " $4 ": " $5 }
    END { for (i = 1; i <= n; i++) if (i <= 6 || i > n - 6 || n <= 12) print r[i]; else if (i == 7) { split(r[i], f, " "); print f[1], "  ..." } }' |
    sort -n | awk 'NF { t = $1; $1 = ""; printf "    %s.%06d%s\n", strftime("%T", int(t / 1000000), 1), t % 1000000, $0 }'
  echo "chaos: faults then:"
  awk -v a="$((from - 4000000))" -v b="$to" '$1 == "FAULT" && $5 + 0 >= a && $5 + 0 <= b {
      printf "    %s.%06d %s node %s %s ms\n", strftime("%T", int($5 / 1000000), 1), $5 % 1000000, $2, $3, $4 }' "$d/chaos.meta"
  pid=${sink#*.}
  echo "chaos: the node logs on $sink:"
  grep -H -F "$pid" "$d"/../node*.log 2>/dev/null | sed 's#^.*/##; s/^/    /' | head -40
  echo "chaos: what the nodes logged then (node log: line):"
  local t0 t1
  t0=$(date -u -d "@$((from / 1000000))" +%T) t1=$(date -u -d "@$((to / 1000000))" +%T)
  for f in "$d"/../node*.log; do
    awk -v a="$t0" -v b="$t1" -v f="$(basename "$f")" '$3 ~ /^[0-9]+-/ && substr($4, 1, 8) >= a && substr($4, 1, 8) <= b {
        print $4, "   " f ": " $0 }' "$f"
  done | sort | cut -d' ' -f2- | head -60
}

check() { # LOGDIR
  local d=$1
  shopt -s nullglob
  local files=("$d"/*.log)
  shopt -u nullglob
  [ -f "$d/chaos.meta" ] || : >"$d/chaos.meta"
  awk "$CHECKER" "$d/chaos.meta" ${files[@]+"${files[@]}"}
}

# ------------------------------------------------------------- self-test
# A good history (two sinks that end by "stop", one that moves, one lost
# with a killed node, errors of every kind that may come), then one bad
# change at a time: the checker must pass the first and name each fault.
selftest() {
  local fails=0 out
  st_dir=$(mktemp -d)
  trap 'rm -rf "$st_dir"' EXIT
  local t=$st_dir
  good() { # DIR
    mkdir -p "$1"
    cat >"$1/100.log" <<'EOF'
S 1.200 1.10 1 1 0
S 1.200 1.11 1 1 0
S 1.200 1.12 1 1 0
L 1.200 1.12 1 70000 1 0
S 1.200 1.10 2 1 0
S 1.200 1.11 2 1 0
S 1.200 1.12 2 1 0
S 1.200 1.10 3 1 0
S 1.200 1.11 3 1 0
S 1.200 1.12 3 1 0
S 1.200 1.11 4 1 0
R 1.10 0 1.200 1 1 0
R 1.11 0 1.200 1 1 0
R 1.12 0 1.200 1 1 0
B 1.12 0 1.200 1 70000 1 0
R 1.11 1 2.201 1 1 0
E 1.200 1.11 2 nodedown 1 0
R 1.11 2 1.200 2 1 0
E 1.200 1.11 3 nodedown 1 0
R 1.11 3 2.201 2 1 0
E 1.200 1.11 4 noproc 1 0
X 1.11 4 stop 1 0
F 1.200 10 1 0
EOF
    cat >"$1/200.log" <<'EOF'
S 2.201 1.11 1 2 0
S 2.201 1.11 2 2 0
W 2.300 1.10 2 0
W 2.300 1.11 2 0
W 2.300 1.12 2 0
D 2.300 1.11 normal 2 0
D 2.300 1.12 nodedown 2 0
D 2.300 1.10 normal 2 0
EOF
    cat >"$1/300.log" <<'EOF'
M 1.10 1 1 3 3 0
R 1.10 1 1.200 2 3 0
M 1.12 1 1 3 3 0
M 1.10 2 3 4 4 0
EOF
    cat >"$1/400.log" <<'EOF'
R 1.10 2 1.200 3 4 0
X 1.10 3 stop 4 0
EOF
    printf 'SINK 1.10\nSINK 1.11\nSINK 1.12\nDEAD 300 3 kill9\nFAULT kill9 3\n' >"$1/chaos.meta"
  }
  # name | kind the checker must report | change to the good logs (in $d)
  cases=(
    "a line written twice|step-twice|sed -n 2p \$d/300.log >>\$d/300.log"
    "a message delivered twice|delivered-twice|sed -i 's/^X 1.10 3 stop/R 1.10 3 1.200 3 4 0\nX 1.10 4 stop/' \$d/400.log"
    "two deliveries swapped|reorder|sed -i 's/^R 1.10 1 1.200 2/R 1.10 1 1.200 3/; ' \$d/300.log; sed -i 's/^R 1.10 2 1.200 3/R 1.10 2 1.200 2/' \$d/400.log"
    "a message to a sink that ended by stop missing|missing|echo 'S 1.200 1.10 4 1 0' >>\$d/100.log"
    "a message lost before a later one of the pair|gap|sed -i '/^E 1.200 1.11 2 nodedown/d; /^R 1.11 2 1.200 2/d; s/^E 1.200 1.11 3 nodedown/R 1.11 2 1.200 3/' \$d/100.log"
    "a large message damaged on its way|bad-payload|sed -i 's/^B 1.12 0 1.200 1 70000 1 0/Z 1.12 0 1.200 1 content 70000 1 0/' \$d/100.log"
    "a large message cut short, its header too|bad-payload|sed -i 's/^B 1.12 0 1.200 1 70000 /B 1.12 0 1.200 1 65536 /' \$d/100.log"
    "a large message delivered without its bytes|bad-payload|sed -i '/^B 1.12 /d' \$d/100.log"
    "a small message delivered as a large one|bad-payload|sed -i '/^L 1.200 1.12 /d' \$d/100.log"
    "a sink ended by cancel, not by its stop|down-reason|sed -i 's/^X 1.10 3 stop/X 1.10 3 cancel/' \$d/400.log"
    "noproc returned yet delivered|error-and-delivered|sed -i 's/^E 1.200 1.11 2 nodedown/E 1.200 1.11 2 noproc/' \$d/100.log"
    "a delivery line absent|step-absent|sed -i '/^R 1.10 1 /d' \$d/300.log"
    "a delivery after the sink ended|ran-after-end|echo 'S 1.200 1.10 4 1 0' >>\$d/100.log; echo 'R 1.10 3 1.200 4 4 0' >>\$d/400.log"
    "a message delivered that nobody sent|never-sent|sed -i 's/^X 1.10 3 stop/R 1.10 3 1.200 9 4 0\nX 1.10 4 stop/' \$d/400.log"
    "a sink's DOWN missing|no-down|sed -i '/^D 2.300 1.11 /d' \$d/200.log"
    "two DOWNs for one sink|down-twice|echo 'D 2.300 1.10 normal 2 0' >>\$d/200.log"
    "a lost sink reported normal|down-reason|sed -i 's/^D 2.300 1.12 nodedown/D 2.300 1.12 normal/' \$d/200.log"
    "a send returned noproc twice|error-twice|printf 'E 1.200 1.12 2 noproc 1 0\\nE 1.200 1.12 2 noproc 1 0\\n' >>\$d/100.log"
    "a send returned nodedown twice|error-twice|printf 'E 1.200 1.12 2 nodedown 1 0\\nE 1.200 1.12 2 nodedown 1 0\\n' >>\$d/100.log"
    "a send returned nodedown, then noproc (allowed: not confirmed, then its fate)|PASS|printf 'E 1.200 1.12 2 nodedown 1 0\\nE 1.200 1.12 2 noproc 1 0\\n' >>\$d/100.log"
    "... and then once more|error-twice|printf 'E 1.200 1.12 2 nodedown 1 0\\nE 1.200 1.12 2 noproc 1 0\\nE 1.200 1.12 2 nodedown 1 0\\n' >>\$d/100.log"
    "a stopped sink reported nodedown|down-reason|sed -i 's/^D 2.300 1.10 normal/D 2.300 1.10 nodedown/' \$d/200.log"
    "a stopped sink reported nodedown while its node was frozen past the timeout (allowed)|PASS|echo 'FAULT long-freeze 4 3000 5' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "... or while its node was frozen briefly, but past the shortest time to a down (allowed)|PASS|printf 'DOWNMIN 700\\nFAULT freeze 4 800 5\\n' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "... but frozen for less than that|down-reason|printf 'DOWNMIN 700\\nFAULT freeze 4 600 5\\n' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "... but frozen on another node than the sink's|down-reason|echo 'FAULT long-freeze 2 3000 5' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "... or on one it had left just before, before anyone could hear of it (allowed)|PASS|echo 'FAULT long-freeze 3 3000 5' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "... but on one it had left over a second before|down-reason|echo 'FAULT long-freeze 3 3000 2000005' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 2000006/' \$d/200.log"
    "... or on one it arrived at just after the freeze was noted, logging there before the stop landed (allowed)|PASS|echo 'FAULT long-freeze 4 3000 5' >>\$d/chaos.meta; sed -i 's/^M 1.10 2 3 4 4 0/M 1.10 2 3 4 4 150005/' \$d/300.log; sed -i 's/^R 1.10 2 1.200 3 4 0/R 1.10 2 1.200 3 4 150006/' \$d/400.log; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 150007/' \$d/200.log"
    "... but arrived there well after|down-reason|echo 'FAULT long-freeze 4 3000 5' >>\$d/chaos.meta; sed -i 's/^M 1.10 2 3 4 4 0/M 1.10 2 3 4 4 250005/' \$d/300.log; sed -i 's/^R 1.10 2 1.200 3 4 0/R 1.10 2 1.200 3 4 250006/' \$d/400.log; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 250007/' \$d/200.log"
    "... or while its node was cut off from the watcher's (allowed)|PASS|echo 'FAULT cut 2 3000 5 4' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "... but cut off only from another node than the watcher's|down-reason|echo 'FAULT cut 3 3000 5 4' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.10 normal 2 0/D 2.300 1.10 nodedown 2 6/' \$d/200.log"
    "a DOWN that came only as the nodes were stopped|no-down|echo 'SHUTDOWN 5' >>\$d/chaos.meta; sed -i 's/^D 2.300 1.12 nodedown 2 0/D 2.300 1.12 nodedown 2 9/' \$d/200.log"
    "a lost sink without a DOWN: its missing messages count|missing-no-down|sed -i '/^D 2.300 1.12 /d' \$d/200.log"
    "noproc for a sink that ran later|noproc-but-alive|sed -i 's/^E 1.200 1.11 4 noproc 1 0/E 1.200 1.11 4 noproc 1 0/; s/^R 1.11 3 2.201 2 1 0/R 1.11 3 2.201 2 1 7/' \$d/100.log; sed -i 's/^E 1.200 1.11 4 noproc 1 0/E 1.200 1.11 4 noproc 1 5/' \$d/100.log"
    "a message sent twice (a source ran twice)|sent-twice|sed -n 1p \$d/100.log >>\$d/100.log"
    "from a source whose node died, a message neither delivered nor returned (allowed)|PASS|echo 'S 3.500 1.10 1 3 0' >>\$d/300.log"
  )
  good "$t/good"
  if out=$(check "$t/good") && grep -q "chaos-check: PASS" <<<"$out" &&
     grep -q "2 ended by stop, 1 lost" <<<"$out"; then
    echo "ok   the good history passes"
  else
    echo "FAIL the good history: $out"; fails=$((fails + 1))
  fi
  grep -q "missing but allowed: 2 to sinks lost" <<<"$out" && grep -q "nodedown 2" <<<"$out" &&
    grep -q "delivered and nodedown 1" <<<"$out" && grep -q "2 of them moved (3 moves)" <<<"$out" &&
    grep -q "large messages: 1 sent (0 MiB), 1 delivered whole (0 MiB), 0 damaged" <<<"$out" &&
    echo "ok   its counts: $(tr '\n' ' ' <<<"$out" | head -c 400)" ||
    { echo "FAIL counts of the good history: $out"; fails=$((fails + 1)); }
  local i=0 c name kind change d
  for c in "${cases[@]}"; do
    i=$((i + 1))
    IFS='|' read -r name kind change <<<"$c"
    d=$t/case$i
    good "$d"
    eval "$change"
    if out=$(check "$d") && [ "$kind" = PASS ]; then
      echo "ok   $name: $(grep "missing but allowed" <<<"$out")"
    elif [ "$kind" = PASS ]; then
      echo "FAIL $name: the checker failed it:"; echo "$out"; fails=$((fails + 1))
    elif [ -n "${out##*chaos-check: FAIL*}" ]; then
      echo "FAIL $name: the checker passed it"; fails=$((fails + 1))
    elif grep -q "^    $kind (" <<<"$out" && grep -q "chaos-check: FAIL" <<<"$out"; then
      echo "ok   $name: $(grep -A1 "^    $kind (" <<<"$out" | tail -1 | sed 's/^ *//' | head -c 160)"
    else
      echo "FAIL $name: wanted $kind, got:"; echo "$out"; fails=$((fails + 1))
    fi
  done
  echo "$(( ${#cases[@]} + 2 - fails )) passed, $fails failed"
  [ "$fails" -eq 0 ]
}

case "${1:-}" in
  --selftest) selftest; exit ;;
  --check) check "$2"; exit ;;
  ''|-h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 2 ;;
esac

# ------------------------------------------------------------------ test
SN=$1 PLUG=$2
if [ "${SN_SANITIZE:-}" = thread ] && [ "${SN_CHAOS_TSAN:-0}" != 1 ]; then
  echo "chaos: skipped under TSan (SN_CHAOS_TSAN=1 runs it)"; exit 77
fi
# shellcheck source=tests/lib.sh
. "$here/lib.sh"
DURATION=${SN_CHAOS_SECONDS:-60}
RATE=${SN_CHAOS_RATE:-250}
WORK=${SN_CHAOS_WORK:-200 100 20000}
BIG=${SN_CHAOS_BIG:-10} BIG_MIN=$((64 << 10)) BIG_MAX=$((4 << 20))
MODE=${SN_CHAOS_MODE:-chaos} ROUNDS=${SN_CHAOS_ROUNDS:-2}
NODES=4 NSINKS=16 WNODE=2 # (the watcher's node)
# a rolling upgrade: nodes 1-4 are upgraded; the watcher runs on a fifth
# that is not (a process that monitors others does not move)
[ "$MODE" = upgrade ] && NODES=5 NSINKS=32 WNODE=5
declare -A port npid ninc faulted
for n in $(seq $NODES); do port[$n]=$(free_port); ninc[$n]=0; faulted[$n]=0; done
# the namespaces, if they can be made here (else the run goes on without
# cuts, and says why)
cuts=0 nocuts="SN_CHAOS_CUTS=0" C=("$here/../deploy/netns-cluster.sh") cdir=$dir/netns
if [ "${SN_CHAOS_CUTS:-1}" = 1 ] && [ "$MODE" = upgrade ]; then
  nocuts="a rolling upgrade cuts no links"
elif [ "${SN_CHAOS_CUTS:-1}" = 1 ]; then
  if ! netns_ok; then
    nocuts=$netns_why
  else
    trap '"${C[@]}" down --dir "$cdir" >/dev/null 2>&1; cleanup' EXIT
    if "${C[@]}" up $NODES --no-nodes --prefix "c$$x" --dir "$cdir" >"$dir/netns.log" 2>&1; then
      cuts=1
    else
      nocuts="deploy/netns-cluster.sh up failed: $(tail -1 "$dir/netns.log")"
    fi
  fi
fi
declare -A addr
if [ $cuts = 1 ]; then for n in $(seq $NODES); do addr[$n]=$("${C[@]}" addr "$n" --dir "$cdir"); done; fi
seed=${SN_CHAOS_SEED:-$(( ($(date +%s%N) / 1000) % 1000000 ))}
RANDOM=$seed
if [ "$MODE" = upgrade ]; then
  echo "chaos: seed $seed, a rolling upgrade of nodes 1-4 (node 5 watches), $ROUNDS rounds, $RATE msgs/s per source, $BIG in 1000 of $((BIG_MIN >> 10)) KiB-$((BIG_MAX >> 20)) MiB"
else
  echo "chaos: seed $seed (SN_CHAOS_SEED=$seed reproduces the faults and the sizes), ${DURATION} s of chaos, $RATE msgs/s per source, $BIG in 1000 of $((BIG_MIN >> 10)) KiB-$((BIG_MAX >> 20)) MiB"
fi
[ $cuts = 1 ] && echo "chaos: nodes in network namespaces (${addr[1]} ...), link cuts on" ||
  echo "chaos: nodes on 127.0.0.1, no link cuts: $nocuts"
log=$dir/log meta=$dir/log/chaos.meta
mkdir -p "$log"
export SN_CHAOS_LOG=$log
[ "$MODE" = upgrade ] && export SN_CHAOS_MOVABLE=1 # (the sources and the watcher move in a drain)
echo "SEED $seed" >"$meta"
# The shortest freeze that can get a node declared down, for the checker
# (a nodedown for a live sink is allowed from there on): the suspicion
# timeout once every other member confirms (docs/operations.md, "Joining and leaving":
# --down-after-ms, default 1500, shrinks toward a third of it with each
# confirmation, Lifeguard's log(c+1)/log(4): with four nodes, two besides
# the first suspecter, 1500 - 1000 * ln 3 / ln 4 = 708 ms), counted from the
# freeze's start (the probe it missed may have been sent just before).
# A freeze shorter than that is no down on 4 idle nodes; one of about a
# second may be (DOWN_MIN_MS: a freeze from it on may end in a down).
DOWN_MIN_MS=700
echo "DOWNMIN $DOWN_MIN_MS" >>"$meta"
failed=0
problem() { echo "chaos: PROBLEM: $*"; failed=1; }
note() { echo "chaos: $(date +%T) $*"; }

call_s=20 call_ms=15000
msleep() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
nodelog() { echo "$dir/node$1.${ninc[$1]}.log"; }
# crash reports in a node's log
crashed_log() { grep -E "ERROR: AddressSanitizer|runtime error|ThreadSanitizer|Assertion|LeakSanitizer" "$1" | head -5; }

start_node() { # I: start (or restart) node I, joining any other node
  local i=$1 j joins=()
  ninc[$i]=$((ninc[$i] + 1))
  if [ "$i" != 1 ] || [ "${ninc[$i]}" -gt 1 ]; then
    for j in $(seq $NODES); do [ "$j" != "$i" ] && [ "${npid[$j]:-}" ] && joins+=(--join "$(ep "$j")"); done
  fi
  : >"$(nodelog "$i")" # (before the node: the waits below read it)
  local in_ns=()
  [ $cuts = 1 ] && in_ns=("${C[@]}" exec --dir "$cdir" "$i") # (it execs: $! is the node)
  ${in_ns[@]+"${in_ns[@]}"} "$SN" -n "$i" -w 1 --listen "$(ep "$i")" --insecure --load "$PLUG/plugin_chaos.so" --log-level info \
    ${joins[@]+"${joins[@]}"} >>"$(nodelog "$i")" 2>&1 &
  npid[$i]=$!
  pids+=($!)
  echo "NODE ${npid[$i]} $i ${ninc[$i]}" >>"$meta"
  wait_for 150 grep -q "up: " "$(nodelog "$i")" && return 0
  note "node $i (run ${ninc[$i]}) did not come up in 15 s: $(tail -3 "$(nodelog "$i")" | tr '\n' ' ')"
  return 1
}

# A node process that ended: how, and is that a failure
reap() { # I WHY
  local i=$1 p=${npid[$1]} rc c
  wait "$p" 2>/dev/null; rc=$?
  npid[$i]=
  echo "DEAD $p $i exit-$rc" >>"$meta"
  c=$(crashed_log "$(nodelog "$i")")
  if [ -n "$c" ]; then
    problem "node $i (run ${ninc[$i]}) crashed: $c"
  elif [ "$rc" -gt 128 ]; then
    problem "node $i (run ${ninc[$i]}) died of signal $((rc - 128)), which we did not send; its log ends with:"
    tail -n 15 "$(nodelog "$i")"
  elif [ "${faulted[$i]}" = 0 ]; then
    problem "node $i (run ${ninc[$i]}) exited with status $rc, never faulted; its log ends with:"
    tail -n 15 "$(nodelog "$i")"
  elif [ "$rc" = 3 ] && grep -q "declared down" "$(nodelog "$i")"; then
    note "node $i was fenced (exit 3, declared down) after $2: restarting it"
    echo "FAULT fenced $i" >>"$meta"
  else
    note "node $i exited with status $rc after $2: restarting it; its log ends with: $(tail -n 3 "$(nodelog "$i")" | tr '\n' ' ')"
    echo "FAULT exited $i" >>"$meta"
  fi
}

# Starts node I again; one that does not come up in 15 s is a problem (no
# other node is faulted meanwhile), killed and tried once more
restart_node() {
  local i=$1
  start_node "$i" && return 0
  problem "node $i (run ${ninc[$i]}) did not come up again in 15 s"
  kill -9 "${npid[$i]}" 2>/dev/null; wait "${npid[$i]}" 2>/dev/null
  echo "DEAD ${npid[$i]} $i not-up" >>"$meta"
  npid[$i]=
  start_node "$i" && return 0
  kill -9 "${npid[$i]}" 2>/dev/null; wait "${npid[$i]}" 2>/dev/null
  echo "DEAD ${npid[$i]} $i not-up" >>"$meta"
  npid[$i]=
  return 1
}

# Restart every node whose process ended (a supervisor's job)
supervise() {
  local i
  for i in $(seq $NODES); do
    if [ -n "${npid[$i]:-}" ] && ! kill -0 "${npid[$i]}" 2>/dev/null; then
      reap "$i" "its faults"
    fi
    [ -z "${npid[$i]:-}" ] && restart_node "$i"
  done
}

# ---- the cluster and the workload
for n in $(seq $NODES); do
  start_node "$n" || { problem "node $n did not start"; echo "chaos: FAIL"; exit 1; }
done
sleep 1 # the types and the view reach everyone by gossip
sinks=()
for k in $(seq $NSINKS); do
  s=$(call spawn --connect "$(ep 1)" csink collect "$WORK") || { problem "spawn csink: $s"; break; }
  sinks+=("$s"); echo "SINK $s" >>"$meta"
done
srcs=() srchome=()
for k in 1 2 3 4 5 6; do
  h=$(( (k - 1) / 3 + 1 ))
  [ "$MODE" = upgrade ] && [ "$h" = 2 ] && h=$WNODE # (streams that run through every upgrade)
  # (each source's sizes from the seed and its number: a seed replays them)
  s=$(call spawn --connect "$(ep "$h")" csource send "$RATE 0 $BIG $((seed * 16 + k)) $BIG_MIN $BIG_MAX ${sinks[*]}") ||
    { problem "spawn csource: $s"; break; }
  srcs+=("$s") srchome+=("$h"); echo "SOURCE $s" >>"$meta"
done
delay_ms=$((DURATION * 500))
[ "$MODE" = upgrade ] && delay_ms=0
watcher=$(call spawn --connect "$(ep $WNODE)" cwatch watch "$delay_ms ${sinks[*]}") || problem "spawn cwatch: $watcher"
echo "WATCHER $watcher" >>"$meta"
if [ "$failed" = 1 ] || [ ${#sinks[@]} != $NSINKS ] || [ ${#srcs[@]} != 6 ]; then
  echo "chaos: FAIL (set-up)"; exit 1
fi
note "$NSINKS sinks on node 1, 6 sources on nodes 1 and ${srchome[5]}, watcher ${watcher} on node $WNODE (monitoring from $((delay_ms / 1000)) s on)"

# Sinks with a delivery in the last 8 s, from the tails of the live nodes' logs
recent_sinks() {
  local i t=$(($(date +%s%6N) - 8000000))
  for i in $(seq $NODES); do
    [ -n "${npid[$i]:-}" ] && [ -f "$log/${npid[$i]}.log" ] && tail -c 4000000 "$log/${npid[$i]}.log"
  done | awk -v t="$t" '$1 == "R" && $7 + 0 > t { print $2 }' | sort -u
}
# Replaces the live sinks that have been quiet for 8 s (lost with a node)
declare -A live_since
for s in "${sinks[@]}"; do live_since[$s]=$SECONDS; done
replaced=0
replace_lost() {
  local s n recent
  recent=$(recent_sinks)
  for s in "${!live_since[@]}"; do
    [ $((SECONDS - live_since[$s])) -ge 10 ] || continue
    grep -qx "$s" <<<"$recent" && continue
    unset "live_since[$s]"
    [ ${#sinks[@]} -lt 250 ] || continue
    n=$(call spawn --connect "$(ep 1)" csink collect "$WORK") || { note "no new sink: $n"; continue; }
    sinks+=("$n"); echo "SINK $n" >>"$meta"; live_since[$n]=$SECONDS; replaced=$((replaced + 1))
    for k in "${!srcs[@]}"; do call send --connect "$(ep "${srchome[$k]}")" "${srcs[$k]}" "add $n" >/dev/null 2>&1; done
    call send --connect "$(ep $WNODE)" "$watcher" "add $n" >/dev/null 2>&1 || note "the watcher did not take add $n"
    note "sink $s took nothing for 8 s: new sink $n"
  done
}

# ---- chaos
declare -A nfaults
fault() { nfaults[$1]=$((${nfaults[$1]:-0} + 1)); faulted[$2]=1; echo "FAULT $1 $2 ${3:-0} $(date +%s%6N) ${4:-}" >>"$meta"; }

# Upgrades node I: drains it (its movable processes go to the others),
# lets it stop, and starts its next run once the others see it gone.
upgrade_node() {
  local i=$1 p=${npid[$1]} out rc
  fault upgrade "$i"
  out=$(call drain --connect "$(ep "$i")" --timeout 2000 --then-stop 2>&1)
  rc=$?
  note "upgrade node $i: drain exit $rc: $(grep -m1 -iE "moved|left" <<<"$out" | tr -s ' ')"
  [ $rc = 0 ] || problem "the drain of node $i failed (exit $rc): $out"
  wait_for 200 eval "! kill -0 $p 2>/dev/null" || { problem "node $i still runs 20 s after its drain --then-stop"; kill -9 "$p"; }
  wait "$p" 2>/dev/null
  rc=$?
  [ $rc = 0 ] || problem "node $i exited with status $rc after its drain --then-stop"
  echo "DEAD $p $i upgrade" >>"$meta"
  npid[$i]=
  start_node "$i" || problem "node $i did not come up after its upgrade"
  # shellcheck disable=SC2046 # (the node ids)
  wait_for 300 all_up $(seq $NODES) || problem "the view did not converge in 30 s after the upgrade of node $i"
}

t_end=$((SECONDS + DURATION))
[ "$MODE" = upgrade ] && t_end=0
for round in $(seq "$([ "$MODE" = upgrade ] && echo "$ROUNDS" || echo 0)"); do
  for i in 1 2 3 4; do
    upgrade_node "$i"
    sleep 2
  done
  note "upgrade round $round done"
done
while [ $SECONDS -lt $t_end ]; do
  supervise
  replace_lost
  r=$((RANDOM % 100))
  if [ $r -lt 30 ]; then
    i=$((3 + RANDOM % 2)) down_ms=$((300 + RANDOM % 1700))
    [ -n "${npid[$i]:-}" ] || continue
    fault kill9 "$i" "$down_ms"
    note "kill -9 node $i, restart after $down_ms ms"
    kill -9 "${npid[$i]}" 2>/dev/null
    wait "${npid[$i]}" 2>/dev/null
    echo "DEAD ${npid[$i]} $i kill9" >>"$meta"
    npid[$i]=
    msleep "$down_ms"
    restart_node "$i"
  elif [ $r -lt $((cuts ? 55 : 65)) ]; then
    i=$((1 + RANDOM % NODES)) ms=$((200 + RANDOM % 801))
    fault freeze "$i" "$ms"
    note "freeze node $i for $ms ms"
    kill -STOP "${npid[$i]}" 2>/dev/null; msleep "$ms"; kill -CONT "${npid[$i]}" 2>/dev/null
  elif [ $r -ge 75 ] && [ $cuts = 1 ]; then
    i=$((1 + RANDOM % NODES)) j=$((1 + RANDOM % (NODES - 1))) ms=$((500 + RANDOM % 3501))
    [ $j -ge $i ] && j=$((j + 1))
    fault cut "$i" "$ms" "$j"; faulted[$j]=1
    note "cut the link between nodes $i and $j for $ms ms"
    "${C[@]}" cut "$i" "$j" --dir "$cdir" >/dev/null || problem "could not cut the link between $i and $j"
    msleep "$ms"
    "${C[@]}" heal "$i" "$j" --dir "$cdir" >/dev/null || problem "could not heal the link between $i and $j"
  else
    i=$((3 + RANDOM % 2)) ms=$((2000 + RANDOM % 2001))
    fault long-freeze "$i" "$ms"
    note "long freeze of node $i for $ms ms"
    kill -STOP "${npid[$i]}" 2>/dev/null; msleep "$ms"; kill -CONT "${npid[$i]}" 2>/dev/null
  fi
  msleep $((500 + RANDOM % 2000))
done

# ---- heal, stop, quieten
note "chaos over: healing"
for i in $(seq $NODES); do [ -n "${npid[$i]:-}" ] && kill -CONT "${npid[$i]}" 2>/dev/null; done
sleep 1
supervise
# shellcheck disable=SC2046 # (the node ids)
wait_for 300 all_up $(seq $NODES) && note "every node sees 1-$NODES up" || problem "the view did not converge in 30 s"
supervise
for k in "${!srcs[@]}"; do
  call send --connect "$(ep "${srchome[$k]}")" "${srcs[$k]}" stop >/dev/null 2>&1 ||
    note "source ${srcs[$k]} did not take stop (its node restarted?)"
done
lines() { cat "$log"/*.log 2>/dev/null | wc -l; }
prev=-1 still=0
for _ in $(seq 60); do # quiet: no new line for 4 s (at most 60 s)
  cur=$(lines)
  if [ "$cur" = "$prev" ]; then still=$((still + 1)); [ $still -ge 8 ] && break; else still=0; fi
  prev=$cur
  sleep 0.5
done
[ $still -ge 8 ] && note "quiet: $cur lines" || note "still not quiet after 30 s ($cur lines)"
for s in "${sinks[@]}"; do
  e=$(call send --connect "$(ep 1)" "$s" stop 2>&1); echo "STOP $s $? $e" >>"$meta"
done
downs() { cat "$log"/*.log 2>/dev/null | grep -c "^D "; }
got_downs() { [ "$(downs)" -ge ${#sinks[@]} ]; }
wait_for 200 got_downs || note "$(downs) DOWNs of ${#sinks[@]} after 20 s"
sleep 1 # any second DOWN
stolen=0
for i in $(seq $NODES); do
  m=$(status "$i" | jq '.nodes[0].migrated' 2>/dev/null)
  stolen=$((stolen + ${m:-0}))
done
note "status: $stolen processes migrated out, summed over the nodes' current runs; $replaced sinks replaced"

# ---- stop the nodes; any crash report
echo "SHUTDOWN $(date +%s%6N)" >>"$meta"
for i in $(seq $NODES); do [ -n "${npid[$i]:-}" ] && kill -TERM "${npid[$i]}" 2>/dev/null; done
for _ in $(seq 150); do
  alive=0
  for i in $(seq $NODES); do [ -n "${npid[$i]:-}" ] && kill -0 "${npid[$i]}" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.1
done
for i in $(seq $NODES); do
  p=${npid[$i]:-}
  [ -n "$p" ] || continue
  kill -0 "$p" 2>/dev/null && { problem "node $i still running 15 s after SIGTERM"; kill -9 "$p"; }
  wait "$p"; rc=$?
  [ $rc -gt 128 ] && [ $rc != 137 ] && problem "node $i ended with signal $((rc - 128)) on SIGTERM"
  [ $rc -le 128 ] && [ $rc != 0 ] && note "node $i exited with status $rc on SIGTERM"
done
for f in "$dir"/node*.log; do
  c=$(crashed_log "$f")
  [ -n "$c" ] && problem "$(basename "$f"): $c"
done
f=$(cat "$dir"/node*.log | grep -c "no flush answer")
[ "$f" -gt 0 ] && note "$f 'no flush answer' warnings in the node logs"

# ---- check
check "$log" | sed 's/^chaos-check/chaos/' | tee "$dir/check.out"
[ "${PIPESTATUS[0]}" = 0 ] || failed=1
if [ "$MODE" = upgrade ]; then # every sink lived through every upgrade
  grep -q "sinks $NSINKS: $NSINKS ended by stop," "$dir/check.out" ||
    problem "not every one of the $NSINKS sinks lived to its stop: $(grep -m1 'chaos: sinks' "$dir/check.out")"
  [ "$replaced" = 0 ] || problem "$replaced sinks went quiet for 8 s and were replaced"
fi
[ "$failed" = 0 ] || story "$log" <"$dir/check.out"
if [ "$failed" = 0 ]; then
  echo "chaos: seed $seed"
  echo "chaos: PASS"
  [ -n "${SN_CHAOS_KEEP:-}" ] && cp -r "$dir" "$SN_CHAOS_KEEP"
  exit 0
fi
keep=${SN_CHAOS_KEEP:-$PWD/chaos-logs-$seed}
rm -rf "$keep"; cp -r "$dir" "$keep" 2>/dev/null && echo "chaos: logs kept in $keep (chaos.sh --check $keep/log checks them again)"
echo "chaos: seed $seed (SN_CHAOS_SEED=$seed to try it again)"
echo "chaos: FAIL"
exit 1
