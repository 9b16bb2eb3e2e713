#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nvmefs-stat's contract, on a faked mount point: a directory holding the
# .nvmefs/stats file the daemon will publish (schema version 1), written by
# this script (gen below) and, for the interval tests, rewritten every 0.1 s
# by a background loop that plays the daemon. Its counters move by fixed
# amounts per tick and its uptime_ns by exactly 0.1 s, and nvmefs-stat
# divides by the change of uptime_ns, so the rates are known exactly:
#  - one shot: the header, a row per device and a total row with the right
#    ops, MiB (from bytes), errors, mean latency and gauges; the pool, the
#    requests sorted by count, the data path, the native door (a file
#    without it, from a daemon before it, shows none); unknown keys ignored;
#    a file far bigger than one read() and a FIFO (st_size 0) read to EOF;
#  - -c 4 with an interval: 4 reports, the first the totals, the others
#    rates, await and errors over each interval exactly as the writer made
#    them (a report where the writer stalled shows zeros, never junk), the
#    requests of the interval by type, the native door's rates and counts;
#    a file that does not change shows
#    zero rates and the current in-flight counts;
#  - a device list that changes, or a remount, prints fresh totals;
#  - -j prints one parseable JSON object per sample, unknown keys kept;
#  - SIGINT and SIGTERM end an endless run with exit status 0, also one
#    stuck in open() or read() on a daemon that does not answer;
#  - bad interval, bad count, a directory that is no mount point, an
#    unreadable or malformed file, version 2, a missing or mistyped key: exit
#    status 1 and a message naming the input.
# usage: test_stat.sh BUILD_DIR
set -euo pipefail
[ $# = 1 ] || {
	echo "usage: test_stat.sh BUILD_DIR" >&2
	exit 2
}
stat_bin=$1/nvmefs-stat
[ -x "$stat_bin" ] || {
	echo "SKIP: $stat_bin not built"
	exit 77
}
command -v python3 >/dev/null || {
	echo "SKIP: python3 not installed"
	exit 77
}

