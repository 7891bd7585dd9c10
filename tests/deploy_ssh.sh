#!/usr/bin/env bash
# deploy_ssh.sh - deploy/ssh-cluster.sh. Without hosts: --dry-run of every
# subcommand on a three-host file (ssh and scp targets, seeds started first,
# the unit and the configs it writes, keys made), bad hosts files refused
# with exit 2 and their line number, --help. As root with working network
# namespaces, also a live run: namespaces from netns-cluster.sh, then
# deploy (with README's counter as a plugin, run on every host), status,
# upgrade, stop with --transport netns --service plain; and a deploy to hosts
# without the runtime libraries (--chroot into a bare Debian root: skipped,
# saying why, where there is none or its package repository cannot be made).
# Exits 77 (skipped) after the dry runs where the live runs cannot run.
# Args: $1 schednode.
# shellcheck disable=SC2015 # CHECK && ok || bad: ok always succeeds
set -u
SN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # absolute: it is linked and run from elsewhere
DEMO=$(dirname "$SN")/schednode-demo.so # the demo and test types (xsource, xsink): a plugin
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/.." && pwd)
SC=$top/deploy/ssh-cluster.sh
NC=$top/deploy/netns-cluster.sh

# --- a three-host file: two seeds, node 2 first; host 2 on another ssh
# port and user; host 3 with ssh's defaults and a wildcard listen
cat >"$dir/hosts" <<'EOF'
# test cluster
cluster drytest
seeds 2 1
set node/workers 3

1 h1.example tcp://10.9.0.1:7100 root
2 h2.example tcp://10.9.0.2:7100 deploy 2222   # a comment after a node
3 h3.example tcp://*:7101
EOF
: >"$dir/fake.so"
stage=$dir/stage
dry() { "$SC" "$@" "$dir/hosts" --dry-run --bin "$SN" --staging "$stage"; }

out=$(dry deploy --plugin "$dir/fake.so" 2>&1); rc=$?
echo "$out" >"$dir/deploy.dry"
[ $rc -eq 0 ] && ok "deploy --dry-run exits 0" || bad "deploy --dry-run: rc=$rc $out"
! grep -qv '^+ ' <<<"$out" && ok "every line of the dry run is a '+ ' command" ||
  bad "other lines: $(grep -v '^+ ' <<<"$out" | head -3)"
[ ! -e "$stage" ] && ok "a dry run runs nothing (no staging directory)" || bad "the dry run made $stage"

# reachability first, on each host's ssh port and user
first=$(grep -n '' <<<"$out" | grep -m1 -v ' true$' | cut -d: -f1)
grep -q -- "^+ ssh .* -p 22 root@h1.example true$" <<<"$out" &&
  grep -q -- "^+ ssh .* -p 2222 deploy@h2.example true$" <<<"$out" &&
  grep -q -- "^+ ssh .* -p 22 h3.example true$" <<<"$out" && [ "$first" = 4 ] &&
  ok "every host is checked first (ssh HOST true), with its user and port" || bad "reachability checks: $(head -4 <<<"$out")"
grep -q -- "-o BatchMode=yes" <<<"$out" && grep -q -- "-o ConnectTimeout=" <<<"$out" &&
  ok "ssh never prompts and gives up on a silent host" || bad "ssh options"

# keys: one per node with the endpoint others dial, one client key
grep -qxF "+ $SN keygen $stage/keys --name n1 --endpoint tcp://10.9.0.1:7100 --node-id 1" <<<"$out" &&
  grep -q "keygen $stage/keys --name n2 --endpoint tcp://10.9.0.2:7100 --node-id 2$" <<<"$out" &&
  grep -q "keygen $stage/keys --name n3 --endpoint tcp://h3.example:7101 --node-id 3$" <<<"$out" &&
  grep -q "keygen $stage/keys --name client$" <<<"$out" &&
  ok "keygen for n1, n2, n3 with their ids (wildcard listen: the host's name) and the client" ||
  bad "keygen: $(grep keygen <<<"$out")"
# the runtime packages on every host, before its binary (which runs there at once)
for h in root@h1.example deploy@h2.example h3.example; do
  d=$(grep -n "^+ ssh .* $h '.*libczmq4 libzmq5 libsodium23 libprotobuf-c1 libjson-c5 libmicrohttpd12; do dpkg-query -W.*apt-get install -y" <<<"$out" | head -1 | cut -d: -f1)
  b=$(grep -n "^+ ssh .* $h '.*install -m 0755 " <<<"$out" | head -1 | cut -d: -f1)
  [ -n "$d" ] && [ -n "$b" ] && [ "$d" -lt "$b" ] || { bad "runtime packages on $h: deps line '$d', binary line '$b'"; continue; }
  [ $h = h3.example ] && ok "every host gets the missing runtime packages (apt-get) before the binary"
