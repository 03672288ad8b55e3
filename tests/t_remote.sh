#!/bin/sh
# The remote cache (Bazel HTTP cache protocol) against real servers started
# here on 127.0.0.1: tests/lib/remote_server.py, which enforces bazel-remote's
# rules (SHA-256 of every CAS upload, every AC upload parsed as an
# ActionResult, 404 on a miss) and misbehaves on request, and Debian's nginx
# with WebDAV PUT. Clones of the example project share nothing but the
# remote: each has its own local cache (cache/ in the clone).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/nginx.sh"
mktmp
SRV_PID= NGINX_DIR=
cleanup() {
	[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null
	[ -n "$NGINX_DIR" ] && nginx_stop "$NGINX_DIR"
	rm -rf "$TMPD"
}
trap cleanup EXIT
Q=$QUANTMAKE
if [ ! -x "$PY" ]; then
	fail "remote cache" "no .venv (run scripts/venv.sh)"
	exit 0
fi

# clone NAME: a copy of the example project (rules, data, export script)
clone() {
	mkdir -p "$TMPD/$1"
	cp -r "$ROOT/rules" "$ROOT/examples" "$ROOT/README.md" "$TMPD/$1/"
	ln -s "$ROOT/.venv" "$TMPD/$1/.venv"
}

# build NAME [ARGS...]: quantmake all in clone NAME with statistics, output
# in $TMPD/NAME.log; returns its status
build() {
	b_name=$1
	shift
	QUANTMAKE_STATS=1 "$Q" -C "$TMPD/$b_name" "$@" > "$TMPD/$b_name.log" 2>&1
}

# ran NAME: actions the last build of NAME ran; rhits NAME: remote hits
ran() { sed -n 's/.*stats: \([0-9]*\) actions run.*/\1/p' "$TMPD/$1.log"; }
rhits() { sed -n 's/.*stats: remote: \([0-9]*\) hits.*/\1/p' "$TMPD/$1.log"; }
warnings() { grep -c 'warning: remote cache' "$TMPD/$1.log"; }

# same_build A B: the build directories of two clones hold the same bytes
same_build() {
	(cd "$TMPD/$1/build" && find . -path ./.quantmake -prune -o -type f -print | sort) > "$TMPD/files.$1"
	(cd "$TMPD/$2/build" && find . -path ./.quantmake -prune -o -type f -print | sort) > "$TMPD/files.$2"
	cmp -s "$TMPD/files.$1" "$TMPD/files.$2" || return 1
	[ -s "$TMPD/files.$1" ] || return 1
	while read -r f; do
		cmp -s "$TMPD/$1/build/$f" "$TMPD/$2/build/$f" || return 1
	done < "$TMPD/files.$1"
}

# every object of a clone's local cache is what its name says
cache_sound() {
	for o in "$TMPD/$1"/cache/objects/*/*; do
		[ "$("$Q" hash "$o" | cut -d' ' -f1)" = "$(basename "$o")" ] || return 1
	done
}

# start the strict server on a free port; URL in $URL
mkdir -p "$TMPD/srv"
"$PY" "$ROOT/tests/lib/remote_server.py" "$TMPD/srv" 2> "$TMPD/srv.err" &
SRV_PID=$!
i=0
while [ ! -f "$TMPD/srv/port" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ ! -f "$TMPD/srv/port" ]; then
	fail "strict server starts" "$(cat "$TMPD/srv.err")"
	exit 0
fi
URL=http://127.0.0.1:$(cat "$TMPD/srv/port")
REQ=$TMPD/srv/requests
puts() { grep -c '^PUT ' "$REQ" 2>/dev/null || true; }
export QUANTMAKE_REMOTE_CACHE=$URL

# ---- bad settings: exit 2 with file:line ----
clone bad
S=$TMPD/bad/rules/remote.rules
printf '[settings]\nremote-cache = http//cache.example\n' > "$S"
expect_err "malformed URL names file:line" 2 '^quantmake: rules/remote.rules:2: remote-cache: .*not a URL' \
	env -u QUANTMAKE_REMOTE_CACHE "$Q" -C "$TMPD/bad" all
printf '[settings]\nremote-cache = ftp://cache.example/x\n' > "$S"
expect_err "a scheme other than http(s) is refused" 2 'rules/remote.rules:2: remote-cache: .*http or https, not ftp' \
	env -u QUANTMAKE_REMOTE_CACHE "$Q" -C "$TMPD/bad" all
printf '[settings]\nremote-cache = https://ci:s3cret@cache.example\n' > "$S"
expect_err "credentials in a rule file are refused" 2 'rules/remote.rules:2: remote-cache: .*no place for secrets' \
	env -u QUANTMAKE_REMOTE_CACHE "$Q" -C "$TMPD/bad" all
printf '[settings]\nremote-cache = %s\nremote-cache.mode = write-only\n' "$URL" > "$S"
expect_err "unknown mode names file:line" 2 "rules/remote.rules:3: remote-cache.mode = 'write-only' is not valid: expected read-write or read-only" \
	"$Q" -C "$TMPD/bad" all
printf '[settings]\nremote-cache = %s\nremote-cache.auth-env = QM_T_TOKEN\n' "$URL" > "$S"
expect_err "unset auth variable names file:line" 2 'rules/remote.rules:3: remote-cache.auth-env names QM_T_TOKEN, which is not set' \
	env -u QM_T_TOKEN "$Q" -C "$TMPD/bad" all
expect_err "auth variable that holds no header" 2 'rules/remote.rules:3: remote-cache.auth-env: the variable QM_T_TOKEN: it does not hold an HTTP header' \
	env QM_T_TOKEN=s3cret "$Q" -C "$TMPD/bad" all
grep -q s3cret "$TMPD/.stderr" && fail "the secret is never printed" || pass "the secret is never printed"
printf '[settings]\nremote-cache.timeout = 0\n' > "$S"
expect_err "bad timeout names file:line" 2 'rules/remote.rules:2: remote-cache.timeout must be' "$Q" -C "$TMPD/bad" all
rm -f "$S"
expect_err "malformed QUANTMAKE_REMOTE_CACHE" 2 '^quantmake: QUANTMAKE_REMOTE_CACHE: .*not a URL' \
	env QUANTMAKE_REMOTE_CACHE='http://exa mple' "$Q" -C "$TMPD/bad" all
expect_err "unknown QUANTMAKE_REMOTE_CACHE_MODE" 2 "QUANTMAKE_REMOTE_CACHE_MODE = 'rw' is not valid" \
	env QUANTMAKE_REMOTE_CACHE_MODE=rw "$Q" -C "$TMPD/bad" all
[ ! -e "$REQ" ] && pass "bad settings ask no server" || fail "bad settings ask no server" "$(cat "$REQ")"

# ---- two clones share the remote only ----
clone a
build a all
st=$?
[ $st -eq 0 ] && [ "$(ran a)" = 7 ] && pass "first clone builds 7 actions" || fail "first clone builds 7 actions" "status $st: $(tail -5 "$TMPD/a.log")"
grep -q 'remote: 0 hits, 7 uploads' "$TMPD/a.log" && grep -q '^quantmake: remote cache: 0 hits (0 B down), 7 uploads' "$TMPD/a.log" &&
	pass "it uploads all 7 and says so" || fail "it uploads all 7 and says so" "$(grep remote "$TMPD/a.log")"
if grep -v ' 200$' "$REQ" | grep -q '^PUT '; then
	fail "the strict server accepts every upload" "$(grep '^PUT ' "$REQ" | grep -v ' 200$' | head -3)"
else
	pass "the strict server accepts every upload (SHA-256 of each blob, each entry an ActionResult)"
fi
n_ac=$(grep -c '^PUT /ac/' "$REQ")
[ "$n_ac" = 7 ] && pass "one action entry per action" || fail "one action entry per action" "$n_ac"
# blobs go up before their entry: each entry's blobs were PUT (or found by HEAD) before it
"$PY" - "$TMPD/srv" > "$TMPD/order" 2>&1 <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests/lib"))
from remote_server import parse_action_result
root = sys.argv[1]
seen, bad = set(), []
for line in open(os.path.join(root, "requests")):
    m, path, st = line.split()
    kind, h = path.split("/")[-2:]
    if kind == "cas" and ((m == "PUT" and st == "200") or (m == "HEAD" and st == "200")):
        seen.add(h)
    if kind == "ac" and m == "PUT":
        data = open(os.path.join(root, "data/ac", h[:2], h), "rb").read()
        files = parse_action_result(data)
        bad += [p for p, d, size in files if d not in seen]
        if not any(p == ".quantmake/action" for p, _, _ in files):
            bad.append("no record in " + h)
print(bad)
sys.exit(1 if bad else 0)
PY
[ $? -eq 0 ] && pass "blobs go up before the entry that names them" || fail "blobs go up before the entry that names them" "$(cat "$TMPD/order")"

clone b
build b all
st=$?
[ $st -eq 0 ] && [ "$(ran b)" = 0 ] && [ "$(rhits b)" = 7 ] && pass "second clone: 0 stage runs, 7 remote hits" ||
	fail "second clone: 0 stage runs, 7 remote hits" "status $st: $(grep -E 'stats|warning' "$TMPD/b.log")"
same_build a b && pass "second clone has the same bytes" || fail "second clone has the same bytes" "$(cat "$TMPD/files.b")"
cache_sound b && [ "$(ls "$TMPD"/b/cache/actions/*/* | wc -l)" = 7 ] && pass "its local cache holds the 7 records and sound objects" ||
	fail "its local cache holds the 7 records and sound objects"
grep -q "^quantmake: remote cache: 7 hits (.* down), 0 uploads" "$TMPD/b.log" && grep -q '(remote cache, ' "$TMPD/b.log" &&
	pass "the summary counts remote hits and bytes" || fail "the summary counts remote hits and bytes" "$(cat "$TMPD/b.log")"
nreq=$(wc -l < "$REQ")
build b all
grep -q 'nothing to do' "$TMPD/b.log" && [ "$(wc -l < "$REQ")" = "$nreq" ] && pass "a no-op build does not touch the network" ||
	fail "a no-op build does not touch the network" "$(tail -3 "$REQ")"

# ---- -n --explain says what the remote would serve, and fetches nothing ----
clone n
nreq=$(wc -l < "$REQ")
build n -n --explain all
[ "$(grep -c '^would fetch .* from the remote cache' "$TMPD/n.log")" = 7 ] && grep -q 'would serve 7 actions' "$TMPD/n.log" &&
	pass "-n says which actions the remote would serve" || fail "-n says which actions the remote would serve" "$(cat "$TMPD/n.log")"
[ -z "$(ls "$TMPD"/n/cache/objects 2>/dev/null)" ] && [ ! -d "$TMPD/n/build/digits" ] &&
	! sed -n "$((nreq + 1)),\$p" "$REQ" | grep -q '^PUT' && pass "-n stores and uploads nothing" || fail "-n stores and uploads nothing"

# ---- read-only never uploads ----
clone ro
printf '[settings]\nremote-cache.mode = read-only\n' > "$TMPD/ro/rules/remote.rules"
sed -i 's/^verify.min-sqnr = 25/verify.min-sqnr = 24/' "$TMPD/ro/rules/examples.rules"
np=$(puts)
build ro all
st=$?
[ $st -eq 0 ] && [ "$(ran ro)" = 1 ] && [ "$(rhits ro)" = 6 ] && pass "read-only: hits for the 6 unchanged actions, the changed one runs" ||
	fail "read-only: hits for the 6 unchanged actions, the changed one runs" "status $st: $(grep stats "$TMPD/ro.log")"
[ "$(puts)" = "$np" ] && pass "read-only never uploads" || fail "read-only never uploads" "$(grep '^PUT' "$REQ" | tail -2)"
clone ro2
sed -i 's/^verify.min-sqnr = 25/verify.min-sqnr = 23/' "$TMPD/ro2/rules/examples.rules"
QUANTMAKE_REMOTE_CACHE_MODE=read-only build ro2 all
[ "$(puts)" = "$np" ] && [ "$(ran ro2)" = 1 ] && pass "QUANTMAKE_REMOTE_CACHE_MODE=read-only never uploads" ||
	fail "QUANTMAKE_REMOTE_CACHE_MODE=read-only never uploads" "$(grep stats "$TMPD/ro2.log")"

# ---- a poisoned blob is caught and its action rebuilt ----
qsha=$(sha256sum "$TMPD/a/build/digits-int8/digits-int8.onnx" | cut -d' ' -f1)
blob=$TMPD/srv/data/cas/$(echo "$qsha" | cut -c1-2)/$qsha
if [ -f "$blob" ]; then
	cp "$blob" "$TMPD/blob.good"
	printf 'X' | dd of="$blob" bs=1 seek=100 conv=notrunc 2>/dev/null
	clone p
	build p all
	st=$?
	[ $st -eq 0 ] && [ "$(ran p)" = 1 ] && [ "$(warnings p)" = 1 ] &&
		grep -q "warning: remote cache $URL/cas/$qsha: the bytes received hash to .*: discarded: building locally" "$TMPD/p.log" &&
		pass "a poisoned blob: one warning naming it, its action (quantize) rebuilt" ||
		fail "a poisoned blob: one warning naming it, its action (quantize) rebuilt" "status $st: $(grep -E 'stats|warn' "$TMPD/p.log")"
	same_build a p && cache_sound p && pass "the poisoned bytes never reach the local cache or build/" ||
		fail "the poisoned bytes never reach the local cache or build/"
	cp "$TMPD/blob.good" "$blob"
else
	fail "a poisoned blob" "the quantized model's blob $qsha is not on the server"
fi

# ---- a server that misbehaves: one warning, the build passes locally ----
misbehave() { # misbehave NAME MODE [TIMEOUT]: a fresh clone built while the server plays MODE
	echo "$2" > "$TMPD/srv/mode"
	clone "$1"
	[ -n "$3" ] && printf '[settings]\nremote-cache.timeout = %s\n' "$3" > "$TMPD/$1/rules/remote.rules"
	build "$1" all
	m_st=$?
	rm -f "$TMPD/srv/mode"
	if [ $m_st -eq 0 ] && [ "$(warnings "$1")" = 1 ] && [ "$(ran "$1")" = 7 ] && same_build a "$1" && cache_sound "$1"; then
		pass "server answers $2: one warning, the build passes on its own ($(grep -o 'warning: remote cache [^ ]*: .\{0,60\}' "$TMPD/$1.log" | sed "s|$URL||"))"
	else
		fail "server answers $2: one warning, the build passes on its own" "status $m_st: $(grep -E 'warning|stats|FAIL' "$TMPD/$1.log")"
	fi
}
misbehave m500 500
misbehave mwrong "wrong cas"
misbehave mtrunc "truncate cas"
misbehave mgarb "garbage ac"
misbehave mrefuse refuse
misbehave mstall stall 1
grep -q 'HTTP 500' "$TMPD/m500.log" && grep -q 'not an ActionResult' "$TMPD/mgarb.log" &&
	pass "the warning names the status or what was wrong" || fail "the warning names the status or what was wrong"

# ---- --shard I/N: three runners and a final job run what one build runs ----
shproj() { # shproj NAME: six small models and one built from another's output
	mkdir -p "$TMPD/$1/rules" "$TMPD/$1/models"
	for m in relu abs sigmoid tanh exp neg; do
		cp "$TESTDATA/node/test_$m/model.onnx" "$TMPD/$1/models/$m.onnx"
		printf '[model %s]\nsource = models/%s.onnx\ninfer-shapes = merge\n\n' "$m" "$m"
	done > "$TMPD/$1/rules/m.rules"
	printf '[model relu2]\nsource = @relu\ninfer-shapes = merge\n' >> "$TMPD/$1/rules/m.rules"
}
shproj one
QUANTMAKE_REMOTE_CACHE=off build one all
total=$(ran one)
sum=0 empty=0
for i in 1 2 3; do
	shproj "s$i"
	build "s$i" --shard "$i/3" all
	n=$(ran "s$i")
	sum=$((sum + ${n:-0}))
	[ "${n:-0}" -gt 0 ] || empty=1
done
[ "$total" = 14 ] && [ "$sum" = "$total" ] && [ $empty = 0 ] &&
	pass "three shards run exactly the $total actions one build runs ($(ran s1)+$(ran s2)+$(ran s3))" ||
	fail "three shards run exactly the actions one build runs" "one build $total, shards $(ran s1)+$(ran s2)+$(ran s3)"
shard_of() { for i in 1 2 3; do [ -d "$TMPD/s$i/build/$1" ] && echo "$i"; done; }
[ -n "$(shard_of relu)" ] && [ "$(shard_of relu)" = "$(shard_of relu2)" ] &&
	pass "a model and the one built from it share a shard" || fail "a model and the one built from it share a shard"
grep -q '^quantmake: shard 2/3: [0-9] of 7 models (cost [0-9]* of 14)' "$TMPD/s2.log" && pass "a shard says which share it builds" ||
	fail "a shard says which share it builds" "$(head -2 "$TMPD/s2.log")"
shproj fin
build fin all
[ "$(ran fin)" = 0 ] && [ "$(rhits fin)" = 14 ] && same_build one fin && pass "the final job runs none and has the same bytes" ||
	fail "the final job runs none and has the same bytes" "$(grep stats "$TMPD/fin.log")"
for i in 1 2 3; do
	"$Q" -C "$TMPD/s1" -n --shard "$i/3" all 2>/dev/null | head -1
done > "$TMPD/again"
grep -h '^quantmake: shard' "$TMPD/s1.log" "$TMPD/s2.log" "$TMPD/s3.log" | cmp -s - "$TMPD/again" &&
	pass "the split is the same every time" || fail "the split is the same every time" "$(cat "$TMPD/again")"
expect_err "a bad --shard is refused" 2 "^quantmake: --shard expects I/N with 1 <= I <= N <= 1024 \(such as 2/3\), got '4/3'" "$Q" -C "$TMPD/s1" --shard 4/3

# ---- a dead server: one warning, the build passes ----
kill "$SRV_PID"
wait "$SRV_PID" 2>/dev/null
SRV_PID=
clone dead
build dead all
st=$?
[ $st -eq 0 ] && [ "$(warnings dead)" = 1 ] && [ "$(ran dead)" = 7 ] && same_build a dead &&
	grep -q 'failures (stopped asking)' "$TMPD/dead.log" && pass "a dead server costs one warning and the build passes" ||
	fail "a dead server costs one warning and the build passes" "status $st: $(grep -E 'warning|stats|remote' "$TMPD/dead.log")"

# ---- nginx with WebDAV PUT, the plain server many teams run ----
NGINX_DIR=$TMPD/nginx
mkdir -p "$NGINX_DIR"
if ! nginx_start "$NGINX_DIR"; then
	fail "nginx starts" "$(tail -3 "$NGINX_DIR/start.err")"
	exit 0
fi
export QUANTMAKE_REMOTE_CACHE=http://127.0.0.1:$NGINX_PORT/qm
clone ng1
build ng1 all
st=$?
[ $st -eq 0 ] && [ "$(ran ng1)" = 7 ] && grep -q 'remote: 0 hits, 7 uploads' "$TMPD/ng1.log" && [ "$(warnings ng1)" = 0 ] &&
	pass "nginx: a clone builds and uploads" || fail "nginx: a clone builds and uploads" "status $st: $(grep -E 'warning|stats' "$TMPD/ng1.log")"
"$PY" - "$NGINX_DIR/root/qm" > "$TMPD/ngcas" 2>&1 <<'PY'
import hashlib, os, sys
d = os.path.join(sys.argv[1], "cas")
names = os.listdir(d)
bad = [n for n in names if hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest() != n]
print(len(names), bad)
sys.exit(1 if bad or not names else 0)
PY
[ $? -eq 0 ] && pass "nginx holds each blob under its SHA-256 ($(cat "$TMPD/ngcas"))" || fail "nginx holds each blob under its SHA-256" "$(cat "$TMPD/ngcas")"
clone ng2
build ng2 all
st=$?
[ $st -eq 0 ] && [ "$(ran ng2)" = 0 ] && [ "$(rhits ng2)" = 7 ] && same_build ng1 ng2 && same_build a ng2 &&
	pass "nginx: a second clone has 0 stage runs and the same bytes" ||
	fail "nginx: a second clone has 0 stage runs and the same bytes" "status $st: $(grep -E 'warning|stats' "$TMPD/ng2.log")"