dir=$(mktemp -d "${TMPDIR:-/tmp}/test_stat.XXXXXX")
writer=""
# shellcheck disable=SC2317 # runs from a trap
cleanup() {
	# A background job killed between fork and exec runs this trap too:
	# only the script itself may clean up.
	[ "$BASHPID" = "$$" ] || return 0
	if [ -n "$writer" ]; then
		kill "$writer" 2>/dev/null || true
		wait "$writer" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
mnt=$dir/mnt
st=$mnt/.nvmefs/stats
mkdir -p "$mnt/.nvmefs" "$dir/empty"
fail=0
check() { # MESSAGE CMD...
	local msg=$1
	shift
	if ! "$@"; then
		echo "FAIL: $msg" >&2
		fail=1
	fi
}

# ---- the fake daemon ----
# Per device: the counters at tick 0 (what the one-shot test expects) and
# what one tick (0.1 s) adds. Device 2 only appears when the list changes.
TICK_NS=100000000
UP0=5000000000
uuid=3f2a6c1e-8d0b-4b7a-9c3e-2f1d5a6b7c8d
b_rops=(10 30 7) i_rops=(10 20 0)
b_rbytes=(10485760 31981568 0) i_rbytes=(10485760 20971520 0) # +10, +20 MiB
b_wops=(5 2 0) i_wops=(5 5 0)
b_wbytes=(5242880 1536 0) i_wbytes=(2621440 2621440 0) # +2.5 MiB
b_err=(0 2 0) i_err=(0 1 0)
b_busy=(1234567 3200000 0) i_busy=(3000000 10000000 0) # await 0.2, 0.4 ms
inflight=(3 1 0) queued=(0 4 0)

gen_device() { # I K
	local i=$1 k=$2 rops wops busy lat
	rops=$((b_rops[i] + k * i_rops[i]))
	wops=$((b_wops[i] + k * i_wops[i]))
	busy=$((b_busy[i] + k * i_busy[i]))
	lat=0 # an integer where a double is due: must pass
	if [ $((rops + wops)) -gt 0 ]; then
		lat=$((busy / (rops + wops) / 100))
		lat=$((lat / 10)).$((lat % 10))
	fi
	printf '    { "index": %d, "path": "/dev/fake%d", "future": [1],\n' "$i" "$i"
	printf '      "read_ops": %d, "read_bytes": %d, "write_ops": %d, "write_bytes": %d,\n' \
		"$rops" $((b_rbytes[i] + k * i_rbytes[i])) "$wops" $((b_wbytes[i] + k * i_wbytes[i]))
	printf '      "errors": %d, "latency_sum_ns": %d, "mean_latency_us": %s, "in_flight": %d, "queued": %d }' \
		$((b_err[i] + k * i_err[i])) "$busy" "$lat" "${inflight[i]}" "${queued[i]}"
}

gen() { # K [NDEV]: the stats file after K ticks, pretty-printed like json-c's
	local k=$1 ndev=${2:-2} i
	printf '{\n  "version": 1,\n  "mountpoint": "/srv/fake",\n  "uuid": "%s",\n' "$uuid"
	printf '  "label": "scratch",\n  "uptime_ns": %d,\n' $((UP0 + k * TICK_NS))
	printf '  "future_key": { "x": [ 1, 2 ] },\n  "devices": [\n'
	for ((i = 0; i < ndev; i++)); do
		gen_device "$i" "$k"
		[ "$i" = $((ndev - 1)) ] && echo || echo ","
	done
	printf '  ],\n  "pool": { "buffer_bytes": 1056768, "buffers": 63, "allocated": 12,'
	printf ' "in_use": 9, "pinned": true },\n'
	printf '  "requests": { "LOOKUP": %d, "GETATTR": 40, "READ": %d, "WRITE": %d },\n' \
		$((12 + k)) $((300 + 30 * k)) $((200 + 10 * k))
	printf '  "data": { "reads": 300, "writes": 200, "zero_copy_writes": 150,'
	printf ' "copied_bytes": 4096, "in_flight": 2, "peak_in_flight": 17 },\n'
	# Per tick: 4 reads of 1 MiB, 1 write of 1 MiB, 1 fsync, 1 invalidation.
	printf '  "native": { "clients": 2, "connects": 3, "reads": %d, "writes": %d,' \
		$((10 + 4 * k)) $((5 + k))
	printf ' "fsyncs": %d, "read_bytes": %d, "write_bytes": %d, "copied_requests": 1,' \
		$((5 + k)) $(((10 + 4 * k) << 20)) $(((5 + k) << 20))
	printf ' "copied_bytes": 512, "refused": 0, "invalidations": %d }\n}\n' $((5 + k))
}

put() { # K [NDEV]: replace the stats file at once, as a reader must see it
	gen "$@" >"$st.tmp"
	mv -f "$st.tmp" "$st"
}

start_writer() { # a tick every 0.1 s (on uptime_ns; the wall clock may lag)
	(
		k=0
		while :; do
			put "$k"
			k=$((k + 1))
			sleep 0.1
		done
	) &
	writer=$!
}

stop_writer() {
	kill "$writer"
	wait "$writer" 2>/dev/null || true
	writer=""
}

variant() { # PYTHON: gen 0, changed by PYTHON on d (the parsed object)
	gen 0 | python3 -c 'import json, sys; d = json.load(sys.stdin); exec(sys.argv[1]); print(json.dumps(d, indent=2))' "$1"
}

row() { # DEV: that row of the report on stdin, white space squeezed
	awk -v d="$1" '$1 == d { $1 = $1; print; exit }'
}

# shellcheck disable=SC2317 # runs through check
wait_for() { # FILE PATTERN: up to 5 s for a line matching PATTERN
	for _ in $(seq 100); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# shellcheck disable=SC2317 # runs through check
wait_asleep() { # PID: up to 5 s for PID, nvmefs-stat by now, to sleep in the kernel
	sleep 0.2
	for _ in $(seq 100); do
		[ "$(cat "/proc/$1/comm" 2>/dev/null)" = nvmefs-stat ] &&
			[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = S ] && return 0
		sleep 0.05
	done
	return 1
}

# ---- one shot: totals since mount ----
put 0
out=$("$stat_bin" "$mnt")
check "header: '$(head -n 1 <<<"$out")'" grep -q \
	"^nvmefs /srv/fake  label scratch  uuid $uuid  up 5.000 s$" <<<"$out"
check "device 0: '$(row 0 <<<"$out")'" \
	test "$(row 0 <<<"$out")" = "0 /dev/fake0 10 10.00 5 5.00 0 82.3 3 0"
check "device 1: '$(row 1 <<<"$out")'" \
	test "$(row 1 <<<"$out")" = "1 /dev/fake1 30 30.50 2 0.00 2 100.0 1 4"
check "total row: '$(row all <<<"$out")'" \
	test "$(row all <<<"$out")" = "all - 40 40.50 7 5.00 2 94.4 4 4"
check "pool line" grep -qx "pool: 9 of 63 buffers in use (12 allocated, 1056768 bytes each, pinned)" \
	<<<"$out"
check "requests sorted by count" grep -qx "requests: READ 300, WRITE 200, GETATTR 40, LOOKUP 12" \
	<<<"$out"
check "data line" grep -qx \
	"data: 300 reads, 200 writes (150 zero-copy), 4096 bytes copied, 2 in flight (peak 17)" <<<"$out"
check "native line" grep -qx "native: 2 clients (3 connects), 10 reads (10.00 MiB), 5 writes \
(5.00 MiB), 5 fsyncs, 1 requests copied (512 bytes), 0 refused, 5 invalidations" <<<"$out"
variant 'del d["native"]' >"$st"
out=$("$stat_bin" "$mnt")
check "no native object (an older daemon): no native line, the rest as before" \
	test "$(grep -c '^native:' <<<"$out"):$(row all <<<"$out")" = "0:all - 40 40.50 7 5.00 2 94.4 4 4"
# Writes held back and the transport (daemons since write-behind's hold,
# io_uring's placement and -o cpu_latency): a line each.
tr='{"name": "io_uring", "queues": 2, "queue_depth": 32, "uring_requests": 5000,
 "spread_queues": 1, "away_queues": 1, "polled_waits": 4000, "idle_waits": 0,
 "idle_backoffs": 0, "cpu_latency_held": True, "cpu_latency_holds": 3}'
variant "d['data'].update(behind_writes=120, held_writes=100, held_sends=10); d['transport'] = $tr" >"$st"
out=$("$stat_bin" "$mnt")
check "held writes line" grep -qx \
	"  120 writes answered early, 100 of them held back and sent together in 10 sends" <<<"$out"
check "transport line" grep -qx "transport: io_uring, 2 queues of 32 entries (1 spread over the \
CPUs), 5000 requests through them (FORGET, INTERRUPT and notices on /dev/fuse)" <<<"$out"
check "queues led away line" grep -qx \
	"  1 led from another CPU, polling; 4000 waits ended by polling" <<<"$out"
check "cpu_latency line, held" grep -qx \
	"  idle CPUs kept awake (cpu_latency): held now, 3 busy spells held" <<<"$out"
variant "d['transport'] = $tr; d['transport'].update(name='/dev/fuse', queues=0, queue_depth=0,
 cpu_latency_held=None, cpu_latency_holds=0)" >"$st"
