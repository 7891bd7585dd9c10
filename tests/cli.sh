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
demo=$(dirname "$bin")/schednode-demo.so # the demo types (tree): a plugin
src=$(cd "$(dirname "$0")/.." && pwd)    # the source tree (README.md, man/)

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

# option errors (main.c die_bad_option): each says what is wrong with the
# flag as given, exit 2
run status --json=yes --connect tcp://127.0.0.1:1
check "--json=yes: --json takes no value, exit 2" 2 err "option '--json' takes no value" err "'--json=yes'"
run --workers
check "--workers without a value: needs a value, exit 2" 2 err "option '--workers' needs a value"
run -w
check "-w without a value: needs a value, exit 2" 2 err "option '-w' needs a value"
run --no demo
check "--no: ambiguous, the options it could be listed, exit 2" 2 err "option '--no' is ambiguous" err "--no-steal"

# did you mean: the closest option or command by edit distance, exit 2
run --lod x.so demo
check "--lod: did you mean --load, exit 2" 2 err "unknown option '--lod' (did you mean '--load'?)"
run --dashbord 'tcp://127.0.0.1:*'
check "--dashbord: did you mean --dashboard, exit 2" 2 err "(did you mean '--dashboard'?)"
run spwan counter count --connect tcp://127.0.0.1:1
check "spwan: did you mean spawn, exit 2" 2 err "unknown command 'spwan' (did you mean 'spawn'?)"
run --workers 1 statu
check "statu: did you mean status, exit 2" 2 err "(did you mean 'status'?)"
run --workers 1 frobnicate
if [ "$rc" -eq 2 ] && ! grep -q "did you mean" "$err"; then
    pass "frobnicate: no command is close, no suggestion"
else
    fail "frobnicate: no command is close, no suggestion" "exit $rc"
fi

run --workers 2 demo
check "demo exits 0 and prints 'demo ok'" 0 out "demo ok"
run --workers 1 demo
if [ "$rc" -eq 0 ] && grep -qx "schednode demo: node 1, 1 worker" "$out"; then
    pass "demo on one worker says '1 worker' (a count's noun agrees with it)"
else
    fail "demo on one worker says '1 worker' (a count's noun agrees with it)" "exit $rc"
fi

run --workers 2 --load "$demo" run tree sum
check "run tree sum (no input): init refused, named as such, exit 1" 1 err "cannot run tree sum: spawn refused by tree's init (method 'sum'): invalid argument"

run --workers 2 --load "$demo" run tree nope
check "run tree nope: the unknown method named, exit 1" 1 err "process type 'tree' has no method 'nope'"

run --workers 2 --load "$demo" --timeout 300 run xsink collect 5
check "run --timeout: no result in time exits 5 (as call does), saying so" 5 err "no result within 300 ms (--timeout)"

run --workers 2 run no-such-type go hello
check "run with an unknown type exits 1 naming the error" 1 err "unknown process type"

run --workers 2 --load "$plugdir/plugin_good.so" run echo say hello
if [ "$rc" -eq 0 ] && [ "$(cat "$out")" = "hello" ]; then
    pass "--load plugin_good.so run echo say hello prints hello"
else
    fail "--load plugin_good.so run echo say hello prints hello" "exit status $rc"
fi

# a bare file name is a path relative to the current directory (as a config
# file's are), never a name for dlopen's library search path
pushd "$plugdir" >/dev/null || exit 1
run --workers 2 --load plugin_good.so run echo say hello
popd >/dev/null || exit 1
check "--load plugin_good.so (no ./) loads ./plugin_good.so" 0 out "hello"
pushd "$tmp" >/dev/null || exit 1
run --workers 2 --load libc.so.6 run echo say hello
popd >/dev/null || exit 1
check "--load libc.so.6 looks for ./libc.so.6, not the loader's path" 2 err "./libc.so.6"

run --workers 2 --load /nonexistent.so
check "--load /nonexistent.so exits 2 naming the file" 2 err "/nonexistent.so"

run --workers 2 --load "$demo" --load "$demo" run tree sum
check "a plugin loaded twice names the taken type, exit 2" 2 err "type 'tree' is already registered"

run --workers 2 --load "$plugdir/plugin_badversion.so"
check "--load plugin_badversion.so exits 2" 2 err "plugin_badversion.so" err "API"

