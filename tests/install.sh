#!/usr/bin/env bash
# install.sh - the SDK as a process author meets it: `cmake --install` into
# a scratch prefix, then the psum example built out of the tree against the
# installed package twice (pkg-config, and CMake's find_package), each
# plugin loaded into the installed node with --load and its result checked
# through `schednode call`; the man pages render; versions are reported.
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
# the installed library against the installed header (tests/exports.sh)
exports=$("$(dirname "$0")/exports.sh" "$libdir/libschednode.so.1" "$P/include/schednode/schednode.h" "${CC:-cc}" 2>&1) &&
  ok "the shared library exports what schednode.h declares: $(tail -1 <<<"$exports")" ||
  bad "exports: $(tr '\n' ' ' <<<"$exports")"
ver=$("$P/bin/schednode" --version)
grep -q "^schednode 0\.1\.0 (API 1)$" <<<"$ver" && grep -q '#define SN_VERSION_STRING "0.1.0"' "$P/include/schednode/schednode.h" &&
  ok "schednode --version and the header agree: $ver" || bad "version: $ver"

# --- pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs schednode) && ok "pkg-config --cflags --libs schednode: $flags" || bad "pkg-config"
cc -shared -fPIC -Wall -Werror "$SRC/examples/psum/psum.c" $flags -o "$dir/psum-pc.so" 2>"$dir/cc.log" &&
  ok "psum builds with pkg-config" || bad "pkg-config build: $(cat "$dir/cc.log")"

# --- CMake package
cmake -S "$SRC/examples/psum" -B "$dir/psum-cmake" -DCMAKE_PREFIX_PATH="$P" >"$dir/cm.log" 2>&1 &&
  cmake --build "$dir/psum-cmake" >>"$dir/cm.log" 2>&1 && ok "psum builds with find_package(schednode)" ||
  bad "cmake build: $(tail -5 "$dir/cm.log")"

# --- each plugin in a real node (the installed program), checked through call
port=$(free_port)
want=$(((1000000 - 1) * 1000000 * (2 * 1000000 - 1) / 6)) # the sum of i*i for i < 10^6
for so in "$dir/psum-pc.so" "$dir/psum-cmake/psum.so"; do
  # (a prefix outside the loader's path: the pkg-config build has no rpath)
  LD_LIBRARY_PATH=$libdir "$P/bin/schednode" --listen "tcp://127.0.0.1:$port" --insecure --load "$so" \
    >"$dir/node.log" 2>&1 &
  node=$!; pids+=($node)
  wait_for 100 grep -q "up: " "$dir/node.log" || bad "node with $(basename "$so") did not start: $(cat "$dir/node.log")"
  got=$(timeout 30 "$P/bin/schednode" call psum sum "0 1000000" --connect "tcp://127.0.0.1:$port" --insecure 2>&1)
  [ "$got" = "$want" ] && ok "$(basename "$(dirname "$so")")/$(basename "$so") loaded with --load: call psum sum = $got" ||
    bad "call: $got (want $want)"
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
