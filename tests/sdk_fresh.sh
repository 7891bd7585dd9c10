#!/usr/bin/env bash
# sdk_fresh.sh - a newcomer's first plugin, against the installed SDK: the
# README's counter, built with pkg-config (schednode-plugin) and with the
# README's CMakeLists.txt (schednode::plugin), each loaded into a 3-node
# cluster made by deploy/local-cluster.sh from the installed schednode, with
# no LD_LIBRARY_PATH, and talked to with spawn, send, call, ps and kill.
#
# usage: sdk_fresh.sh [PREFIX]          the SDK installed in PREFIX (default
#                                       /usr/local: what `bash scripts/demo.sh`
#                                       leaves), found as a user finds it
#        sdk_fresh.sh --install BUILD   (CTest) install BUILD into a scratch
#                                       prefix first
# On a fresh Debian 12 root: bash scripts/demo.sh && bash tests/sdk_fresh.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib.sh"
unset LD_LIBRARY_PATH
LC=$top/deploy/local-cluster.sh
trap 'for s in "$dir"/cluster-*; do [ -d "$s" ] && "$LC" --dir "$s" down >/dev/null 2>&1; done; cleanup' EXIT

if [ "${1:-}" = --install ]; then
  P=$dir/prefix
  cmake --install "${2:?--install needs the build tree}" --prefix "$P" >"$dir/install.log" 2>&1 ||
    { bad "cmake --install: $(tail -3 "$dir/install.log")"; echo "$pass passed, $fail failed"; exit 1; }
  # a prefix of our own: tell pkg-config and CMake where it is, as README says
  PKG_CONFIG_PATH=$(dirname "$(find "$P" -name schednode-plugin.pc | head -1)")
  export PKG_CONFIG_PATH
  cmake_prefix=(-DCMAKE_PREFIX_PATH="$P")
else
  P=${1:-/usr/local}
  cmake_prefix=() # a system prefix: found with no help
fi
SN=$P/bin/schednode
DEMO=$(find "$P" -name schednode-demo.so | head -1) # the demo types (xsource): a plugin installed with the SDK
[ -x "$SN" ] || { bad "no schednode in $P/bin (run bash scripts/demo.sh first)"; echo "$pass passed, $fail failed"; exit 1; }

# the README's code, as a reader copies it
src=$dir/counter
mkdir -p "$src"
awk '/^## Writing a process type/ {f = 1} f && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' \
  "$top/README.md" >"$src/counter.c"
awk '/^### Building against schednode/ {f = 1} f && /^```cmake$/ {c = 1; next} c && /^```$/ {exit} c' \
  "$top/README.md" >"$src/CMakeLists.txt"
[ -s "$src/counter.c" ] && [ -s "$src/CMakeLists.txt" ] && ok "README's counter.c and CMakeLists.txt" ||
  bad "no counter code in README.md"

# the README's pkg-config line, exactly
line=$(grep -m1 '^cc .*pkg-config --cflags --libs schednode-plugin' "$top/README.md")
(cd "$src" && eval "$line") >"$dir/cc.log" 2>&1 && [ -f "$src/counter.so" ] &&
  ok "pkg-config: $line" || bad "pkg-config build: $line: $(cat "$dir/cc.log")"
mkdir -p "$dir/pc" && mv "$src/counter.so" "$dir/pc/" 2>/dev/null
cmake -S "$src" -B "$dir/cm" "${cmake_prefix[@]}" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$dir/cm.log" 2>&1 &&
  cmake --build "$dir/cm" >>"$dir/cm.log" 2>&1 && [ -f "$dir/cm/counter.so" ] &&
  ok "CMake: find_package(schednode) + schednode::plugin" || bad "cmake build: $(tail -5 "$dir/cm.log")"

# a cluster of three per build, each node loading counter.so by its bare name
for d in pc cm; do
  [ -f "$dir/$d/counter.so" ] || continue
  st=$dir/cluster-$d
  if ! (cd "$dir/$d" && "$LC" --dir "$st" --bin "$SN" up 3 --wait 60 -- --load counter.so --load "$DEMO") >"$dir/up.log" 2>&1; then
    bad "$d: local-cluster.sh up 3 -- --load counter.so: $(tail -5 "$dir/up.log")"
    continue
  fi
  c() { timeout 60 "$LC" --dir "$st" client "$@" 2>&1; }
  pid=$(c -n 2 spawn counter count)
  out=$(c -n 3 send "$pid" hello); rc=$?
  echo=$(c -n 1 call xsource blast "$pid 1")
  [[ $pid =~ ^[0-9]+\.[0-9]+$ ]] && [ $rc -eq 0 ] && [ "$echo" = 0 ] &&
    ok "$d: counter.so in 3 nodes: spawned on node 2 ($pid), a send from node 3, node 1's message echoed back" ||
    bad "$d: spawn: '$pid', send: rc=$rc $out, call xsource: '$echo'"
  # ps from another node finds it (type counter), kill ends it, ps no longer lists it
  listed() { c -n "$1" ps --json | jq -r ".processes[] | select(.pid == \"$pid\") | .type"; }
  seen=$(listed 3)
  killed=$(c -n 1 kill "$pid" --reason "sdk_fresh done"); krc=$?
  after=$(listed 1)
  [ "$seen" = counter ] && [ $krc -eq 0 ] && [ -z "$after" ] &&
    ok "$d: ps (node 3) lists $pid as a counter; kill ended it ($killed); ps lists it no more" ||
    bad "$d: ps: '$seen', kill: rc=$krc $killed, ps after: '$after'"
  loaded=$(grep -l "loaded plugin ./counter.so" "$st"/n*.log 2>/dev/null | wc -l)
  [ "$loaded" = 3 ] && ok "$d: every node logged 'loaded plugin ./counter.so'" || bad "$d: loaded on $loaded nodes"
  "$LC" --dir "$st" down >/dev/null 2>&1 || bad "$d: local-cluster.sh down"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
