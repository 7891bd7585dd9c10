#!/usr/bin/env bash
# Makes the example cluster's keys next to this script: one certificate per
# node (with the endpoint its nN.cfg listens on, so the others find its
# public key),
# one for the client commands, and keys/authorized with the public halves.
# Usage: make-keys.sh [SCHEDNODE]   (default: build/schednode, then PATH)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sn=${1:-$here/../../build/schednode}
[ -x "$sn" ] || sn=$(command -v schednode) || { echo "make-keys.sh: no schednode binary; build first" >&2; exit 2; }
mkdir -p "$here/keys/authorized"
for n in 1 2 3; do
  ep=$(sed -n 's/^ *listen *= *"\(.*\)"/\1/p' "$here/n$n.cfg")
  [ -f "$here/keys/n$n.cert" ] || "$sn" keygen "$here/keys" --name "n$n" --endpoint "$ep"
done
[ -f "$here/keys/client.cert" ] || "$sn" keygen "$here/keys" --name client
cp "$here"/keys/*.cert "$here/keys/authorized/"
echo "keys in $here/keys; client commands take: --cert $here/keys/client.cert --authorized-keys $here/keys/authorized"
