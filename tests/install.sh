#!/usr/bin/env bash
# install.sh - the SDK as a process author meets it: `cmake --install` into
# a scratch prefix, then README's counter plugin and the psum example built
# out of the tree against the installed package twice (pkg-config's
# schednode-plugin, and CMake's schednode::plugin), linked with nothing,
# each loaded into the installed node with --load (no LD_LIBRARY_PATH) and
# talked to through the client commands; the man pages render; versions
# are reported.
# Args: $1 the build tree, $2 the source tree.
set -u
BUILD=$(realpath "$1") SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
P=$dir/prefix

cmake --install "$BUILD" --prefix "$P" >"$dir/install.log" 2>&1 && ok "cmake --install into a scratch prefix" ||
  { bad "install: $(tail -5 "$dir/install.log")"; echo "$pass passed, $fail failed"; exit 1; }
libdir=$(dirname "$(find "$P" -name schednode.pc | head -1)")/..
for f in bin/schednode bin/schedbench include/schednode/schednode.h share/man/man1/schednode.1 \
  share/man/man7/schednode-process.7; do
  [ -e "$P/$f" ] || bad "not installed: $f"
done
[ -e "$libdir/libschednode.a" ] && [ -L "$libdir/libschednode.so" ] && [ -e "$libdir/libschednode.so.1" ] &&
  [ -f "$libdir/cmake/schednode/schednodeConfig.cmake" ] && ok "library (shared + static), header, pc, CMake package, man" ||
  bad "files: $(cd "$P" && find . -type f -o -type l | sort | tr '\n' ' ')"
soname=$(objdump -p "$libdir/libschednode.so.1" 2>/dev/null | awk '/SONAME/ {print $2}')
[ "$soname" = libschednode.so.1 ] && ok "SONAME libschednode.so.1" || bad "soname: $soname"
# the installed library and program against the installed header (tests/exports.sh)
for f in "$libdir/libschednode.so.1" "$P/bin/schednode"; do
  exports=$("$(dirname "$0")/exports.sh" "$f" "$P/include/schednode/schednode.h" "${CC:-cc}" 2>&1) &&
    ok "$(basename "$f") exports what schednode.h declares: $(tail -1 <<<"$exports")" ||
    bad "exports of $f: $(tr '\n' ' ' <<<"$exports")"
done
ver=$("$P/bin/schednode" --version)
grep -q "^schednode 0\.1\.0 (API 1)$" <<<"$ver" && grep -q '#define SN_VERSION_STRING "0.1.0"' "$P/include/schednode/schednode.h" &&
  ok "schednode --version and the header agree: $ver" || bad "version: $ver"

# --- plugins: README's counter and the psum example, with pkg-config
# (schednode-plugin) and with CMake (schednode::plugin); they link nothing
export PKG_CONFIG_PATH=$libdir/pkgconfig
awk '/^## Writing a process type/ {f = 1} f && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' "$SRC/README.md" \
  >"$dir/counter.c"
awk '/^### Building against schednode/ {f = 1} f && /^```cmake$/ {c = 1; next} c && /^```$/ {exit} c' \
  "$SRC/README.md" >"$dir/CMakeLists.txt"
mkdir -p "$dir/counter-src" && mv "$dir/counter.c" "$dir/CMakeLists.txt" "$dir/counter-src/"
flags=$(pkg-config --cflags --libs schednode-plugin) && ! grep -qE -- '(^| )-l' <<<"$flags" &&
  ok "pkg-config --cflags --libs schednode-plugin: $flags (no library)" || bad "pkg-config schednode-plugin: $flags"
pkg-config --libs schednode | grep -q -- "-lschednode" && ok "pkg-config schednode (embedding): -lschednode" ||
  bad "pkg-config schednode: $(pkg-config --libs schednode 2>&1)"
# shellcheck disable=SC2086 # $flags: words
cc -Wall -Wextra -Werror "$dir/counter-src/counter.c" $flags -o "$dir/counter-pc.so" 2>"$dir/cc.log" &&
  ok "README's counter builds with pkg-config and -Wall -Wextra -Werror" || bad "counter, pkg-config: $(cat "$dir/cc.log")"
