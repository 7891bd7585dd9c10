#!/usr/bin/env bash
# Builds the Release tree and runs every schedbench case, with the Go peers
# (installs golang-go if missing, for the in-run comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if ! command -v go >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then apt-get install -y -qq golang-go >/dev/null || true
  else sudo apt-get install -y -qq golang-go >/dev/null || true; fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
[ $# -gt 0 ] || set -- all
exec build/schedbench "$@"
