#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# FUSE over io_uring (fs/fuse/uring.c, issue 33): negotiation that never
# hangs a mount, and the transport each mount reports.
#  - enable_uring off: -o uring refuses at once with a message that says how
#    to enable it, and mounts nothing; -o uring=auto mounts on /dev/fuse
#    with one line saying why; direct mode without an option on /dev/fuse
#    without a line;
#  - the default transport of each mode with enable_uring on: /dev/fuse
#    while the daemon keeps idle CPUs awake (cpu_latency, its default),
#    io_uring in direct mode with cpu_latency=off; nouring and uring=auto;
#    with io_uring_setup(2) refused (kernel.io_uring_disabled), direct mode
#    with cpu_latency=off on /dev/fuse with one line, and -o uring refused
#    before the daemon forks (a failing exit status, the reason on stderr);
#  - enable_uring on: -o uring serves through the queues (.nvmefs/config,
#    .nvmefs/stats, nvmefs-stat say so), files read back as written; the
#    queues' payloads may be huge pages (under the "madvise" policy);
#  - read-ahead: none for a reader with READs of its own in flight, whose
#    READs are read in place; a lone sequential reader still has it;
#  - a ring that device blocks fill (8 SQEs, NVMEFS_TEST_URING_SMALL_RING):
#    1 MiB O_DIRECT reads at QD32, whose blocks go on the queues' rings,
#    beside unaligned reads, whose replies are handed over to the leader
#    (which then needs an SQE for its wake-up): the mount serves on and the
#    file reads back;
#  - a queue the kernel refuses after INIT (a payload buffer too small,
#    NVMEFS_TEST_URING_SHORT_PAYLOAD), when every request would wait for
#    the queues: the daemon stops and unmounts, and a stat on the mount
#    point fails within seconds instead of hanging.
# The test sets the fuse module's enable_uring as an administrator would and
# puts back the value it found, whatever happens. Skipped on kernels without
# FUSE over io_uring (before 6.14).
# usage: test_uring.sh BUILD_DIR
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 120 "$0" "$@"
build=$1
param=/sys/module/fuse/parameters/enable_uring
[ -w "$param" ] || mnt_skip "no $param (Linux 6.14+ with CONFIG_FUSE_IO_URING, as root)"
was=$(cat "$param")
sysctl=/proc/sys/kernel/io_uring_disabled
sysctl_was=$(cat "$sysctl" 2>/dev/null || true)
mnt_setup "$build" 2 256M
hogs=() # busy loops of the idle-wait gate's check
# Put back what it found, then clean up, even if a write is refused.
trap '{ echo "$was" >"$param"; [ -z "$sysctl_was" ] || echo "$sysctl_was" >"$sysctl"; } 2>/dev/null || true
[ "${#hogs[@]}" = 0 ] || kill "${hogs[@]}" 2>/dev/null || true
_mnt_cleanup' EXIT
unset NVMEFS_TEST_TRANSPORT # this test says which transport it wants

transport() { # the config's transport line
	sed -n 's/^transport = //p' "$MNT/.nvmefs/config"
}

echo N >"$param"
start=$SECONDS
if "$build/nvmefs" "$MNT_DEVS" "$MNT" -o uring >"$MNT_TMP/refuse.log" 2>&1; then
	check "-o uring with enable_uring off is refused" false
	mnt_umount
fi
check "the refusal is at once" test $((SECONDS - start)) -le 5
check "the refusal says how to enable it" grep -q "enable_uring" "$MNT_TMP/refuse.log"
check "nothing is mounted after the refusal" sh -c "! mountpoint -q '$MNT'"

MNT_FOREGROUND=1
mnt_mount uring=auto
check "uring=auto with enable_uring off serves /dev/fuse" test "$(transport)" = /dev/fuse
check "uring=auto says why, in one line" \
	test "$(grep -c 'io_uring' "$MNT_TMP/nvmefs.log")" = 1
mnt_umount
# Without an option, direct mode with cpu_latency=off asks for io_uring
# where offered: here not, so /dev/fuse, and no line (nobody asked).
mnt_mount mode=direct,cpu_latency=off
check "direct mode's default with enable_uring off serves /dev/fuse" test "$(transport)" = /dev/fuse
check "... and says nothing of io_uring" test "$(grep -c 'io_uring' "$MNT_TMP/nvmefs.log")" = 1
mnt_umount

