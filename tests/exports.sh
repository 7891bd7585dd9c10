#!/usr/bin/env bash
# exports.sh - checks that libschednode.so, or the schednode program that
# plugins resolve the API from, exports exactly the functions and variables
# schednode.h declares: no internal name leaks (internals are sn__, which
# sched/exports.map hides; the program exports only the list
# cmake/api-symbols.sh makes), and nothing declared is missing.
#
# usage: exports.sh LIBSCHEDNODE.so.1|SCHEDNODE SCHEDNODE.h CC [NM]
# CC preprocesses the header (comments and macros gone); NM (default nm)
# lists the file's dynamic symbols. Only sn_ names are compared: a
# sanitizer's runtime adds symbols of its own. static inline functions in
# the header are not exported and not expected. Prints every mismatch, then
# a summary; exits 1 on any mismatch, 2 when it cannot run.
set -u

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
    echo "usage: $0 LIB HEADER CC [NM]" >&2
    exit 2
fi
lib=$1
header=$2
cc=$3
nm=${4:-nm}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/schednode-exports.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# Exported: every defined dynamic symbol named sn_, without a version suffix.
if ! "$nm" -D --defined-only "$lib" >"$tmp/nm"; then
    echo "exports.sh: $nm failed on $lib" >&2
    exit 2
fi
awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | grep '^sn_' | sort -u >"$tmp/exported"

# Declared: cmake/api-symbols.sh reads them from the header.
if ! "$(dirname "$0")/../cmake/api-symbols.sh" "$header" "$cc" >"$tmp/declared"; then
    exit 2
fi

if [ ! -s "$tmp/declared" ]; then
    echo "exports.sh: found no declarations in $header" >&2
    exit 2
fi

leaked=$(comm -23 "$tmp/exported" "$tmp/declared")
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
for s in $leaked; do
    echo "FAIL exported but not declared in $(basename "$header"): $s (internal? name it sn__)"
done
for s in $missing; do
    echo "FAIL declared in $(basename "$header") but not exported: $s"
done
nl=$(wc -l <"$tmp/declared")
nx=$(wc -l <"$tmp/exported")
nleak=$(printf '%s' "$leaked" | grep -c . || true)
nmiss=$(printf '%s' "$missing" | grep -c . || true)
echo "$nx sn_ symbols exported, $nl declared; $nleak leaked, $nmiss missing"
[ "$nleak" -eq 0 ] && [ "$nmiss" -eq 0 ]