done
out2=$(dry deploy --no-deps 2>&1)
! grep -q "apt-get" <<<"$out2" && ok "--no-deps: no apt-get" || bad "--no-deps: $(grep apt-get <<<"$out2" | head -1)"
out2=$(dry deploy --packages "libfoo1 libbar2" 2>&1)
[ "$(grep -c "for p in libfoo1 libbar2; do" <<<"$out2")" = 3 ] && ok "--packages replaces the list" ||
  bad "--packages: $(grep -c "libfoo1" <<<"$out2")"
out2=$(dry deploy --packages 'x;rm' 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "bad --packages" <<<"$out2" && ok "--packages with a shell character: exit 2" ||
  bad "--packages x;rm: rc=$rc $out2"
grep -q "^+ cp $stage/keys/n1.cert $stage/keys/n2.cert $stage/keys/n3.cert $stage/keys/client.cert $stage/keys/authorized/$" <<<"$out" &&
  ok "authorized/ gets the three node certs and the client's" || bad "authorized: $(grep authorized/ <<<"$out" | head -2)"

# the dry run is a script: its mkdir and printf lines write the configs and the unit
while IFS= read -r line; do
  case $line in "+ mkdir "* | "+ printf "*) eval "${line#+ }" || bad "eval: $line" ;; esac
done <<<"$out"
cfg() { cat "$stage/etc/n$1.cfg" 2>/dev/null; }
c1=$(cfg 1) c3=$(cfg 3)
grep -qx "    id = 1" <<<"$c1" && grep -qx '    listen = "tcp://10.9.0.1:7100"' <<<"$c1" &&
  grep -qx '    name = "drytest"' <<<"$c1" && grep -qx "    workers = 3" <<<"$c1" &&
  grep -qx '    plugin = "../plugins/fake.so"' <<<"$c1" && grep -qx '    cert = "../keys/n1.cert"' <<<"$c1" &&
  grep -qx '    authorized-keys = "../keys/authorized"' <<<"$c1" &&
  ok "n1.cfg: id, listen, cluster name, workers, plugin, keys" || bad "n1.cfg: $c1"
