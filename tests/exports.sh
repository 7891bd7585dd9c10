#!/usr/bin/env bash
# exports.sh - checks that libschednode.so exports exactly the functions and
# variables schednode.h declares: no internal name leaks (internals are sn__,
# which node/sched/exports.map hides), and nothing declared is missing.
#
# usage: exports.sh LIBSCHEDNODE.so.1 SCHEDNODE.h CC [NM]
# CC preprocesses the header (comments and macros gone); NM (default nm)
# lists the library's dynamic symbols. Only sn_ names are compared: a
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

# Declared: the header's top-level declarations, split at ';' and at the '}'
# that closes a top-level body; from each, __attribute__((...)) removed, the
# name before the first '(' (a function) or, for an extern, the last name (a
# variable). Struct and enum bodies are skipped, so member function pointers
# are not taken for functions; typedefs declare no symbol; a static (inline)
# function is defined in the header itself.
if ! "$cc" -E -P -x c "$header" >"$tmp/pp"; then
    echo "exports.sh: $cc could not preprocess $header" >&2
    exit 2
fi
tr '\n' ' ' <"$tmp/pp" | awk '
# s without its __attribute__((...)) and __asm__(...) parts
function noattr(s,    out, i, d) {
    out = ""
    while (match(s, /__(attribute|asm)__[ \t]*\(/)) {
        out = out substr(s, 1, RSTART - 1)
        i = RSTART + RLENGTH; d = 1
        for (; i <= length(s) && d > 0; i++) {
            if (substr(s, i, 1) == "(") d++
            else if (substr(s, i, 1) == ")") d--
        }
        s = substr(s, i)
    }
    return out s
}
function emit(s,    name) {
    gsub(/^[ \t]+|[ \t]+$/, "", s)
    if (s == "" || s ~ /^typedef[ \t]/ || s ~ /(^|[ \t])static[ \t]/)
        return
    s = noattr(s)
    if (match(s, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
        name = substr(s, RSTART, RLENGTH)
        sub(/[ \t]*\($/, "", name)
        print name
        return
    }
    if (s ~ /^extern[ \t]/ && match(s, /[A-Za-z_][A-Za-z0-9_]*[ \t]*(\[[^]]*\][ \t]*)*(=.*)?$/)) {
        name = substr(s, RSTART, RLENGTH)
        sub(/[ \t\[=].*$/, "", name)
        print name
    }
}
{
    depth = 0; stmt = ""
    for (i = 1; i <= length($0); i++) {
        c = substr($0, i, 1)
        if (c == "{") { depth++; if (depth == 1) stmt = stmt " { "; continue }
        if (c == "}") { depth--; if (depth == 0) { stmt = stmt " } "; if (stmt ~ /\)[ \t]*\{[ \t]*\}[ \t]*$/) { emit(stmt); stmt = "" } } continue }
        if (depth > 0) continue
        if (c == ";") { emit(stmt); stmt = ""; continue }
        stmt = stmt c
    }
}' | grep '^sn_' | sort -u >"$tmp/declared"

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
