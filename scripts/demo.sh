#!/usr/bin/env bash
# The main job: install what is missing, build (Release), run the demo
# workload on one node and print what it did.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
exec build/schednode demo