[ "$(grep seed <<<"$c1" | tr -d ' ')" = "$(printf 'seed="tcp://10.9.0.2:7100"\nseed="tcp://10.9.0.1:7100"')" ] &&
  [ "$(grep seed <<<"$c3")" = "$(grep seed <<<"$c1")" ] && ok "every config lists the seeds 2, 1 in that order" ||
  bad "seeds: $(grep seed <<<"$c1")"
grep -qx "    id = 3" <<<"$c3" && grep -qx '    listen = "tcp://\*:7101"' <<<"$c3" &&
  grep -qx '    advertise = "tcp://h3.example:7101"' <<<"$c3" && grep -qx "    id = 2" <<<"$(cfg 2)" &&
  ok "n3.cfg: a wildcard listen advertises the host" || bad "n3.cfg: $c3"
! grep -q advertise <<<"$c1" && ok "no advertise where listen is dialable" || bad "n1 advertise"
[ "$(awk '/^[a-z]/' "$stage/etc/n2.cfg" | tr '\n' ' ')" = "node cluster security " ] &&
  ok "configs have the sections node, cluster, security" || bad "sections: $(cfg 2)"
u=$(cat "$stage/schednode@.service" 2>/dev/null)
grep -qx "ExecStart=/opt/schednode/bin/schednode --config /opt/schednode/etc/%i.cfg" <<<"$u" &&
  grep -qx "User=schednode" <<<"$u" && grep -qx "KillSignal=SIGTERM" <<<"$u" &&
  grep -qx "WantedBy=multi-user.target" <<<"$u" && ! grep -q "@ROOT@\|@USER@" <<<"$u" &&
  ok "the unit: ExecStart with the instance's config, the user, SIGTERM, no placeholders left" || bad "unit: $u"
# systemd's own check, with an install directory where the binary exists
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$dir/r/bin" "$dir/st2" && ln -s "$SN" "$dir/r/bin/schednode"
  line=$("$SC" deploy "$dir/hosts" --dry-run --bin "$SN" --staging "$dir/st2" --root "$dir/r" | grep "^+ printf .*service$")
  eval "${line#+ }"
  cp "$dir/st2/schednode@.service" "$dir/schednode@n1.service"
  v=$(systemd-analyze verify "$dir/schednode@n1.service" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -z "$v" ] && ok "systemd-analyze verify: the rendered unit is valid" || bad "systemd-analyze: $rc $v"
fi

# copies: each host gets its own secret only, everybody's public certs
l1=$(grep "^+ scp .*root@h1.example:.schednode-stage/$" <<<"$out" | grep "n1.cfg")
grep -q "$stage/keys/n1.cert_secret" <<<"$l1" && ! grep -q "n2.cert_secret\|n3.cert_secret" <<<"$l1" &&
  ok "scp to h1: its config and secret, no other node's secret" || bad "scp to h1: $l1"
grep -q "^+ scp .* -P 2222 .*$stage/etc/n2.cfg .*deploy@h2.example:.schednode-stage/$" <<<"$out" &&
  grep -q "^+ scp .* -P 2222 $SN $dir/fake.so deploy@h2.example:.schednode-stage/$" <<<"$out" &&
  ok "scp to h2 on port 2222 as deploy: binary, plugin, config" || bad "scp to h2: $(grep 'scp.*h2' <<<"$out")"
grep -q "^+ scp .* h3.example:.schednode-stage/authorized/$" <<<"$out" && ok "scp of authorized/ to h3 (ssh's default user)" ||
  bad "scp to h3"
grep -q "install -m 0755 .schednode-stage/$(basename "$SN") /opt/schednode/bin/schednode.new && mv -f /opt/schednode/bin/schednode.new /opt/schednode/bin/schednode" <<<"$out" &&
  ok "the binary is installed under a new name and renamed into place" || bad "binary install"
grep -q "install -m 0600 .schednode-stage/n2.cert_secret /opt/schednode/keys/ && chown schednode /opt/schednode/keys/n2.cert_secret" <<<"$out" &&
  ok "a node's secret: mode 0600, owned by the service user" || bad "secret install"
grep -q "^+ ssh .*root@h1.example 'install -m 0644 .schednode-stage/schednode@.service /etc/systemd/system/schednode@.service && systemctl daemon-reload'$" <<<"$out" &&
  ok "the unit goes to /etc/systemd/system, then daemon-reload" || bad "unit install"

# start order: seeds 2 and 1 first (2 alone until it answers), then 3; all after every install
starts=$(grep -o "systemctl enable schednode@n[0-9].service && systemctl start schednode@n[0-9].service" <<<"$out" |
  sed 's/.*start schednode@\(n[0-9]\).*/\1/' | tr '\n' ' ')
[ "$starts" = "n2 n1 n3 " ] && ok "systemctl enable + start: n2, n1 (the seeds), then n3" || bad "start order: $starts"
last_install=$(grep -n "daemon-reload" <<<"$out" | tail -1 | cut -d: -f1)
first_start=$(grep -n "systemctl start" <<<"$out" | head -1 | cut -d: -f1)
[ "$last_install" -lt "$first_start" ] && ok "nodes start once every host is installed" || bad "start before install"
after_n2=$(sed -n "$((first_start + 1))p" <<<"$out")
grep -q "deploy@h2.example '/opt/schednode/bin/schednode status --connect tcp://10.9.0.2:7100 --cert /opt/schednode/keys/client.cert" <<<"$after_n2" &&
  ok "the first seed is asked for its status before the others start" || bad "after n2: $after_n2"
[ "$(grep -c "status --connect" <<<"$out")" = 4 ] && ok "then every node is asked (4 status commands)" ||
  bad "status commands: $(grep -c "status --connect" <<<"$out")"

# the other subcommands
out=$(dry start 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -o "systemctl start schednode@n[0-9]" <<<"$out" | tr '\n' ' ')" = "systemctl start schednode@n2 systemctl start schednode@n1 systemctl start schednode@n3 " ] &&
  ! grep -q "scp\|keygen" <<<"$out" && ok "start: n2, n1, n3 and nothing copied" || bad "start: rc=$rc $out"
out=$(dry stop 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -o "systemctl stop schednode@n[0-9]" <<<"$out" | tr '\n' ' ')" = "systemctl stop schednode@n3 systemctl stop schednode@n1 systemctl stop schednode@n2 " ] &&
  ok "stop: n3 first, the seeds last (n1, n2)" || bad "stop: rc=$rc $out"
out=$(dry restart 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -o "systemctl restart schednode@n[0-9]" <<<"$out" | tr '\n' ' ')" = "systemctl restart schednode@n3 systemctl restart schednode@n1 systemctl restart schednode@n2 " ] &&
  ok "restart: one at a time, n3, then n1, the first seed (n2) last" || bad "restart: rc=$rc $out"
r3=$(grep -n "restart schednode@n3" <<<"$out" | cut -d: -f1)
r1=$(grep -n "restart schednode@n1" <<<"$out" | cut -d: -f1)
[ "$(sed -n "$((r3 + 1)),$((r1 - 1))p" <<<"$out" | grep -c "status --connect")" = 3 ] &&
  ok "restart: every node's status is checked before the next restart" || bad "restart waits: $out"
out=$(dry upgrade --plugin "$dir/fake.so" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "^+ scp .* $SN $dir/fake.so .*:.schednode-stage/$" <<<"$out")" = 3 ] &&
  ! grep -q "keygen\|cert_secret\|\.cfg" <<<"$out" &&
  [ "$(grep -o "systemctl restart schednode@n[0-9]" <<<"$out" | tr '\n' ' ')" = "systemctl restart schednode@n3 systemctl restart schednode@n1 systemctl restart schednode@n2 " ] &&
  grep -q "install -m 0644 .schednode-stage/fake.so /opt/schednode/plugins/fake.so.new && mv -f" <<<"$out" &&
  ok "upgrade: binary and plugin to three hosts, no keys or configs, then a rolling restart" || bad "upgrade: rc=$rc $out"
[ "$(grep -n "scp" <<<"$out" | tail -1 | cut -d: -f1)" -lt "$(grep -n "systemctl restart" <<<"$out" | head -1 | cut -d: -f1)" ] &&
  ok "upgrade: every host has the new binary before the first restart" || bad "upgrade order"
out=$(dry status 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^+ ssh .*root@h1.example '/opt/schednode/bin/schednode status --connect tcp://10.9.0.1:7100" <<<"$out" &&
  ok "status: asks node 1 on its host" || bad "status: rc=$rc $out"
out=$(dry stop --sudo --root /srv/sn 2>&1)
grep -q "^+ ssh .*root@h1.example 'sudo -n sh -c '\\\\''systemctl stop schednode@n1.service'\\\\'''$" <<<"$out" &&
  ok "--sudo wraps remote commands in sudo -n sh -c" || bad "sudo: $out"
out=$(dry stop --service plain 2>&1)
grep -q "kill -TERM" <<<"$out" && grep -q "run/n1.pid" <<<"$out" && ! grep -q systemctl <<<"$out" &&
  ok "--service plain: SIGTERM through the pidfile, no systemctl" || bad "plain stop: $out"
out=$(dry deploy --service plain 2>&1)
grep -q "setsid nohup bin/schednode --config etc/n2.cfg </dev/null >>log/n2.log 2>&1 & echo \$! >run/n2.pid" <<<"$out" &&
  ! grep -q "systemctl\|useradd\|schednode@.service" <<<"$out" && ok "--service plain: setsid/nohup, a pidfile and a log, no unit" ||
  bad "plain deploy: $(grep setsid <<<"$out")"
out=$(dry deploy --transport netns --service plain --root /x 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^+ ip netns exec h1.example true$" <<<"$out" &&
  grep -q "^+ cp $SN /x/h2.example/.stage/$" <<<"$out" && grep -q "^+ ip netns exec h3.example sh -c " <<<"$out" &&
  ! grep -q "^+ ssh\|^+ scp" <<<"$out" && ok "--transport netns: ip netns exec and cp, one install directory per host" ||
  bad "netns dry run: rc=$rc $(head -5 <<<"$out")"
out=$("$SC" deploy "$dir/hosts" --dry-run --transport netns --bin "$SN" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "needs --service plain" <<<"$out" && ok "--transport netns with systemd: refused, exit 2" || bad "netns+systemd: $rc $out"

# --help, for the script and every subcommand
out=$("$SC" --help 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^usage:" <<<"$out" && grep -q -- "--dry-run" <<<"$out" && ok "--help" || bad "--help: $rc"
for s in deploy start stop restart upgrade status; do
  out=$("$SC" "$s" --help 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "usage: ssh-cluster.sh $s" <<<"$out" || { bad "$s --help: rc=$rc $out"; continue; }
  [ "$s" = status ] && ok "--help of every subcommand"
done
out=$("$SC" frobnicate "$dir/hosts" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown subcommand" <<<"$out" && ok "an unknown subcommand: exit 2" || bad "unknown: $rc $out"
out=$("$SC" deploy "$dir/hosts" --frob 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown option '--frob'" <<<"$out" && ok "an unknown option: exit 2" || bad "option: $rc $out"

# --- bad hosts files: exit 2, the file and the line
badfile() { # LINE-NUMBER EXPECTED-TEXT CONTENT: the file is refused at that line
  local want=$1 text=$2 out rc
  printf '%s\n' "$3" >"$dir/bad"
  out=$("$SC" deploy "$dir/bad" --dry-run --bin "$SN" 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q "bad:$want: .*$text" <<<"$out"; then return 0; fi
  echo "     got rc=$rc: $out"; return 1
}
ok3='1 a tcp://10.0.0.1:1'
badfile 2 "a node line is: ID HOST LISTEN" "$ok3
2 b" && ok "a node line with two fields: line 2" || bad "short line"
badfile 3 "a node line is" "# comment

3 c tcp://10.0.0.3:1 u 22 extra" && ok "a node line with six fields: line 3" || bad "long line"
badfile 2 "bad node id '0'" "$ok3
0 b tcp://10.0.0.2:1" && ok "node id 0: line 2" || bad "id 0"
badfile 2 "bad node id '4294967296'" "$ok3
4294967296 b tcp://10.0.0.2:1" && ok "node id past 32 bits: line 2" || bad "id too big"
badfile 3 "node id 1 is already on line 1" "$ok3
2 b tcp://10.0.0.2:1
1 c tcp://10.0.0.3:1" && ok "a duplicate node id: line 3, naming line 1" || bad "dup id"
badfile 2 "bad listen endpoint '10.0.0.2:7100'" "$ok3
2 b 10.0.0.2:7100" && ok "an endpoint without tcp://: line 2" || bad "endpoint"
badfile 2 "bad port" "$ok3
2 b tcp://10.0.0.2:70000" && ok "port 70000: line 2" || bad "port"
badfile 2 "endpoint tcp://10.0.0.1:1 is already on line 1" "$ok3
2 b tcp://10.0.0.1:1" && ok "two nodes on one endpoint: line 2" || bad "dup endpoint"
badfile 2 "bad ssh port 'ssh'" "$ok3
2 b tcp://10.0.0.2:1 u ssh" && ok "a bad ssh port: line 2" || bad "ssh port"
badfile 2 "host a has user/port" "$ok3
2 a tcp://10.0.0.1:2 other" && ok "one host with two users: line 2" || bad "host users"
badfile 1 "'clutser' is neither a node line" "clutser x
$ok3" && ok "an unknown statement: line 1" || bad "unknown statement"
badfile 2 "seed 7 is not a node of this file" "$ok3
seeds 1 7" && ok "a seed that is no node: the seeds line" || bad "seeds"
badfile 2 "set: 'node/id' is not one of" "$ok3
set node/id 5" && ok "set of a key the script writes itself: line 2" || bad "set"
badfile 3 "a second 'cluster' line" "cluster a
$ok3
cluster b" && ok "two cluster lines: line 3" || bad "cluster twice"
printf '# nothing\n\n' >"$dir/empty"
out=$("$SC" deploy "$dir/empty" --dry-run --bin "$SN" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no node lines" <<<"$out" && ok "a file without nodes: exit 2" || bad "empty: $rc $out"
out=$("$SC" deploy "$dir/nonexistent" --dry-run --bin "$SN" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no hosts file" <<<"$out" && ok "no hosts file: exit 2" || bad "no file: $rc $out"
out=$("$SC" deploy "$dir/hosts" --dry-run --bin "$dir/no-such-binary" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no schednode binary at '$dir/no-such-binary'" <<<"$out" && ok "a missing binary: exit 2" ||
  bad "binary: $rc $out"
out=$("$SC" deploy "$dir/hosts" --dry-run --bin "$SN" --plugin "$dir/none.so" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no plugin file" <<<"$out" && ok "a missing plugin: exit 2" || bad "plugin: $rc $out"
# a host nobody answers on: ssh for real, to a closed port on this machine
printf '1 127.0.0.1 tcp://127.0.0.1:7100 - %s\n' "$(free_port)" >"$dir/closed"
out=$(timeout 60 "$SC" deploy "$dir/closed" --bin "$SN" --staging "$dir/closed.d" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "closed:1: host 127.0.0.1 is unreachable (ssh)" <<<"$out" && [ ! -e "$dir/closed.d" ] &&
  ok "an unreachable host: exit 2 with its line, before anything is made" || bad "unreachable: $rc $out"

# --- live: namespaces instead of hosts, plain processes instead of systemd
live() {
  netns_ok || { echo "SKIP live deploy: $netns_why"; live_skipped=1; return; }
  P="d$$s"
  trap '"$NC" down --dir "$dir/ns" >/dev/null 2>&1; cleanup' EXIT
  out=$("$NC" up 3 --no-nodes --prefix "$P" --dir "$dir/ns" 2>&1) ||
    { bad "netns-cluster.sh up 3 --no-nodes: $out"; return; }
  declare -A a
  for i in 1 2 3; do a[$i]=$("$NC" addr "$i" --dir "$dir/ns"); done
  { echo "cluster live$$"; echo "seeds 1 2"; echo "set node/workers 2"
    for i in 1 2 3; do echo "$i $P$i tcp://${a[$i]}:7300"; done; } >"$dir/live"
  O=(--transport netns --service plain --root "$dir/inst" --staging "$dir/live.d" --wait 120)
  # a plugin as a user builds it: README's counter, against the header only
  awk '/^## Writing a process type/ {f = 1} f && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' "$top/README.md" \
    >"$dir/counter.c"
  cc -Wall -Wextra -Werror -I"$top/include" -fPIC -shared "$dir/counter.c" -o "$dir/counter.so" 2>&1 ||
    { bad "README's counter does not build"; return; }
  t0=$SECONDS
  out=$("$SC" deploy "$dir/live" "${O[@]}" --bin "$SN" --plugin "$dir/counter.so" --plugin "$DEMO" 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "deployed: 3 nodes up" <<<"$out" && ok "live deploy into 3 namespaces ($((SECONDS - t0)) s)" ||
    { bad "live deploy: rc=$rc $out"; for i in 1 2 3; do tail -5 "$dir/inst/$P$i/log/n$i.log"; done; return; }
  CL=(--cert "$dir/live.d/keys/client.cert" --authorized-keys "$dir/live.d/keys/authorized" --timeout 10000)
  ups() { timeout 30 "$SN" status --json --connect "tcp://${a[$1]}:7300" "${CL[@]}" 2>/dev/null |
    jq -c '[.nodes[] | select(.state == "up") | .id] | sort'; }
  all3() { for i in 1 2 3; do [ "$(ups "$i")" = "[1,2,3]" ] || return 1; done; }
  st=$("$SC" status "$dir/live" "${O[@]}" --json 2>&1)
  [ "$(jq -c '[.nodes[] | select(.state == "up")] | length' <<<"$st" 2>/dev/null)" = 3 ] &&
    ok "ssh-cluster.sh status --json: 3 nodes up" || bad "status --json: $st"
  wait_for 300 all3 && ok "every node sees nodes 1, 2, 3 up" || bad "views: $(ups 1) $(ups 2) $(ups 3)"
  good=1
  for i in 1 2 3; do
    [ -f "$dir/inst/$P$i/etc/n$i.cfg" ] && [ "$(stat -c %a "$dir/inst/$P$i/keys/n$i.cert_secret")" = 600 ] &&
      [ ! -e "$dir/inst/$P$i/keys/n$((i % 3 + 1)).cert_secret" ] && [ ! -e "$dir/inst/$P$i/.stage" ] || good=0
  done
  [ $good = 1 ] && ok "each host: its config, its secret (0600) and no other node's; the stage removed" ||
    bad "install: $(ls -R "$dir/inst")"
  sink=$(timeout 30 "$SN" spawn --connect "tcp://${a[3]}:7300" "${CL[@]}" xsink collect 100 2>&1)
  out=$(timeout 30 "$SN" call --connect "tcp://${a[1]}:7300" "${CL[@]}" xsource blast "$sink 100" 2>&1)
  [ "$out" = "100 messages in order" ] && ok "the deployed cluster works: 100 messages node 1 -> node 3" || bad "1 -> 3: $out"
  # the plugin on every host: a counter there, a message to it from the
  # next node, its echo back
  good=1
  for i in 1 2 3; do
    j=$((i % 3 + 1))
    pid=$(timeout 30 "$SN" spawn --connect "tcp://${a[$i]}:7300" "${CL[@]}" counter count 2>&1)
    out=$(timeout 30 "$SN" call --connect "tcp://${a[$j]}:7300" "${CL[@]}" xsource blast "$pid 1" 2>&1)
    [ "${pid%%.*}" = "$i" ] && [ "$out" = 0 ] || { good=0; bad "counter on node $i: spawn '$pid', echo to node $j '$out'"; }
    grep -q "loaded plugin .*/plugins/counter.so$" "$dir/inst/$P$i/log/n$i.log" ||
      { good=0; bad "node $i did not log loading counter.so"; }
  done
  [ $good = 1 ] && ok "the deployed plugin (README's counter) runs on every host: spawned there, echoing a message from the next"

  declare -A pid1
  for i in 1 2 3; do pid1[$i]=$(cat "$dir/inst/$P$i/run/n$i.pid"); done
  cert1=$(md5sum <"$dir/live.d/keys/n1.cert")
  out=$("$SC" deploy "$dir/live" "${O[@]}" --bin "$SN" --plugin "$dir/counter.so" --plugin "$DEMO" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$(md5sum <"$dir/live.d/keys/n1.cert")" = "$cert1" ] && [ "$(grep -c "already runs" <<<"$out")" = 3 ] &&
    ok "deploy again: keys kept, running nodes left alone" || bad "redeploy: rc=$rc $out"
  cp "$SN" "$dir/schednode-v2"
  t0=$SECONDS
  out=$("$SC" upgrade "$dir/live" "${O[@]}" --bin "$dir/schednode-v2" --plugin "$dir/counter.so" 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "upgraded: 3 nodes up" <<<"$out" && ok "upgrade: rolling restart done ($((SECONDS - t0)) s)" ||
    bad "upgrade: rc=$rc $out"
  [ "$(grep -o "restarting node [0-9]*" <<<"$out" | awk '{print $3}' | tr '\n' ' ')" = "3 2 1 " ] &&
    ok "upgrade restarts node 3, then the seeds 2 and 1" || bad "upgrade order: $out"
  good=1
  for i in 1 2 3; do
    p=$(cat "$dir/inst/$P$i/run/n$i.pid" 2>/dev/null)
    [ -n "$p" ] && [ "$p" != "${pid1[$i]}" ] && cmp -s "$dir/schednode-v2" "$dir/inst/$P$i/bin/schednode" || good=0
  done
  [ $good = 1 ] && ok "every node runs again under a new pid, the new binary installed" || bad "not all upgraded"
  all3 && ok "after the upgrade every node sees 1, 2, 3 up" || bad "after upgrade: $(ups 1) $(ups 2) $(ups 3)"

  out=$("$SC" stop "$dir/live" "${O[@]}" 2>&1); rc=$?
  left=$(for i in 1 2 3; do ip netns pids "$P$i"; done)
  [ $rc -eq 0 ] && [ -z "$left" ] && [ -z "$(find "$dir/inst" -name '*.pid')" ] && ok "stop: no node left, pidfiles gone" ||
    bad "stop: rc=$rc left=$left $out"
  grep -q "left the cluster" "$dir/inst/${P}1/log/n1.log" && ok "stopped nodes left the cluster (SIGTERM)" ||
    bad "no leave in node 1's log"
  out=$("$SC" stop "$dir/live" "${O[@]}" 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "stop again: nothing to do, exit 0" || bad "stop twice: rc=$rc $out"
  out=$("$SC" status "$dir/live" "${O[@]}" --wait 5 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "no node answered" <<<"$out" && ok "status of a stopped cluster: exit 1" || bad "status: $rc $out"
  out=$("$NC" down --dir "$dir/ns" 2>&1); rc=$?
  [ $rc -eq 0 ] && ! ip netns list | grep -q "^${P}[0-9]" && ok "namespaces torn down" || bad "down: $rc $out"
}
# --- live, hosts without the runtime libraries: the same namespaces, each
# host's commands in a bare Debian 12 root (chroot: debootstrap --variant=
# minbase, SN_BARE_ROOT_TAR, as scripts' fresh-debian tool makes), whose apt
# mirror is a local repository of the runtime packages and what they need
# (apt-get download here). ssh-cluster.sh must install them to run a node.
bare() {
  local tar=${SN_BARE_ROOT_TAR:-/var/tmp/fresh-bookworm.base.tar} pk out rc i j pid
  CH=$dir/bare # (global: the exit trap unmounts its /proc)
  [ "$live_skipped" = 0 ] || return
  [ -f "$tar" ] || { echo "SKIP hosts without the runtime libraries: no bare Debian root at $tar (SN_BARE_ROOT_TAR)"; return; }
  [ -z "${SN_SANITIZE:-}" ] ||
    { echo "SKIP hosts without the runtime libraries: a sanitizer build needs its runtime there too"; return; }
  mkdir -p "$CH" && tar -C "$CH" -xf "$tar" || { bad "cannot unpack $tar"; return; }
  pk=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances libczmq4 libzmq5 libsodium23 libprotobuf-c1 libjson-c5 libmicrohttpd12 2>/dev/null | grep '^[a-z]' | sort -u)
  mkdir -p "$CH/var/local-repo"
  # shellcheck disable=SC2086 # $pk: words
  if ! (cd "$CH/var/local-repo" && apt-get download $pk && dpkg-scanpackages . /dev/null >Packages) >"$dir/repo.log" 2>&1; then
    echo "SKIP hosts without the runtime libraries: cannot make their package repository: $(tail -1 "$dir/repo.log")"
    return
  fi
  rm -f "$CH"/etc/apt/sources.list "$CH"/etc/apt/sources.list.d/*
  echo "deb [trusted=yes] file:/var/local-repo ./" >"$CH/etc/apt/sources.list.d/local.list"
  mount -t proc proc "$CH/proc" || { bad "cannot mount /proc in the bare root"; return; }
  # never remove the bare root while /proc is mounted in it
  trap '"$NC" down --dir "$dir/ns" >/dev/null 2>&1; "$NC" down --dir "$dir/bns" >/dev/null 2>&1
        umount "$CH/proc" 2>/dev/null || umount -l "$CH/proc"
        grep -q " $CH/" /proc/mounts && dir=/nonexistent; cleanup' EXIT
  cp "$SN" "$CH/tmp/sn"
  out=$(chroot "$CH" /tmp/sn --version 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q "error while loading shared libraries" <<<"$out" &&
    ! chroot "$CH" dpkg-query -W -f='${Status}' libczmq4 2>/dev/null | grep -q "install ok" &&
    ok "the bare root lacks the runtime libraries: schednode does not start there ($(cut -c1-60 <<<"$out")...)" ||
    bad "bare root: rc=$rc $out"
  rm -f "$CH/tmp/sn"
  local B="b$$s"
  out=$("$NC" up 3 --no-nodes --prefix "$B" --dir "$dir/bns" 2>&1) || { bad "netns up for the bare hosts: $out"; return; }
  declare -A a
  for i in 1 2 3; do a[$i]=$("$NC" addr "$i" --dir "$dir/bns"); done
  { echo "cluster bare$$"; echo "seeds 1 2"; echo "set node/workers 1"
    for i in 1 2 3; do echo "$i $B$i tcp://${a[$i]}:7400"; done; } >"$dir/bare.hosts"
  local O=(--transport netns --service plain --chroot "$CH" --root /opt/schednode --staging "$dir/bare.d" --wait 120)
  out=$("$SC" deploy "$dir/bare.hosts" "${O[@]}" --bin "$SN" --plugin "$dir/counter.so" --plugin "$DEMO" 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "deployed: 3 nodes up" <<<"$out" && grep -q "^installing libczmq4 libzmq5 libsodium23 libprotobuf-c1 libjson-c5 libmicrohttpd12$" <<<"$out" &&
    ok "deploy to hosts without the runtime libraries: installed with apt-get, 3 nodes up" ||
    { bad "bare deploy: rc=$rc $(tail -5 <<<"$out")"; return; }
  [ "$(chroot "$CH" dpkg-query -W -f='${Status}\n' libczmq4 libzmq5 libsodium23 libprotobuf-c1 libjson-c5 libmicrohttpd12 |
    grep -c "install ok installed")" = 6 ] && ok "the bare root has the six runtime packages now" || bad "packages in the bare root"
  local CB=(--cert "$dir/bare.d/keys/client.cert" --authorized-keys "$dir/bare.d/keys/authorized" --timeout 10000)
  local good=1
  for i in 1 2 3; do
    j=$((i % 3 + 1))
    pid=$(timeout 30 "$SN" spawn --connect "tcp://${a[$i]}:7400" "${CB[@]}" counter count 2>&1)
    out=$(timeout 30 "$SN" call --connect "tcp://${a[$j]}:7400" "${CB[@]}" xsource blast "$pid 1" 2>&1)
    [ "${pid%%.*}" = "$i" ] && [ "$out" = 0 ] || { good=0; bad "bare host $i: spawn '$pid', echo '$out'"; }
  done
  [ $good = 1 ] && ok "the plugin runs on every bare host: a counter on each, echoing a message from the next"
  out=$("$SC" stop "$dir/bare.hosts" "${O[@]}" 2>&1) && ok "bare hosts: stop" || bad "bare stop: $out"
}

live_skipped=0
live
bare

echo "$pass passed, $fail failed"
# the dry runs passed but the live deploy could not run: skipped (77), not passed
[ "$fail" -eq 0 ] && [ $live_skipped = 1 ] && { echo "SKIP: the live deploy did not run ($netns_why)"; exit 77; }
[ "$fail" -eq 0 ]
