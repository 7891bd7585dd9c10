#!/usr/bin/env bash
# format.sh - the tree's C stays in its one shape: every .c and .h file
# as .clang-format says (clang-format --dry-run -Werror), and no function
# longer than 80 lines, from its first line to its closing brace (a long
# function is split into named steps; generated code lives in the build
# tree and is not looked at).
#
# And the tree speaks of itself as it is: no source, script, test, CMake
# or man file narrates the project's making (issue numbers, the project's timeline,
# chaos seeds told as stories, how the code used to be). A comment states
# the rule and names the test that guards it; a seed belongs in a test's
# name or data. The phrases that mark such narration are below (NARRATION,
# case-insensitive), looked for in code, scripts, README.md and docs/
# (not in CHANGELOG.md, which tells what changed).
#
# And the folders stay layers: layers.sh, beside this file, fails on an
# include that reaches up (docs/design.md, "Layout").
#
# usage: format.sh SOURCE_DIR [CLANG_FORMAT]
# Prints every file or function out of shape; exits 1 if any, 2 when it
# cannot run (no clang-format: scripts/deps.sh installs it).
set -u
src=${1:?usage: format.sh SOURCE_DIR [CLANG_FORMAT]}
cf=${2:-clang-format}
command -v "$cf" >/dev/null 2>&1 || { echo "format.sh: $cf not found (scripts/deps.sh installs clang-format)" >&2; exit 2; }
cd "$src" || exit 2
mapfile -t files < <(find include common sched wire relay node bench tests examples -name '*.[ch]' | sort)
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
# Narration: every top-level folder but build trees (a CMakeCache.txt),
# README.md and the top-level CMake files; CHANGELOG.md tells changes.
NARRATION=(
  '\bas before\b' '\bissue #?[0-9]+' '\bchaos,? seed [0-9]+' '\bsess[i]ons\b'
  '\b(this|last|previous|earlier|next|work) sess[i]on\b' '\bwork per[i]ods?\b'
  '\bused to\b' '\bpreviously\b' '\bformerly\b' '\bclosed since\b' '\bin CI once\b'
  '\bbefore the (fix|fixes|change|guard)\b' '\bon the code before\b' '[;:] before, ' '\bmeasured on\b'
)
narr_re=$(IFS='|'; echo "${NARRATION[*]}")
dirs=()
for d in */ .ci/ .github/; do
  [ -d "$d" ] && [ ! -e "$d/CMakeCache.txt" ] && dirs+=("${d%/}")
done
mapfile -t prose < <({ find "${dirs[@]}" -type f \( -name '*.[ch]' -o -name '*.sh' -o -name '*.cmake' -o -name 'CMakeLists.txt' \
  -o -name '*.proto' -o -name '*.[1-9]' -o -name '*.py' -o -name '*.awk' -o -name '*.yml' -o -name '*.cfg' -o -name '*.in' \
  -o -name '*.md' -o -path '.ci/*' \) ! -path 'tests/format.sh'; ls CMakeLists.txt ./*.cmake README.md 2>/dev/null; } | sort -u)
told=$(grep -n -i -E "$narr_re" "${prose[@]}" /dev/null | while IFS=: read -r file line text; do
  printf '%s:%s: narrates the making ("%s"): state the rule and the test that guards it\n' "$file" "$line" \
    "$(grep -o -i -E "$narr_re" <<<"$text" | head -1)"
done)
if [ -n "$told" ]; then
  echo "$told"
  status=1
fi
if ! layers=$(bash tests/layers.sh .); then
  echo "$layers"
  status=1
fi
[ $status = 0 ] && echo "$layers" && echo "format: ${#files[@]} files as .clang-format says, no function over 80 lines; ${#prose[@]} files state rules, no narration"
exit $status