echo Y >"$param"
mnt_mount uring
check "-o uring with enable_uring on serves io_uring" test "$(transport)" = io_uring
# The queues' payload areas ask for huge pages (uring_setup.c's
# make_queue, through nvmefs_map_buffers): under the kernel's "madvise"
# policy only a mapping that asked may have them (under "always", for
# every size or for 2 MiB, every one may; under "never" for 2 MiB, none:
# nothing to check either way, as test_bufpool.c's test_huge_slabs).
# Whether the kernel had any to give is printed, not checked.
thp=/sys/kernel/mm/transparent_hugepage
if grep -q '\[madvise\]' "$thp/enabled" 2>/dev/null &&
	! grep -q '\[always\]\|\[never\]' "$thp/hugepages-2048kB/enabled" 2>/dev/null; then
	pid=$(sed -n 's/^pid = //p' "$MNT/.nvmefs/config")
	check "the io_uring payloads may be huge pages" grep -q '^THPeligible: *1' "/proc/$pid/smaps"
	echo "the daemon's huge pages: $(awk '/^AnonHugePages/ {k += $2} END {print k + 0}' \
		"/proc/$pid/smaps") KiB"
fi
head -c $((3 << 20)) /dev/urandom >"$MNT_TMP/data"
cp "$MNT_TMP/data" "$MNT/data"
for i in $(seq 1 50); do echo "file $i" >"$MNT/small.$i"; done
check "a file reads back through the queues" cmp "$MNT_TMP/data" "$MNT/data"
check "small files read back" test "$(cat "$MNT/small.17")" = "file 17"
check "requests came through the queues" \
	test "$(jq .transport.uring_requests "$MNT/.nvmefs/stats")" -gt 100
check "nvmefs-stat names the transport" sh -c "'$build/nvmefs-stat' '$MNT' | grep -q 'transport: io_uring'"
# FORGETs, the only requests still read from /dev/fuse with INTERRUPTs, are
# gathered (nvmefs_uring_gather: the leader sleeps 1 ms before each wait):
# 2,000 unlinks one after another, each inode's FORGET sent as it goes,
# arrive in BATCH_FORGETs, at most about one a millisecond of the loop (50
# more for slack), not one request each (the leader used to poll
# /dev/fuse and read each alone: 1,823 of 2,000, in about 100 ms).
forgets() {
	jq '(.requests.FORGET // 0) + (.requests.BATCH_FORGET // 0)' "$MNT/.nvmefs/stats"
}
if command -v python3 >/dev/null; then
	python3 -c '
