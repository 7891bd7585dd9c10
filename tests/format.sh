#!/usr/bin/env bash
# format.sh - the tree's C stays in its one shape: every .c and .h file
# as .clang-format says (clang-format --dry-run -Werror), and no function
# longer than 80 lines, from its first line to its closing brace (a long
# function is split into named steps; generated code lives in the build
# tree and is not looked at).
#
# usage: format.sh SOURCE_DIR [CLANG_FORMAT]
# Prints every file or function out of shape; exits 1 if any, 2 when it
# cannot run (no clang-format: scripts/deps.sh installs it).
set -u
src=${1:?usage: format.sh SOURCE_DIR [CLANG_FORMAT]}
cf=${2:-clang-format}
command -v "$cf" >/dev/null 2>&1 || { echo "format.sh: $cf not found (scripts/deps.sh installs clang-format)" >&2; exit 2; }
cd "$src" || exit 2
mapfile -t files < <(find node relay include tests bench examples -name '*.[ch]' | sort)
[ ${#files[@]} -gt 50 ] || { echo "format.sh: only ${#files[@]} C files under $src" >&2; exit 2; }
status=0
if ! "$cf" --style=file --dry-run -Werror "${files[@]}" 2>"${TMPDIR:-/tmp}/format.$$"; then
  grep -o '^[^:]*:[0-9]*' "${TMPDIR:-/tmp}/format.$$" | sort -u -t: -k1,1 | sed 's/$/: not as .clang-format says (clang-format -i FILE)/'
  status=1
fi
rm -f "${TMPDIR:-/tmp}/format.$$"
# A function: a header line at column 0 (not a declaration, not a
# directive), then "{" at column 0, up to "}" at column 0.
long=$(awk '
  FNR == 1 { infn = 0; hdr = 0 }
  !infn && /^[A-Za-z_].*\(/ && !/;[[:space:]]*$/ { hdr = FNR; line = $0 }
  !infn && /^\{/ && hdr { infn = 1; start = hdr }
  infn && /^\}/ { infn = 0; n = FNR - start + 1; if (n > 80) { sub(/\(.*/, "", line); printf "%s:%d: %s is %d lines (at most 80)\n", FILENAME, start, line, n } hdr = 0 }
' "${files[@]}")
if [ -n "$long" ]; then
  echo "$long"
  status=1
fi
[ $status = 0 ] && echo "format: ${#files[@]} files as .clang-format says, no function over 80 lines"
exit $status