# Endpoints: a port outside 1..65535 (libzmq would bind it modulo 65536),
# port 0, no port, a bad host: exit 2 naming the flag. Bounded at 10 s: a
# node that starts anyway fails the check by its exit status.
run_brief() {
    timeout -k 5 10 "$bin" "$@" >"$out" 2>"$err"
    rc=$?
}
run_brief --insecure --listen tcp://127.0.0.1:99999
check "--listen port 99999 exits 2 naming the flag and the port" 2 err "--listen" err "port 99999 is not from 1 to 65535"
run_brief --insecure --listen tcp://127.0.0.1:0
check "--listen port 0 exits 2 (the node would advertise port 0)" 2 err "--listen" err "tcp://HOST:*"
run_brief --insecure --listen tcp://127.0.0.1
check "--listen without a port exits 2" 2 err "--listen" err "no port"
run_brief --insecure --listen tcp://127.0.0.1:70x
check "--listen with a port that is no number exits 2" 2 err "--listen" err "'70x' is not a number"
run_brief --insecure --listen tcp://::1:7000
check "--listen with an IPv6 address outside brackets exits 2" 2 err "--listen" err "brackets"
run_brief --insecure --listen 'tcp://127.0.0.1:*' --join tcp://127.0.0.1:65536
check "--join port 65536 exits 2 naming --join" 2 err "--join" err "port 65536"
run_brief --insecure --listen 'tcp://127.0.0.1:*' --join 'tcp://*:7000'
check "--join to '*' exits 2 naming --join" 2 err "--join" err "only for listening"
run_brief --insecure --listen 'tcp://127.0.0.1:*' --advertise tcp://127.0.0.1:0
check "--advertise port 0 exits 2 naming --advertise" 2 err "--advertise" err "port 0 is not from 1 to 65535"
run_brief --insecure --listen 'tcp://127.0.0.1:*' --peer 2=tcp://127.0.0.1:99999
check "--peer port 99999 exits 2 naming --peer" 2 err "--peer" err "port 99999"
run_brief status --connect tcp://127.0.0.1:100000
check "--connect port 100000 exits 2 naming --connect" 2 err "--connect" err "port 100000"

# start_node LOG ARGS...: a node listening on a free port the kernel picks
# (tcp://127.0.0.1:*), in the background ($node_pid, killed on exit); sets
# $node_ep to where it listens. Returns 1 if it did not come up in 10 s.
start_node() {
    local log=$1
    shift
    "$bin" --insecure --listen 'tcp://127.0.0.1:*' "$@" >/dev/null 2>"$log" &
    node_pid=$!
    node_ep=
    for _ in $(seq 100); do
        if grep -q "up:" "$log" 2>/dev/null; then
            node_ep=$(sed -n 's/.*listening on \(tcp:[^ ,]*\).*/\1/p' "$log" | head -1)
            break
        fi
        kill -0 "$node_pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$node_ep" ]
}

# stop_node: waits up to 10 s for the node to end (SIGKILL after); its
# exit status in $node_rc (137 if killed).
stop_node() {
    for _ in $(seq 100); do
        kill -0 "$node_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$node_pid" 2>/dev/null
    wait "$node_pid"
    node_rc=$?
    node_pid=
}

# exit() inside a process's step (plugin_exit's type "exit"): the node ends
# at once with that status, no czmq assertion at exit (czmq's atexit
# handler must not close the relay's sockets under its thread), no
# sanitizer report; a client waiting in `call` hears the node went away at
# once, not after its --timeout.
name="exit(0) in a step: the node ends with 0, no abort; the waiting call hears it went away"
nlog=$tmp/node-exit.log
if ! start_node "$nlog" --workers 2 --load "$plugdir/plugin_exit.so"; then
    stop_node
    fail "$name" "the node did not come up: $(head -3 "$nlog")"