out=$("$stat_bin" "$mnt")
check "/dev/fuse: the transport's line, no queues" test \
	"$(grep -c '^transport: /dev/fuse$' <<<"$out"):$(grep -c 'led from another' <<<"$out")" = "1:0"
check "cpu_latency line, nothing asked" grep -qx \
	"  idle CPUs kept awake (cpu_latency): off (nothing asked), 0 busy spells held" <<<"$out"
check "no held writes in an older daemon's data: no line" test "$(grep -c 'held back' <<<"$out")" = 0
put 0
check "trailing slash on the mount point" \
	test "$("$stat_bin" "$mnt/" | row all)" = "all - 40 40.50 7 5.00 2 94.4 4 4"

# Far bigger than one read(); then a FIFO, whose st_size is 0.
variant 'd["padding"] = "x" * 300000' >"$dir/big.json"
cp "$dir/big.json" "$st"
check "a 300 KB file is read whole" test "$("$stat_bin" "$mnt" | row all)" = \
	"all - 40 40.50 7 5.00 2 94.4 4 4"
mkdir -p "$dir/fifo/.nvmefs"
mkfifo "$dir/fifo/.nvmefs/stats"
# shellcheck disable=SC2016 # expanded by the inner bash
timeout 10 bash -c 'cat "$1" >"$2"' _ "$dir/big.json" "$dir/fifo/.nvmefs/stats" &
feeder=$!
check "a file with st_size 0 (a FIFO) is read to EOF" test \
	"$(timeout 10 "$stat_bin" "$dir/fifo" | row 1)" = "1 /dev/fake1 30 30.50 2 0.00 2 100.0 1 4"
