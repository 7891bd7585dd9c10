#!/usr/bin/env bash
# config.sh - configuration files: the example three-node cluster of
# cluster-config/ started from its files (on free ports, with keys from its
# make-keys.sh), flags overriding the file, and malformed or contradictory
# files refused with exit 2 and a message naming the file, line and key.
# Args: $1 schednode, $2 the source tree's cluster-config directory.
set -u
SN=$(realpath "$1") CC=$(realpath "$2")
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

# the example, copied, on free ports
cp -r "$CC/example-3" "$dir/ex"
declare -A port
for n in 1 2 3; do port[$n]=$(free_port); done
# (one pass, whole numbers: a new port such as 17102 is not taken for 7102)
sed -i -e "s/\b7101\b/${port[1]}/g" -e "s/\b7102\b/${port[2]}/g" -e "s/\b7103\b/${port[3]}/g" "$dir"/ex/*.cfg
bash "$dir/ex/make-keys.sh" "$SN" >/dev/null && ok "make-keys.sh writes the example's keys" || bad "make-keys.sh"
CLIENT=(--cert "$dir/ex/keys/client.cert" --authorized-keys "$dir/ex/keys/authorized")
call_flags=("${CLIENT[@]}") call_s=30 call_ms=5000

# node 1 is the first seed: with no other seed running it starts the cluster
(cd "$dir" && exec "$SN" --config ex/n1.cfg >"$dir/n1.log" 2>&1) &
pids+=($!); n1=$!
wait_for 100 grep -q "starting cluster 'example'" "$dir/n1.log" &&
  ok "the first seed, alone, starts the cluster" || bad "no start log"
grep -q "(schednode n1) .* node=1 listening" "$dir/n1.log" && ok "node/name and the id are in every log line" ||
  bad "name not logged: $(head -1 "$dir/n1.log")"
(cd "$dir" && exec "$SN" --config ex/n2.cfg --workers 1 >"$dir/n2.log" 2>&1) &
pids+=($!); n2=$!
(cd "$dir" && exec "$SN" --config ex/n3.cfg >"$dir/n3.log" 2>&1) &
pids+=($!); n3=$!
three_up() { [ "$(up_count 1)" = 3 ] && [ "$(up_count 2)" = 3 ] && [ "$(up_count 3)" = 3 ]; }
wait_for 150 three_up && ok "the example's three nodes form one cluster from their config files" ||
  bad "example cluster: $(status 1)"
workers_of() { status 1 | jq ".nodes[] | select(.id == $1) | .workers"; }
overridden() { [ "$(workers_of 2)" = 1 ] && [ "$(workers_of 3)" = 2 ]; } # (after a heartbeat)
wait_for 50 overridden && ok "a flag overrides the file (--workers 1 on node 2, the file's 2 on node 3)" ||
  bad "override: $(status 1)"
for p in $n1 $n2 $n3; do kill -TERM "$p"; done
rc=0
for p in $n1 $n2 $n3; do wait "$p" || rc=1; done
[ $rc -eq 0 ] && ok "the three stop on SIGTERM with exit 0" || bad "exit codes"

# bad files: exit 2, and the message names the file, the line and the key
refused() { # name expected-message-regex file-content
  printf '%s\n' "$3" >"$dir/$1.cfg"
  local out rc
  out=$(timeout 10 "$SN" --config "$dir/$1.cfg" 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$2" <<<"$out"; then ok "$1: exit 2, $(grep -o -- "$2" <<<"$out" | head -1)"
  else bad "$1: rc=$rc $out"; fi
}
refused unknown-key "$dir/unknown-key.cfg:3: node/wrokers: unknown key" 'node
    id = 1
    wrokers = 2'
refused bad-number "bad-number.cfg:2: node/workers: 'many' is not a number from 1 to 1024" 'node
    workers = many'
refused bad-endpoint "bad-endpoint.cfg:2: node/listen: '127.0.0.1:7000' is not tcp://HOST:PORT" 'node
    listen = "127.0.0.1:7000"'
refused unknown-section "unknown-section.cfg:3: nodes: unknown section" 'node
    id = 1
nodes
    id = 2'
refused twice "twice.cfg:3: node/id: given twice" 'node
    id = 1
    id = 2'
# ZPL syntax (config.c check_syntax): the line and what is wrong in our
# words, a pointer to the format's documentation, nothing from zconfig
# (it prints to stdout)
syntax() { # name expected-message-regex file-content
  printf '%s\n' "$3" >"$dir/$1.cfg"
  local out err rc
  out=$(timeout 10 "$SN" --config "$dir/$1.cfg" 2>"$dir/$1.err"); rc=$?
  err=$(cat "$dir/$1.err")
  if [ $rc -eq 2 ] && [ -z "$out" ] && grep -q -- "$2" <<<"$err" && ! grep -q "zconfig" <<<"$err" &&
    grep -q "man schednode (CONFIGURATION FILE), or cluster-config/README.md" <<<"$err"; then
    ok "$1: exit 2, $(grep -o -- "$2" <<<"$err" | head -1), the format's documentation named"
  else bad "$1: rc=$rc stdout '$out' stderr '$err'"; fi
}
syntax indent-2 "indent-2.cfg:3: indented by 2 spaces: ZPL indents in steps of 4 spaces" 'node
    id = 1
  listen = "tcp://127.0.0.1:1"'
syntax comment-indent "comment-indent.cfg:2: indented by 6 spaces" 'node
      # a comment
    id = 1'
syntax tab "tab.cfg:2: a tab: ZPL indents with spaces" "$(printf 'node\n\tid = 1')"
syntax too-deep "too-deep.cfg:2: 'id' is indented by 8 spaces, more than one step under the line above" 'node
        id = 1'
syntax no-equals "no-equals.cfg:2: '1' after the name: a key is NAME = VALUE" 'node
    id 1'
syntax open-quote "open-quote.cfg:2: the value opens with \" but does not close it" 'node
    name = "n1'
syntax after-quote "after-quote.cfg:2: 'x' after the quoted value" 'node
    name = "n1" x'
syntax not-a-name "not-a-name.cfg:1: '=node' is not a name" '=node'
# what passes the check, zconfig reads: comments, blank lines, CRLF, a
# quoted '#'
printf 'node  # the node\r\n    # its workers\r\n\r\n    workers = 1\r\ncluster\r\n    name = "c#1" # quoted\r\n' >"$dir/fine.cfg"
out=$(timeout 10 "$SN" --config "$dir/fine.cfg" frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown command 'frobnicate'" <<<"$out" &&
  ok "comments, blank lines, CRLF, a quoted '#': the file is read (then the command is refused)" ||
  bad "fine.cfg: rc=$rc $out"
refused contradiction "contradiction.cfg:6: security/insecure: insecure = true contradicts" 'node
    listen = "tcp://127.0.0.1:1"
security
    cert = "keys/n1.cert"
    authorized-keys = "keys/authorized"
    insecure = true'
refused half-keys "half-keys.cfg:2: security/cert: cert and authorized-keys go together" 'security
    cert = "x.cert"'
refused timeouts "timeouts.cfg:3: cluster/down-after-ms: 300 ms is under two heartbeats" 'cluster
    heartbeat-ms = 200
    down-after-ms = 300'
refused seed-no-listen "seed-no-listen.cfg:2: cluster/seed: joining needs node/listen" 'cluster
    seed = "tcp://127.0.0.1:1"'
refused twice-sections "twice-sections.cfg:5: node/id: given twice (first at line 2)" 'node
    id = 1
    workers = 2
node
    id = 2'
refused listen-port "listen-port.cfg:2: node/listen: 'tcp://127.0.0.1:99999' is not tcp://HOST:PORT: port 99999 is not from 1 to 65535" 'node
    listen = "tcp://127.0.0.1:99999"
security
    insecure = true'
refused seed-port "seed-port.cfg:4: cluster/seed: 'tcp://127.0.0.1:0' is not tcp://HOST:PORT: port 0 is not from 1 to 65535" 'node
    listen = "tcp://127.0.0.1:*"
cluster
    seed = "tcp://127.0.0.1:0"
security
    insecure = true'

# files that are no configuration: exit 2 at once, naming the file (a node
# that starts anyway runs until the 5 s timeout: status 124)
refused_path() { # name expected-message-regex path
  local out rc
  out=$(timeout 5 "$SN" --config "$3" 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$2" <<<"$out"; then ok "$1: exit 2, $(grep -o -- "$2" <<<"$out" | head -1)"
  else bad "$1: rc=$rc $out"; fi
}
mkdir "$dir/adir"
refused_path directory "adir: a directory, not a configuration file" "$dir/adir"
refused_path proc-mem "/proc/self/mem: cannot read: Input/output error" /proc/self/mem
refused_path device "/dev/zero: a device, FIFO or socket, not a configuration file" /dev/zero
mkfifo "$dir/fifo" && refused_path fifo "fifo: a device, FIFO or socket" "$dir/fifo"
{ printf 'node\n    id = 1\n'; head -c 1100000 /dev/zero | tr '\0' '#'; } >"$dir/huge.cfg"
refused_path huge "huge.cfg: over 1048576 bytes: too large" "$dir/huge.cfg"
{ printf 'node\n    name = "'; head -c 1100 /dev/zero | tr '\0' 'a'; printf '"\n'; } >"$dir/long-line.cfg"
refused_path long-line "long-line.cfg:2: a line of 1113 bytes, over the 1024" "$dir/long-line.cfg"
printf 'node\n    id = 1\0 2\n' >"$dir/nul-bare.cfg"
refused_path nul-bare "nul-bare.cfg:2: node/id: a NUL byte in the value" "$dir/nul-bare.cfg"
printf 'node\n    workers = 1\n    name = "n\0x"\n' >"$dir/nul-quoted.cfg"
refused_path nul-quoted "nul-quoted.cfg:3: node/name: a NUL byte in the value" "$dir/nul-quoted.cfg"
printf 'node\n    id = 1\n    listen = "tcp://127.0.0.1:7000"\n' >"$dir/unreadable.cfg"
chmod 000 "$dir/unreadable.cfg"
if cat "$dir/unreadable.cfg" >/dev/null 2>&1; then
  echo "skip unreadable: this user reads a mode-000 file (root)"
else
  refused_path unreadable "unreadable.cfg: cannot read: Permission denied" "$dir/unreadable.cfg"
fi
out=$(timeout 10 "$SN" --config "$dir/missing.cfg" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "missing.cfg: cannot read" <<<"$out" && ok "a missing file: exit 2" || bad "missing: $rc $out"
# a file that is fine on its own but contradicts a flag
printf 'security\n    insecure = true\n' >"$dir/plain.cfg"
out=$(timeout 10 "$SN" --config "$dir/plain.cfg" --cert "$dir/ex/keys/n1.cert" --listen "tcp://127.0.0.1:$(free_port)" 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "go together" <<<"$out" && ok "--cert over a file's insecure = true still needs the keys dir" ||
  bad "flag over file: $rc $out"

if [ "$fail" -ne 0 ]; then for n in 1 2 3; do echo "--- n$n"; tail -5 "$dir/n$n.log"; done; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