else
    t0=$(date +%s%N)
    run call exit now --connect "$node_ep" --insecure --timeout 30000
    ms=$((($(date +%s%N) - t0) / 1000000))
    stop_node
    if [ "$node_rc" -ne 0 ]; then
        fail "$name" "the node exited $node_rc: $(grep -v "^I:" "$nlog" | head -5)"
    elif grep -qE "Assertion|dangling|Sanitizer|runtime error" "$nlog"; then
        fail "$name" "node log: $(grep -E "Assertion|dangling|Sanitizer|runtime error" "$nlog" | head -3)"
    elif ! grep -q "exit(0) called by a process" "$nlog"; then
        fail "$name" "the node did not say why it ended: $(tail -2 "$nlog")"
    elif [ "$ms" -gt 10000 ]; then
        fail "$name" "the call took $ms ms (its timeout is 30000 ms)"
    else
        check "$name" 1 err "went away (closed the connection) while waiting for the answer"
    fi
fi

# A call's result of up to the largest message (--max-message, 64 MiB)
# comes through; one over it comes back as an error that names the size
# and the limit, at once.
name="a call result over the largest message names the size and the limit"
nlog=$tmp/node-huge.log
if ! start_node "$nlog" --workers 2 --load "$plugdir/plugin_exit.so"; then
    stop_node
    fail "$name" "the node did not come up: $(head -3 "$nlog")"
else
    run call huge bytes 1000 --connect "$node_ep" --insecure --timeout 30000
    if [ "$rc" -ne 0 ] || [ "$(tr -d '\n' <"$out" | wc -c)" -ne 1000 ]; then
        fail "a 1000-byte call result comes through" "exit status $rc"
    else
        pass "a 1000-byte call result comes through"
    fi
    run call huge bytes 17000000 --connect "$node_ep" --insecure --timeout 30000
    if [ "$rc" -ne 0 ] || [ "$(tr -d '\n' <"$out" | wc -c)" -ne 17000000 ]; then
        fail "a 17 MB call result comes through" "exit status $rc, $(wc -c <"$out") bytes"
    else
        pass "a 17 MB call result comes through"
    fi
    t0=$(date +%s%N)
    run call huge bytes 70000000 --connect "$node_ep" --insecure --timeout 30000
    ms=$((($(date +%s%N) - t0) / 1000000))
    kill -TERM "$node_pid"
    stop_node
    if [ "$ms" -gt 10000 ]; then
        fail "$name" "the call took $ms ms (its timeout is 30000 ms)"
    else
        check "$name" 1 err "the result is 70000000 bytes, over the largest message, 67108864 bytes (--max-message)"
    fi
fi

# --metrics and --dashboard (main.c start_http): both at port '*', each
# has a server and a free port of its own, each logged with its URL and
# serving there; both at one fixed port, one server serves both.
name="--metrics and --dashboard at port *: two servers, each port logged and serving"
nlog=$tmp/node-http.log
if ! start_node "$nlog" --workers 1 --metrics 'tcp://127.0.0.1:*' --dashboard 'tcp://127.0.0.1:*'; then
    stop_node
    fail "$name" "the node did not come up: $(head -3 "$nlog")"
else
    grep -q "up: 1 worker;" "$nlog" && pass "a node of one worker logs 'up: 1 worker'" ||
        fail "a node of one worker logs 'up: 1 worker'" "$(grep 'up:' "$nlog")"
    murl=$(sed -n 's/.* metrics on port [0-9]*: \(http[^ ]*\).*/\1/p' "$nlog")
    durl=$(sed -n 's/.* dashboard on port [0-9]*: \(http[^ ]*\).*/\1/p' "$nlog")
    mcode=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$murl")
    dpage=$(curl -s -m 10 "$durl")
    kill -TERM "$node_pid"
    stop_node
    if [ -n "$murl" ] && [ -n "$durl" ] && [ "${murl%/metrics}" != "${durl%/}" ] && [ "$mcode" = 200 ] &&
        grep -q "schednode dashboard" <<<"$dpage"; then
        pass "$name ($murl, $durl)"
    else
        fail "$name" "metrics '$murl' ($mcode), dashboard '$durl': $(grep -E 'metrics|dashboard' "$nlog")"
    fi
fi
name="--metrics and --dashboard at one fixed port: one server serves both"
nlog=$tmp/node-http1.log
# a port no socket has (/proc/net/tcp*), below the ephemeral range (as tests/lib.sh free_port)
hport=
while [ -z "$hport" ]; do
    hport=$((10000 + RANDOM % 20000))
    ! grep -q ":$(printf '%04X' "$hport") " /proc/net/tcp /proc/net/tcp6 2>/dev/null || hport=