wait "$feeder" || true

# ---- -j ----
put 0
# shellcheck disable=SC2317 # runs through check
json_check() { # COUNT: COUNT lines on stdin, each the sample as JSON
	python3 -c '
import json, sys
lines = sys.stdin.read().splitlines()
assert len(lines) == int(sys.argv[1]), "%d lines" % len(lines)
up = 0
for l in lines:
    d = json.loads(l)
    assert d["version"] == 1, d["version"]
    assert [x["path"] for x in d["devices"]] == ["/dev/fake0", "/dev/fake1"]
    assert d["future_key"] == {"x": [1, 2]}, "unknown keys are kept"
    assert d["native"]["clients"] == 2, "the native object is kept"
    assert d["uptime_ns"] >= up, "uptime went back"
    up = d["uptime_ns"]
' "$1"
}
check "-j: one line of JSON" json_check 1 <<<"$("$stat_bin" -j "$mnt")"

# ---- intervals, with the fake daemon running ----
start_writer
check "-j -c 3: three lines of JSON" json_check 3 <<<"$(timeout 10 "$stat_bin" -j -c 3 "$mnt" 0.2)"
out=$(timeout 10 "$stat_bin" -c 4 "$mnt" 0.5)
stop_writer
check "-c 4: one report of totals" test "$(grep -c '^nvmefs ' <<<"$out")" = 1
check "-c 4: three interval reports" test "$(grep -c '^interval ' <<<"$out")" = 3
moving=0
zero0="0 /dev/fake0 0.0 0.00 0.0 0.00 0.000 0 3 0"
zero_native="native: 2 clients, 0.0 reads/s (0.00 MiB/s), 0.0 writes/s (0.00 MiB/s), 0 fsyncs, \
0 requests copied, 0 refused, 0 invalidations"
# Each interval report: its rows for device 0, 1 and all, its requests and native line.
while IFS='|' read -r r0 r1 ra rq rn; do
	k=$(awk '{ print $8 }' <<<"$r1") # device 1 makes one error per tick
	if [ "$k" = 0 ]; then            # the writer stalled: nothing moved
		check "stalled interval: '$r0'" test "$r0" = "$zero0"
		check "stalled interval: '$rn'" test "$rn" = "$zero_native"
		continue
	fi
	moving=$((moving + 1))
	check "device 0 rates: '$r0'" test "$r0" = "0 /dev/fake0 100.0 100.00 50.0 25.00 0.200 0 3 0"
	check "device 1 rates: '$r1'" test "$r1" = "1 /dev/fake1 200.0 200.00 50.0 25.00 0.400 $k 1 4"
	check "total rates: '$ra'" test "$ra" = "all - 300.0 300.00 100.0 50.00 0.325 $k 4 4"
	check "interval requests: '$rq'" \
		test "$rq" = "requests: READ $((30 * k)), WRITE $((10 * k)), LOOKUP $k"
	check "interval native: '$rn'" test "$rn" = "native: 2 clients, 40.0 reads/s (40.00 MiB/s), \
10.0 writes/s (10.00 MiB/s), $k fsyncs, 0 requests copied, 0 refused, $k invalidations"
done < <(awk '
	/^interval / { inrep = 1; r0 = r1 = ra = "" }
	inrep && $1 == "0" { $1 = $1; r0 = $0 }
	inrep && $1 == "1" { $1 = $1; r1 = $0 }
	inrep && $1 == "all" { $1 = $1; ra = $0 }
	inrep && /^requests:/ { rq = $0 }
	inrep && /^native:/ { print r0 "|" r1 "|" ra "|" rq "|" $0; inrep = 0 }' <<<"$out")
check "some interval saw the counters move" test "$moving" -ge 1

# A file that does not change: zero rates, the current gauges.
put 7
out=$(timeout 10 "$stat_bin" -c 2 "$mnt" 0.2)
check "steady: device 0 '$(sed -n '/^interval/,$p' <<<"$out" | row 0)'" \
	test "$(sed -n '/^interval/,$p' <<<"$out" | row 0)" = "$zero0"
check "steady: no requests" grep -qx "requests: none" <<<"$out"

# ---- counters that cannot be differenced: fresh totals ----
reset_case() { # WHAT K1 NDEV1 K2 NDEV2 PATTERN
	local what=$1 rc=0
	put "$2" "$3"
	rm -f "$dir/reset.out" # wait_for must not see the last run's lines
	timeout 10 "$stat_bin" -c 2 "$mnt" 0.5 >"$dir/reset.out" 2>&1 &
	local pid=$!
	check "$what: first report" wait_for "$dir/reset.out" "^data:"
	put "$4" "$5"
	wait "$pid" || rc=$?
	check "$what: exit status $rc" test "$rc" = 0
	check "$what: says '$6'" grep -q "^counters reset ($6): totals since mount" "$dir/reset.out"
	check "$what: totals again" test "$(grep -c '^nvmefs ' "$dir/reset.out")" = 2
}
reset_case "device added" 0 2 3 3 "device list changed"
check "device added: its row" grep -q "^  2  /dev/fake2 " "$dir/reset.out"
reset_case "remount" 5 2 1 2 "remounted"

# ---- signals end an endless run, exit status 0 ----
put 0
for sig in INT TERM; do
	rm -f "$dir/sig.out" # wait_for must not see the last run's lines
	"$stat_bin" "$mnt" 0.2 >"$dir/sig.out" 2>&1 &
	pid=$!
	check "SIG$sig: an interval report first" wait_for "$dir/sig.out" "^interval "
	kill -"$sig" "$pid"
	rc=0
	wait "$pid" || rc=$?
	check "SIG$sig: exit status $rc" test "$rc" = 0
done

# A daemon that does not answer: blocked in open() (no writer on a FIFO),
# then in read() (a writer that writes nothing); SIGTERM ends either quietly.
mkdir -p "$dir/hung/.nvmefs"
mkfifo "$dir/hung/.nvmefs/stats"
for where in open read; do
	holder=""
	if [ "$where" = read ]; then
		sleep 20 >"$dir/hung/.nvmefs/stats" &
		holder=$!
	fi
	"$stat_bin" "$dir/hung" >"$dir/sig.out" 2>&1 &
	pid=$!
	check "hung $where: blocks" wait_asleep "$pid"
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	check "hung $where: exit status $rc" test "$rc" = 0
	check "hung $where: no message, got '$(cat "$dir/sig.out")'" test ! -s "$dir/sig.out"
	if [ -n "$holder" ]; then
		kill "$holder"
		wait "$holder" 2>/dev/null || true
	fi
done

# ---- refusals: exit status 1, a message naming the input ----
expect_error() { # WHAT PATTERN ARGS...
	local what=$1 pat=$2 rc=0 err
	shift 2
	err=$(timeout 10 "$stat_bin" "$@" 2>&1 >/dev/null) || rc=$?
	check "$what: exit status $rc" test "$rc" = 1
	check "$what: message '$err' lacks '$pat'" grep -qF -- "$pat" <<<"$err"
}
put 0
for bad in 0 abc 3601 nan inf 1s ""; do
	expect_error "interval '$bad'" "bad interval '$bad'" "$mnt" "$bad"
done
expect_error "interval -1" "bad interval '-1'" -- "$mnt" -1
for bad in 0 -1 abc 1.5 ""; do
	expect_error "count '$bad'" "bad count '$bad'" -c "$bad" "$mnt" 1
done
expect_error "-c without interval" "needs an INTERVAL" -c 2 "$mnt"
expect_error "no mount point" "give a MOUNTPOINT"
expect_error "too many arguments" "too many arguments: 'x'" "$mnt" 1 x
expect_error "not a mount point" "$dir/empty: not an nvmefs mount point" "$dir/empty"
expect_error "missing directory" "$dir/nope: No such file" "$dir/nope"

refuse() { # WHAT PATTERN: the file now in place is refused
	expect_error "$1" "$st: $2" "$mnt"
}
rm -f "$st"
mkdir "$st"
expect_error "unreadable (a directory)" "cannot read $st: Is a directory" "$mnt"
rmdir "$st"
: >"$st"
refuse "empty file" "malformed JSON: the file is empty"
gen 0 >"$dir/full.json" # not piped into head: pipefail would see gen's SIGPIPE
head -c 300 "$dir/full.json" >"$st"
refuse "cut short" "malformed JSON: the file ends before the object does"
{
	gen 0
	echo "{}"
} >"$st"
refuse "two objects" "malformed JSON"
echo '{"version": 1,, }' >"$st"
refuse "syntax error" "malformed JSON at byte"
echo '[1, 2]' >"$st"
refuse "an array" "not a JSON object but array"
variant 'd["version"] = 2' >"$st"
refuse "version 2" "schema version 2 is not supported"
variant 'del d["version"]' >"$st"
refuse "no version" 'missing key "version"'
variant 'd["version"] = "1"' >"$st"
refuse "version as text" 'key "version" is string, not int'
variant 'del d["devices"][1]["latency_sum_ns"]' >"$st"
refuse "missing device key" 'missing key "devices[1].latency_sum_ns"'
variant 'd["devices"][0]["read_ops"] = "10"' >"$st"
refuse "mistyped device key" 'key "devices[0].read_ops" is string, not int'
variant 'd["devices"][0]["errors"] = -1' >"$st"
refuse "negative counter" 'key "devices[0].errors" is negative'
variant 'd["devices"][1] = 5' >"$st"
refuse "device not an object" 'key "devices[1]" is int, not object'
variant 'del d["pool"]["pinned"]' >"$st"
refuse "missing pool key" 'missing key "pool.pinned"'
variant 'd["requests"]["READ"] = 1.5' >"$st"
refuse "request count not an integer" 'key "requests.READ" is double, not int'
variant 'del d["data"]' >"$st"
refuse "missing object" 'missing key "data"'
variant 'd["native"] = [1]' >"$st"
refuse "native not an object" 'key "native" is array, not object'
variant 'd["native"]["refused"] = "0"' >"$st"
refuse "mistyped native key" 'key "native.refused" is string, not int'
variant 'del d["native"]["clients"]' >"$st"
refuse "missing native key" 'missing key "native.clients"'
variant "d['transport'] = $tr; d['transport']['cpu_latency_held'] = 'yes'" >"$st"
refuse "mistyped cpu_latency_held" 'key "transport.cpu_latency_held" is string, not boolean'
variant "d['data'].update(held_writes=1)" >"$st"
refuse "held writes without the rest" 'missing key "data.behind_writes"'

[ "$fail" = 0 ] && echo "all checks passed"
exit "$fail"