# shellcheck disable=SC2086
cc -Wall -Werror "$SRC/examples/psum/psum.c" $flags -o "$dir/psum-pc.so" 2>"$dir/cc.log" &&
  ok "psum builds with pkg-config" || bad "psum, pkg-config: $(cat "$dir/cc.log")"
cmake -S "$dir/counter-src" -B "$dir/counter-cmake" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" \
  >"$dir/cm.log" 2>&1 && cmake --build "$dir/counter-cmake" >>"$dir/cm.log" 2>&1 &&
  ok "README's counter builds with README's CMakeLists.txt (schednode::plugin)" || bad "counter, cmake: $(tail -5 "$dir/cm.log")"
cmake -S "$SRC/examples/psum" -B "$dir/psum-cmake" -DCMAKE_PREFIX_PATH="$P" >"$dir/cm.log" 2>&1 &&
  cmake --build "$dir/psum-cmake" >>"$dir/cm.log" 2>&1 && ok "psum builds with find_package(schednode)" ||
  bad "psum, cmake: $(tail -5 "$dir/cm.log")"
for so in "$dir/counter-pc.so" "$dir/psum-pc.so" "$dir/counter-cmake/counter.so" "$dir/psum-cmake/psum.so"; do
  dyn=$(readelf -d "$so" 2>&1)
  grep -q "libschednode\|RUNPATH\|RPATH" <<<"$dyn" && bad "$so depends on: $(grep 'NEEDED\|PATH' <<<"$dyn")"
done
ok "no plugin needs libschednode or carries a RUNPATH"

# --- each plugin in a real node (the installed program, no LD_LIBRARY_PATH),
# loaded by a bare file name from its directory
unset LD_LIBRARY_PATH
# node SO: starts the installed program with SO (from SO's directory)
node() {
  port=$(free_port)
  (cd "$(dirname "$1")" && exec "$P/bin/schednode" --listen "tcp://127.0.0.1:$port" --insecure \
    --load "$(basename "$1")" --load "$(find "$P" -name schednode-demo.so | head -1)") >"$dir/node.log" 2>&1 &
  node=$!; pids+=($node)
  wait_for 100 grep -q "up: " "$dir/node.log" || bad "node with $1 did not start: $(cat "$dir/node.log")"
}
cl() { timeout 30 "$P/bin/schednode" "$@" --connect "tcp://127.0.0.1:$port" --insecure 2>&1; }
want=$(((1000000 - 1) * 1000000 * (2 * 1000000 - 1) / 6)) # the sum of i*i for i < 10^6
for so in "$dir/psum-pc.so" "$dir/psum-cmake/psum.so"; do
  node "$so"
  got=$(cl call psum sum "0 1000000")
  [ "$got" = "$want" ] && ok "$(basename "$(dirname "$so")")/$(basename "$so") loaded with --load: call psum sum = $got" ||
    bad "call: $got (want $want)"
  kill -TERM "$node"; wait "$node"
done
for so in "$dir/counter-pc.so" "$dir/counter-cmake/counter.so"; do
  node "$so"
  pid=$(cl spawn counter count)
  out=$(cl send "$pid" hello); rc=$?
  got=$(cl call xsource blast "$pid 3")
  [[ $pid =~ ^[0-9]+\.[0-9]+$ ]] && [ $rc -eq 0 ] && [ "$got" = 0 ] &&
    ok "$(basename "$(dirname "$so")")/$(basename "$so"): spawn counter ($pid), send, and its echo of message 0" ||
    bad "counter: pid=$pid send rc=$rc $out, xsource got '$got'"
  kill -TERM "$node"; wait "$node"
done

# --- man pages
for page in "$P/share/man/man1/schednode.1" "$P/share/man/man7/schednode-process.7"; do
  out=$(MANWIDTH=80 MANPAGER=cat man -l "$page" 2>&1)
  grep -q "NAME" <<<"$out" && ! grep -qi "warning" <<<"$out" && ok "man -l renders $(basename "$page")" ||
    bad "man $(basename "$page"): $(head -5 <<<"$out")"
done
flags_in_help=$("$P/bin/schednode" --help | grep -o -- '--[a-z-]*' | sort -u)
missing=$(for f in $flags_in_help; do grep -qF -- "${f//-/\\-}" "$P/share/man/man1/schednode.1" || echo "$f"; done)
[ -z "$missing" ] && ok "schednode(1) documents every flag of --help" || bad "not in the man page: $missing"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
