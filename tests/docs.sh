#!/usr/bin/env bash
# docs.sh - the C in the documentation compiles as a user would build it,
# with -Wall -Wextra -Werror: the man page's example (schednode-process.7),
# the example in schednode.h's head comment, and the plugins of examples/.
# A positional sn_type_t initializer (-Wmissing-field-initializers) or an
# unused parameter fails it.
#
# usage: docs.sh SOURCE_DIR CC
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 SOURCE_DIR CC" >&2
    exit 2
fi
src=$1 cc=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/schednode-docs.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
compile() { # NAME FILE STD
    if out=$("$cc" -std="$3" -Wall -Wextra -Werror -fsyntax-only -I"$src/include" "$2" 2>&1); then
        echo "ok   $1 compiles with -Wall -Wextra -Werror"
        pass=$((pass + 1))
    else
        echo "FAIL $1:"
        printf '%s\n' "$out"
        fail=$((fail + 1))
    fi
}

# The man page's EXAMPLE: its .nf ... .fi block, roff escapes undone.
awk '/^\.SH EXAMPLE/ { ex = 1; next } /^\.SH / { ex = 0 } ex && /^\.fi/ { nf = 0 } ex && nf { print } ex && /^\.nf/ { nf = 1 }' \
    "$src/man/schednode-process.7" | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' >"$tmp/man.c"
[ -s "$tmp/man.c" ] || { echo "FAIL no EXAMPLE found in schednode-process.7"; exit 1; }
compile "schednode-process(7) EXAMPLE" "$tmp/man.c" c11

# schednode.h's head comment: the indented block after "A minimal process type".
{
    printf '#include <schednode/schednode.h>\n#include <string.h>\n'
    awk '/A minimal process type/ { ex = 1; next } ex && /\*\// { exit } ex { sub(/^ \* ?/, ""); print }' \
        "$src/include/schednode/schednode.h"
} >"$tmp/header.c"
[ "$(wc -l <"$tmp/header.c")" -gt 5 ] || { echo "FAIL no example found in schednode.h"; exit 1; }
compile "schednode.h's example" "$tmp/header.c" c11

for f in "$src"/examples/*/*.c; do
    compile "examples/${f#"$src"/examples/}" "$f" gnu11
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