done
if ! start_node "$nlog" --workers 1 --metrics "tcp://127.0.0.1:$hport" --dashboard "tcp://127.0.0.1:$hport"; then
    stop_node
    fail "$name" "the node did not come up: $(head -3 "$nlog")"
else
    mcode=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hport/metrics")
    kill -TERM "$node_pid"
    stop_node
    if [ "$mcode" = 200 ] && grep -q "dashboard on port $hport: .*as --metrics asks" "$nlog" &&
        ! grep -q " metrics on port" "$nlog"; then
        pass "$name"
    else
        fail "$name" "/metrics: $mcode; $(grep -E 'metrics|dashboard' "$nlog")"
    fi
fi

# An HTTP port already taken: the node does not start, exit 1 (as when
# its --listen port is taken), with or without --listen.
name="--metrics on a port in use: the node says so and exits 1"
nlog=$tmp/node-taken.log
if ! start_node "$nlog" --workers 1 --metrics "tcp://127.0.0.1:$hport"; then
    stop_node
    fail "$name" "the first node did not come up: $(head -3 "$nlog")"
else
    first=$node_pid
    run_brief --workers 1 --insecure --listen 'tcp://127.0.0.1:*' --metrics "tcp://127.0.0.1:$hport"
    check "$name (with --listen)" 1 err "--metrics: cannot serve HTTP on tcp://127.0.0.1:$hport"
    run_brief --workers 1 --metrics "tcp://127.0.0.1:$hport"
    check "$name (without --listen)" 1 err "--metrics: cannot serve HTTP"
    node_pid=$first
    kill -TERM "$node_pid"
    stop_node
fi

# The exit statuses: --help, README and the man page list the same codes,
# those node/cli.h defines (SN_EXIT_*: 1 to 5, 128 + SIGINT or SIGTERM)
# and 0.
codes() { grep -oE '\b(0|1|2|3|4|5|130|143)\b' | sort -nu | tr '\n' ' '; }
help_codes=$("$bin" --help | sed -n '/^Exit status/,$p' | grep -E '^  [0-9]' | cut -c1-20 | codes)
readme_codes=$(sed -n '/^Exit statuses/,/^###/p' "$src/README.md" | grep -E '^\| [0-9]' | cut -d'|' -f2 | codes)
man_codes=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$src/man/schednode.1" | grep -E '^\.B [0-9]' | codes)
if [ "$help_codes" = "0 1 2 3 4 5 130 143 " ] && [ "$readme_codes" = "$help_codes" ] && [ "$man_codes" = "$help_codes" ]; then
    pass "--help, README and the man page list the same exit statuses: $help_codes"
else
    fail "the exit statuses documented" "--help '$help_codes', README '$readme_codes', man '$man_codes'"
fi

# Every type of schednode-demo.so is documented: man/schednode.1's DEMO
# PLUGIN section and README's "The demo plugin" name each one.
name="every type of schednode-demo.so is in the man page (DEMO PLUGIN) and README"
nlog=$tmp/node-demo.log
if ! start_node "$nlog" --workers 1 --load "$demo"; then
    stop_node
    fail "$name" "the node did not come up: $(head -3 "$nlog")"
else
    run types --json --connect "$node_ep" --insecure
    kill -TERM "$node_pid"
    stop_node
    # (sn.*: every node's own types, as sn.names, the names registry: not the plugin's)
    types=$(jq -r '.nodes[].types[].name | select(startswith("sn.") | not)' "$out" 2>/dev/null)
    man_part=$(sed -n '/^\.SH DEMO PLUGIN/,/^\.SH /p' "$src/man/schednode.1")
    readme_part=$(sed -n '/^### The demo plugin/,/^### /p' "$src/README.md")
    undocumented=$(for t in $types; do
        grep -q "fB$t " <<<"$man_part" && grep -q "\`$t[ \`]" <<<"$readme_part" || echo "$t"
    done)
    if [ "$(wc -w <<<"$types")" -ge 12 ] && [ -z "$undocumented" ]; then
        pass "$name ($(wc -w <<<"$types") types)"
    else
        fail "$name" "types: $(echo $types); not in both: $(echo $undocumented)"
    fi
fi

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
