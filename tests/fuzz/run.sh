#!/bin/sh
# run.sh - one bounded libFuzzer run, as CTest does it (tests/fuzz/CMakeLists.txt):
#   run.sh TARGET SEED-DIR OUT-DIR SECONDS [libFuzzer flags...]
# New inputs go to OUT-DIR (emptied first), never to SEED-DIR, which the
# fuzzer only reads; a crash is saved in OUT-DIR as crash-* and fails the run.
set -eu
target=$1 seeds=$2 out=$3 seconds=$4
shift 4
rm -rf "$out"
mkdir -p "$out/new"
exec "$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -close_fd_mask=1 \
  -artifact_prefix="$out/" "$@" "$out/new" "$seeds"
