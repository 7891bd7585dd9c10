#!/usr/bin/env bash
# examples.sh - the three examples of examples/, built in the tree, each
# loaded into a node with --load and run: the key-value service answers its
# demo's requests, the fork-join sum matches the closed form, the blocking
# reader returns a file's contents (and a clear error for a missing file).
# Args: $1 schednode, $2 the build tree's examples directory.
set -u
SN=$1 EX=$2
. "$(dirname "$0")/lib.sh"
run() { local so=$1; shift; timeout 60 "$SN" --log-level warn --load "$EX/$so" --timeout 30000 run "$@" 2>&1; }

out=$(run kv/kv.so kv demo)
[ "$out" = "kv: a=1 c=none, after del a=none" ] && ok "kv: the store answers put/get/del by tag" || bad "kv: $out"
n=1500000 # (n-1)*n*(2n-1) still fits in 63 bits
out=$(run psum/psum.so psum sum "0 $n")
[ "$out" = "$(((n - 1) * n * (2 * n - 1) / 6))" ] && ok "psum: sum of i*i below $n = $out (a tree of processes)" ||
  bad "psum: $out"
printf 'line one\nline two' >"$dir/f.txt"
out=$(run readfile/readfile.so cat read "$dir/f.txt")
[ "$out" = "$(printf 'line one\nline two')" ] && ok "readfile: the contents, read on a thread of the handler" ||
  bad "readfile: $out"
out=$(run readfile/readfile.so cat read "$dir/missing"); rc=$?
[ $rc -eq 1 ] && grep -q "cannot read $dir/missing: No such file or directory" <<<"$out" &&
  ok "readfile: a missing file fails the process with the reason" || bad "missing file: rc=$rc $out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
