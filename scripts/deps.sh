#!/usr/bin/env bash
# Installs the Debian packages schednode needs, only those missing, with
# apt-get (as root, or through sudo). Safe to run again: does nothing when
# everything is there.
set -euo pipefail

pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev clang-format
      libzmq3-dev libczmq-dev libprotobuf-c-dev protobuf-c-compiler
      libsodium-dev libcmocka-dev libjson-c-dev jq man-db iproute2)

pkgs+=(libmicrohttpd-dev chromium curl) # metrics and the dashboard (node/http.c), its browser test

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
  # without a terminal, sudo must not wait for a password
  [ -t 0 ] || sudo=(sudo -n)
else
  echo "deps.sh: missing packages: ${missing[*]}" >&2
  echo "deps.sh: run as root or install sudo, or install them yourself with apt-get" >&2
  exit 1
fi

echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
