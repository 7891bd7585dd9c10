#!/usr/bin/env bash
# cli.sh - checks the schednode program: flags, commands, plugins, signals.
#
# usage: cli.sh PATH/TO/schednode PLUGIN_DIR
# Prints one line per check, then "N passed, N failed"; exits 1 on any
# failure. Every run of the program is bounded in time, and a node left
# running in the background is killed on exit.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 SCHEDNODE PLUGIN_DIR" >&2
    exit 2
fi
bin=$1
plugdir=$2

passed=0
failed=0
node_pid=
tmp=$(mktemp -d "${TMPDIR:-/tmp}/schednode-cli.XXXXXX") || exit 1

cleanup() {
    if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
        kill -9 "$node_pid" 2>/dev/null
        wait "$node_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

out=$tmp/out
err=$tmp/err

# run ARGS...: runs the program (bounded), stdout to $out, stderr to $err,
# exit status in $rc.
run() {
    timeout -k 5 120 "$bin" "$@" >"$out" 2>"$err"
    rc=$?
}

pass() {
    passed=$((passed + 1))
    echo "ok   $1"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $1: $2"
    if [ -s "$out" ]; then sed -n '1,15s/^/     stdout: /p' "$out"; fi
    if [ -s "$err" ]; then sed -n '1,15s/^/     stderr: /p' "$err"; fi
}

# check NAME WANT_RC [out|err TEXT]...: the last run exited WANT_RC and
# each named stream contains its TEXT (fixed string).
check() {
    local name=$1 want=$2
    shift 2
    if [ "$rc" -ne "$want" ]; then
        fail "$name" "exit status $rc, expected $want"
        return
    fi
    while [ $# -ge 2 ]; do
        local file=$out
        [ "$1" = err ] && file=$err
        if ! grep -qF -- "$2" "$file"; then
            fail "$name" "std$1 does not contain '$2'"
            return
        fi
        shift 2
    done
    pass "$name"
}

run --help
check "--help exits 0 with usage" 0 out "usage:" out "--workers"

run --no-such-flag
check "unknown flag exits 2 naming it" 2 err "--no-such-flag"

run --workers 0 demo
check "--workers 0 exits 2 naming --workers" 2 err "--workers"

run --workers abc demo
check "--workers abc exits 2 naming --workers" 2 err "--workers"

run frobnicate
check "unknown command exits 2 naming it" 2 err "frobnicate"

run --workers 2 demo
check "demo exits 0 and prints 'demo ok'" 0 out "demo ok"

run --workers 2 run tree sum
check "run tree sum (no input) fails with exit 1" 1 err "process failed"

run --workers 2 run no-such-type go hello
check "run with an unknown type exits 1 naming the error" 1 err "unknown process type"

run --workers 2 --load "$plugdir/plugin_good.so" run echo say hello
if [ "$rc" -eq 0 ] && [ "$(cat "$out")" = "hello" ]; then
    pass "--load plugin_good.so run echo say hello prints hello"
else
    fail "--load plugin_good.so run echo say hello prints hello" "exit status $rc"
fi

run --workers 2 --load /nonexistent.so
check "--load /nonexistent.so exits 2 naming the file" 2 err "/nonexistent.so"

run --workers 2 --load "$plugdir/plugin_badversion.so"
check "--load plugin_badversion.so exits 2" 2 err "plugin_badversion.so" err "API"

# SIGTERM to a running node: it shuts down in order and exits 0.
name="SIGTERM stops a running node with exit 0"
: >"$out"
"$bin" --workers 2 >"$out" 2>"$err" &
node_pid=$!
up=0
for _ in $(seq 100); do # wait (up to 10 s) until it has blocked its signals
    if grep -q "up:" "$err" 2>/dev/null; then
        up=1
        break
    fi
    if ! kill -0 "$node_pid" 2>/dev/null; then break; fi
    sleep 0.1
done
if [ "$up" -ne 1 ]; then
    fail "$name" "the node did not come up"
else
    kill -TERM "$node_pid"
    stopped=0
    for _ in $(seq 100); do # up to 10 s
        if ! kill -0 "$node_pid" 2>/dev/null; then
            stopped=1
            break
        fi
        sleep 0.1
    done
    if [ "$stopped" -ne 1 ]; then
        kill -9 "$node_pid" 2>/dev/null
        wait "$node_pid" 2>/dev/null
        fail "$name" "still running 10 s after SIGTERM (killed)"
    else
        wait "$node_pid"
        rc=$?
        check "$name" 0 err "SIGTERM"
    fi
fi
node_pid=

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
