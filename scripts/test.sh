#!/usr/bin/env bash
# The whole test suite, in three builds: plain (warnings are errors),
# ASan+UBSan, and TSan; then a short fourth, fuzz: clang with libFuzzer,
# only the fuzz targets, each fuzzed for 20 s (tests/fuzz). Any failure or
# sanitizer report fails the run; every build runs even if one fails, and a
# summary closes the output.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1
jobs=$(nproc)
passed=0 failed=0 status=0
declare -A verdict

run_build() { # name cmake-args... (build_target, ctest_label: only that target, those tests)
  local name=$1 dir=build-test/$1; shift
  echo "=== $name build ==="
  mkdir -p "$dir"
  if ! { cmake -S . -B "$dir" -DSN_WERROR=ON "$@" >"$dir.configure.log" 2>&1 &&
         cmake --build "$dir" -j"$jobs" ${build_target:+--target "$build_target"} >"$dir.build.log" 2>&1; }; then
    cat "$dir.configure.log" "$dir.build.log" 2>/dev/null | tail -40
    verdict[$name]="build failed"; status=1; failed=$((failed + 1)); return
  fi
  (cd "$dir" && ctest --output-on-failure --timeout 600 ${ctest_label:+-L "$ctest_label"}) | tee "$dir.ctest.log"
  local rc=${PIPESTATUS[0]}
  local line; line=$(grep -E "tests passed, [0-9]+ tests failed out of" "$dir.ctest.log" | tail -1)
  local total fail
  total=$(sed -nE 's/.*failed out of ([0-9]+).*/\1/p' <<<"$line")
  fail=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' <<<"$line")
  total=${total:-0}; fail=${fail:-0}
  [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
  passed=$((passed + total - fail)); failed=$((failed + fail))
  verdict[$name]="$((total - fail))/$total passed"
  [ "$rc" -ne 0 ] && status=1
}

mkdir -p build-test
run_build plain -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_build asan -DCMAKE_BUILD_TYPE=Debug -DSN_SANITIZE=address
run_build tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSN_SANITIZE=thread
CC=clang build_target=fuzz ctest_label=fuzz run_build fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSN_FUZZ=ON

echo "=== summary ==="
for b in plain asan tsan fuzz; do echo "$b: ${verdict[$b]:-not run}"; done
echo "$passed passed, $failed failed"
exit $status