import os, sys
d = sys.argv[1]
os.mkdir(d)
for i in range(2000):
    with open("%s/f%d" % (d, i), "wb") as f: f.write(b"x")' "$MNT/gone"
	f0=$(forgets)
	ms=$(python3 -c '
import os, sys, time
d = sys.argv[1]
t = time.monotonic()
for i in range(2000): os.unlink("%s/f%d" % (d, i))
os.rmdir(d)
print(int((time.monotonic() - t) * 1000))' "$MNT/gone")
	sleep 0.5 # the last gathering
	f1=$(forgets)
	check "2,000 unlinks' FORGETs come in at most $((ms + 50)) requests, ${ms} ms of unlinks ($((f1 - f0)))" \
		test $((f1 - f0)) -le $((ms + 50))
	check "... and they came" test $((f1 - f0)) -ge 1
fi
# Where a queue's threads run (uring.c): on their CPU for a lone caller,
# anywhere for a stream. Everything from one CPU (the first this test may
# use), so that only its queue sees requests.
cpu=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')
spread() { jq .transport.spread_queues "$MNT/.nvmefs/stats"; }
lone() { # 2,000 stats of absent names, one at a time, from $cpu
	taskset -c "$cpu" python3 -c '
import os, sys
for i in range(2000):
    try: os.stat("%s/absent.%d" % (sys.argv[1], i))
    except FileNotFoundError: pass' "$MNT"
}
if command -v fio >/dev/null && command -v python3 >/dev/null && [ "$(nproc)" -ge 2 ]; then
	# At home or spread only: no queue led away (below).
	mnt_umount
	mnt_mount uring,cpu_latency=off
	lone
	check "a lone caller's queue stays on its CPU" test "$(spread)" = 0
	taskset -c "$cpu" fio --filename="$MNT/data" --size=3M --runtime=2 --time_based \
		--name=s --rw=randread --bs=4k --ioengine=libaio --iodepth=32 --direct=1 \
		--output=/dev/null
	check "a stream of requests spreads its queue" test "$(spread)" = 1
	check "nvmefs-stat shows the spread queue" \
		sh -c "'$build/nvmefs-stat' '$MNT' | grep -q '(1 spread over the CPUs)'"
	lone
	check "a lone caller again: the queue is back on its CPU" test "$(spread)" = 0
	mnt_umount
	mnt_mount uring
fi
# Polling from another CPU (uring.c): while the daemon keeps idle CPUs
# awake (cpu_latency=0, the default, as root), a lone caller's queue that
# reads nothing from the devices and moves little data is led from
# another CPU, polling; one whose requests read the devices or write
# 1 MiB at a time is back on its CPU at once; with cpu_latency=off, never.
# On a fresh mount, every request from $cpu (jq's too), so that the other
# queues see none and stay home: the counts are that one queue's.
away() { taskset -c "$cpu" jq .transport.away_queues "$MNT/.nvmefs/stats"; }
polled() { taskset -c "$cpu" jq .transport.polled_waits "$MNT/.nvmefs/stats"; }
if command -v fio >/dev/null && command -v python3 >/dev/null && [ "$(nproc)" -ge 2 ] &&
	[ -w /dev/cpu_dma_latency ]; then
	mnt_umount
	mnt_mount uring
	lone
	check "a lone caller's lookups: its queue is led from another CPU" test "$(away)" = 1
	p0=$(polled)
	lone
	check "... whose leader finds them by polling ($(($(polled) - p0)) waits of 2000)" \
		test $(($(polled) - p0)) -ge 200
	check "nvmefs-stat shows the queue away" \
		taskset -c "$cpu" sh -c "'$build/nvmefs-stat' '$MNT' | grep -q '^  1 led from another CPU'"
	iw0=$(taskset -c "$cpu" jq .transport.idle_waits "$MNT/.nvmefs/stats")
	lone
	check "a queue led away makes no idle waits" \
		test "$(taskset -c "$cpu" jq .transport.idle_waits "$MNT/.nvmefs/stats")" = "$iw0"
	# 768 reads of 4 KiB (3 MiB): the device reads' rule, not the data's.
	taskset -c "$cpu" fio --filename="$MNT/data" --size=3M --name=r --rw=randread --bs=4k \
		--ioengine=psync --direct=1 --output=/dev/null
	check "a lone caller's 4 KiB reads of the devices: its queue is back on its CPU" \
		test "$(away)" = 0
	lone
	check "lookups again: led from another CPU again" test "$(away)" = 1
	taskset -c "$cpu" fio --filename="$MNT/data" --size=3M --name=r --rw=randread --bs=1M \
		--ioengine=psync --direct=1 --loops=40 --output=/dev/null
	check "a lone caller's 1 MiB reads: its queue is back on its CPU" test "$(away)" = 0
	lone
	check "and led from another CPU again" test "$(away)" = 1
	taskset -c "$cpu" fio --filename="$MNT/wdata" --size=3M --name=w --rw=write --bs=1M \
		--ioengine=psync --direct=1 --loops=4 --output=/dev/null
	check "a lone caller's 1 MiB writes: its queue is back on its CPU" test "$(away)" = 0
	mnt_umount
	mnt_mount uring,cpu_latency=off
	lone
	check "cpu_latency=off: no queue led from another CPU" test "$(away)" = 0
	check "cpu_latency=off: nothing found by polling" test "$(polled)" = 0
	mnt_umount
	mnt_mount uring
fi
# Read-ahead (fs/core/prefetch.c) on io_uring: a READ is read in place,
# into the payload it is answered from, and a window's bytes would be
# copied there. A reader with READs of its own in flight (fio sending 16
# at a time, as DeepSpeed's aio handle sends a batch) keeps the devices
# busy without windows and gets none but at its start; a lone sequential
# reader (dd) is still read ahead.
if command -v fio >/dev/null; then
	reads() { jq '.requests.READ // 0' "$MNT/.nvmefs/stats"; } # none yet: absent
	windows() { jq ".data.prefetch_$1" "$MNT/.nvmefs/stats"; }
	head -c $((32 << 20)) /dev/urandom >"$MNT/seq"
	r0=$(reads) w0=$(windows reads)
	fio --filename="$MNT/seq" --size=32M --name=q --rw=read --bs=1M --ioengine=libaio \
		--iodepth=16 --iodepth_batch_submit=16 --iodepth_batch_complete_min=16 \
		--direct=1 --loops=4 --output=/dev/null
	r=$(($(reads) - r0)) w=$(($(windows reads) - w0))
	echo "fio at QD16: $r READs, $w windows read ahead"
	check "a reader with READs in flight is not read ahead" test $((w * 4)) -lt "$r"
	r0=$(reads) h0=$(windows hits)
	dd if="$MNT/seq" of=/dev/null bs=1M status=none
	r=$(($(reads) - r0)) h=$(($(windows hits) - h0))
	echo "dd: $r READs, $h answered from windows"
	check "a lone sequential reader is read ahead" test $((h * 2)) -gt "$r"
fi
# Where the caller wakes (uring.c): a leader with nothing in flight waits
# as SCHED_IDLE (ps: class IDL) and is back to SCHED_OTHER when it serves;
# -o uring_idle_wait=0, never. Not while no CPU is idle (loadavg), nor,
# for a while, once the thread waited too long to run (its run delay).
# Only at home: with cpu_latency=off, so that no queue is led away.
mnt_umount
mnt_mount uring,cpu_latency=off
idle_waits() { jq .transport.idle_waits "$MNT/.nvmefs/stats"; }
idle_backoffs() { jq .transport.idle_backoffs "$MNT/.nvmefs/stats"; }
idle_threads() { # queue threads of the daemon now in SCHED_IDLE
	ps -L -o cls=,comm= -p "$(sed -n 's/^pid = //p' "$MNT/.nvmefs/config")" |
		awk '$2 ~ /^nvmefs-q/ && $1 == "IDL"' | wc -l
}
busy_loops() { # N [CPU]: busy loops (all CPUs, or pinned to CPU), in hogs
	local pin=()
	[ -z "${2:-}" ] || pin=(taskset -c "$2")
	for _ in $(seq "$1"); do
		"${pin[@]}" sh -c 'while :; do :; done' &
		hogs+=($!)
	done
	sleep 0.2 # past the gate's 50 ms
}
stop_busy_loops() {
	kill "${hogs[@]}"
	wait "${hogs[@]}" 2>/dev/null || true
	hogs=()
}
check "the queues wait at idle priority by default" \
	grep -qx "uring_idle_wait = 1" "$MNT/.nvmefs/config"
if command -v python3 >/dev/null && command -v taskset >/dev/null; then
	# A busy loop on every CPU online (the gate counts them all) closes
	# the gate: fewer threads runnable than CPUs.
	busy_loops "$(getconf _NPROCESSORS_ONLN)"
	before=$(idle_waits)
	lone
	check "no idle wait while every CPU is busy" test "$(idle_waits)" = "$before"
	stop_busy_loops
	mnt_umount
	# Both checks of the CPUs skipped (NVMEFS_TEST_URING_IDLE=always), so
	# that a busy machine cannot close them.
	NVMEFS_TEST_URING_IDLE=always mnt_mount uring,cpu_latency=off
	before=$(idle_waits)
	lone
	check "a lone caller's lookups end in idle waits" test $(($(idle_waits) - before)) -ge 1000
	sleep 0.2
	check "an idle queue's leader is SCHED_IDLE" test "$(idle_threads)" -ge 1
	mnt_umount
	# Busy loops of the caller's own scheduling group on the caller's
	# CPU (the daemon runs in the foreground, in this session, since
	# MNT_FOREGROUND above): a new request waits behind them for a
	# SCHED_IDLE leader (2.7 ms a lookup with one, measured), so the
	# thread stops its idle waits once 8 in a row took too long (how many
	# it makes before depends on how often the loops win the CPU).
	NVMEFS_TEST_URING_IDLE=noload mnt_mount uring,cpu_latency=off
	busy_loops 2 "$cpu"
	before=$(idle_waits)
	lone
	stop_busy_loops
	echo "idle waits beside busy loops: $(($(idle_waits) - before)), back-offs: $(idle_backoffs)"
	check "slow wake-ups stop the idle waits" test "$(idle_backoffs)" -ge 1
	mnt_umount
	NVMEFS_TEST_URING_IDLE=always mnt_mount uring,uring_idle_wait=0,cpu_latency=off
	check "uring_idle_wait=0 shows in .nvmefs/config" \
		grep -qx "uring_idle_wait = 0" "$MNT/.nvmefs/config"
	lone
	check "uring_idle_wait=0: no idle wait" test "$(idle_waits)" = 0
	check "uring_idle_wait=0: no thread at idle priority" test "$(idle_threads)" = 0
fi
mnt_umount
check "fsck clean after the io_uring mount" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"

# The default transport of each mode (fs_i.h nvmefs_uring_default), with
# the idle CPUs kept awake (cpu_latency's default) and without, and
# nouring, with enable_uring on.
# The daemon may keep idle CPUs awake where it can open /dev/cpu_dma_latency.
awake_default=io_uring
[ -w /dev/cpu_dma_latency ] && awake_default=/dev/fuse
for m in direct:$awake_default cached:/dev/fuse direct,cpu_latency=off:io_uring \
	direct,cpu_latency=5:io_uring cached,cpu_latency=off:/dev/fuse direct,nouring:/dev/fuse \
	cached,uring=auto:io_uring; do
	mnt_mount "mode=${m%%:*}"
	check "mode=${m%%:*} with enable_uring on serves ${m#*:}" test "$(transport)" = "${m#*:}"
	mnt_umount
done
# Offered, but io_uring_setup(2) refused (kernel.io_uring_disabled=2, an
# administrator's choice): the default falls back with one line. The
# switch is the whole machine's: on for one mount only.
if [ -w "$sysctl" ]; then
	echo 2 >"$sysctl"
	lines=$(grep -c 'cannot be set up' "$MNT_TMP/nvmefs.log" || true)
	mnt_mount mode=direct,cpu_latency=off
	check "io_uring refused by the kernel: direct mode's default serves /dev/fuse" \
		test "$(transport)" = /dev/fuse
	check "... and says so in one line" \
		test "$(grep -c 'cannot be set up' "$MNT_TMP/nvmefs.log")" = $((lines + 1))
	mnt_umount
	# -o uring is refused before the daemon forks: a failing exit status
	# and the reason on the terminal, nothing mounted.
	start=$SECONDS
	if "$build/nvmefs" "$MNT_DEVS" "$MNT" -o uring >"$MNT_TMP/refuse2.log" 2>&1; then
		check "-o uring with io_uring_setup refused fails" false
		mnt_umount
	fi
	check "... at once, saying why" grep -q "io_uring_setup" "$MNT_TMP/refuse2.log"
	check "... in $((SECONDS - start)) s, nothing mounted" \
		sh -c "[ $((SECONDS - start)) -le 5 ] && ! mountpoint -q '$MNT'"
	echo "$sysctl_was" >"$sysctl"
fi

# Device blocks fill the ring while replies are handed over.
if command -v fio >/dev/null; then
	export NVMEFS_TEST_URING_SMALL_RING=1
	mnt_mount uring
	unset NVMEFS_TEST_URING_SMALL_RING
	cp "$MNT_TMP/data" "$MNT/data"
	fio --filename="$MNT/data" --size=3M --runtime=3 --time_based --output-format=terse \
		--name=a --rw=randread --bs=1M --ioengine=libaio --iodepth=32 --direct=1 \
		--name=b --rw=randread --bs=3000 --ioengine=psync --numjobs=2 \
		>"$MNT_TMP/fio.out" 2>&1 || true
	check "a full ring: fio's reads succeeded" test "$(grep -c '^3;' "$MNT_TMP/fio.out")" = 3
	check "a full ring: the file reads back" cmp "$MNT_TMP/data" "$MNT/data"
	check "a full ring: no queue failed" sh -c "! grep -q 'stopping the mount' '$MNT_TMP/nvmefs.log'"
	mnt_umount
fi

# Refused after INIT: the mount must end, not hang.
NVMEFS_TEST_URING_SHORT_PAYLOAD=1 "$build/nvmefs" "$MNT_DEVS" "$MNT" -o uring -f \
	</dev/null >>"$MNT_TMP/nvmefs.log" 2>&1 &
pid=$!
for _ in $(seq 1 50); do
	mountpoint -q "$MNT" || ! kill -0 "$pid" 2>/dev/null && break
	sleep 0.1
done
start=$SECONDS
timeout 20 stat "$MNT/data" >/dev/null 2>&1 || true
check "a refused queue does not hang the mount (stat returned in $((SECONDS - start)) s)" \
	test $((SECONDS - start)) -le 10
for _ in $(seq 1 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
check "the daemon unmounted after its queue was refused" sh -c "! mountpoint -q '$MNT'"
check "the daemon exited" sh -c "! kill -0 $pid 2>/dev/null"
check "the daemon said why" grep -q "the kernel refused an entry" "$MNT_TMP/nvmefs.log"
check "fsck clean after the refused mount" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_result
