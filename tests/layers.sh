#!/usr/bin/env bash
# layers.sh - the folders are layers (docs/design.md, "Layout"), and a
# file includes only headers of its own folder and of folders below it:
#
#   include/ (0)  common/ (1)  sched/ (2)  wire/ (3)  relay/ (4)  node/ (5)
#   bench/ (6)  tests/ (7)
#
# examples/ is a plugin's view: the public header only (layer 0). The
# protoc-c output (schednode.pb-c.h) is included by wire/codec.c alone.
# A quoted include is looked up beside the including file, then as a path
# from the tree's top or from include/, then by name among the layers'
# headers (the build gives each target its layers' folders, so a name
# must be unique among them).
#
# usage: layers.sh SOURCE_DIR
# Prints every include that reaches up; exits 1 if any, 2 when it cannot run.
set -u
src=${1:?usage: layers.sh SOURCE_DIR}
cd "$src" || exit 2
declare -A rank=([include]=0 [examples]=0 [common]=1 [sched]=2 [wire]=3 [relay]=4 [node]=5 [bench]=6 [tests]=7)
for d in "${!rank[@]}"; do
  [ -d "$d" ] || { echo "layers.sh: no folder $d/ under $src" >&2; exit 2; }
done
# every header of the layers, by name: name -> its path (two: ambiguous)
declare -A where
while read -r h; do
  n=${h##*/}
  if [ -n "${where[$n]:-}" ]; then where[$n]="ambiguous"; else where[$n]=$h; fi
done < <(find include common sched wire relay node bench tests -name '*.h' | sort)

status=0
while IFS=: read -r file line inc; do
  inc=${inc#*\"}; inc=${inc%%\"*}
  from=${file%%/*}
  if [ "$inc" = schednode.pb-c.h ]; then
    [ "$file" = wire/codec.c ] || { echo "$file:$line: includes $inc: only wire/codec.c includes the protoc-c output"; status=1; }
    continue
  fi
  dir=${file%/*}
  if [ -f "$dir/$inc" ]; then
    to=$(realpath -m --relative-to=. "$dir/$inc")
  elif [ -f "$inc" ]; then
    to=$inc
  elif [ -f "include/$inc" ]; then
    to=include/$inc
  elif [ -n "${where[${inc##*/}]:-}" ] && [ "$inc" = "${inc##*/}" ]; then
    to=${where[$inc]}
  else
    echo "$file:$line: includes \"$inc\", which is no header of the layers"; status=1; continue
  fi
  if [ "$to" = ambiguous ]; then
    echo "$file:$line: includes \"$inc\", a name two layers' headers have: rename one"; status=1; continue
  fi
  top=${to%%/*}
  if [ -z "${rank[$top]:-}" ]; then
    echo "$file:$line: includes $to, outside the layers"; status=1
  elif [ "${rank[$top]}" -gt "${rank[$from]}" ]; then
    echo "$file:$line: includes $to: $from/ (layer ${rank[$from]}) reaches up into $top/ (layer ${rank[$top]})"; status=1
  fi
done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
  $(find include examples common sched wire relay node bench tests -name '*.[ch]' | sort) /dev/null)
[ $status = 0 ] && echo "layers: no include reaches up (include < common < sched < wire < relay < node < bench < tests)"
exit $status
