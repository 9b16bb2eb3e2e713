#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash torture: a seeded random workload (tests/torture.py: create, write,
# overwrite, append, truncate, rename over files and of directories,
# RENAME_EXCHANGE, link, unlink, mkdir, rmdir, user.* xattrs, fsync,
# fdatasync, fsyncdir, files held open and unlinked; a share of the writes
# and fsyncs through the native client, BUILD_DIR/client/libnvmefs.so) on
# one nvmefs volume (4 image files of 256M), crashed at a random moment,
# again and again on the
# SAME volume (it ages: every run keeps the directories of the two runs
# before it and deletes older ones). Iterations alternate:
#   even: kill -9 of the daemon (the normal build/nvmefs) after 0.2..3 s;
#   odd:  emulated power loss with the test-only daemon tests/nvmefs-fi:
#         "record" before the workload, then after a random delay
#         "powerloss seed=S after=N" (or at once): every device write not
#         yet flushed is kept, dropped or torn, and the daemon dies.
# The workload runs in mode=cached or mode=direct (two iterations each in
# turn), with the default commit interval or commit=1.
# After each crash: the dead mount is detached, fsck.nvmefs -n must find the
# crashed volume clean (exit 0: orphans and an unreplayed journal are not
# errors), the normal daemon mounts it (journal replay), torture.py verify
# checks it against the manifest (what nvmefs promises is in its header),
# a clean unmount, and fsck -n must be clean again. In about a quarter of
# the iterations the replayed volume is killed (-9) once more right after
# that verify, fsck'ed, mounted and must be exactly what verify saw.
# Each iteration prints its seed, what it did, the operations and syncs,
# which prefix of the operations came back, the files checked, and the
# time of each phase; a table sums them up at the end.
# The first failure stops the run and keeps the evidence (manifests, logs,
# the images as the crash left them and as they are now) in a directory it
# prints, /tmp/nvmefs-torture-fail.XXXXXX.
#
# usage: scripts/crash-torture.sh BUILD_DIR [ITERATIONS [SEED]]
#   NVMEFS_META_CROSSCHECK=1 (set by ctest for test_torture): the daemons
#   keep format v2's keys beside the maps and compare them at every commit
#   (docs/FORMAT.md, "Crosschecks"); a difference fails the run.
#   ITERATIONS: default 20. SEED: default random; each iteration derives its
#   own (printed) seed from it. The moment of a kill -9 is wall-clock time,
#   so a rerun repeats the operations and the choices, not every crash
#   point. NVMEFS_TEST_TIME_LIMIT overrides the time limit (60 + 24 s per
#   iteration). Exit 77 (skip) without root, /dev/fuse, setfattr or the
#   binaries (nvmefs, mkfs.nvmefs, fsck.nvmefs, tests/nvmefs-fi,
#   client/libnvmefs.so).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../tests/lib_mount.sh source-path=SCRIPTDIR
. "$top/tests/lib_mount.sh"

usage() {
	echo "usage: crash-torture.sh BUILD_DIR [ITERATIONS [SEED]]" >&2
	exit 2
}
if [ $# -lt 1 ] || [ $# -gt 3 ] || [ ! -d "$1" ]; then
	usage
fi
build=$(cd "$1" && pwd)
iters=${2:-20}
# The seed survives mnt_time_limit's re-exec.
export _NVMEFS_TORTURE_SEED=${3:-${_NVMEFS_TORTURE_SEED:-$((RANDOM * 32768 + RANDOM))}}
seed=$_NVMEFS_TORTURE_SEED
if ! [[ $iters =~ ^[0-9]+$ && $seed =~ ^[0-9]+$ ]]; then
	usage
fi
mnt_time_limit $((60 + 24 * iters)) "$0" "$@"

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || echo python3)
mnt_need "$py" python3
mnt_need setfattr attr
for b in fsck.nvmefs tests/nvmefs-fi client/libnvmefs.so; do
	[ -x "$build/$b" ] || mnt_skip "$build/$b not built"
done
torture=$top/tests/torture.py
lib=$build/client/libnvmefs.so
mnt_setup "$build" 4 256M
cmd="scripts/crash-torture.sh $build $iters $seed"
echo "seed $seed, $iters iterations (repeat with: $cmd)"

log=$MNT_TMP/nvmefs.log
mdir=$MNT_TMP/manifests
ldir=$MNT_TMP/logs
crashed=$MNT_IMGDIR/crashed
mkdir -p "$mdir" "$ldir" "$crashed"
: >"$log"
dpid=""
it=0 iseed=0 kind="" opts="" man="" wlog=""

# Stop with the evidence in a directory that survives the cleanup.
fail() {
	local dir f
	echo "FAIL: iteration $it ($kind, $opts, iteration seed $iseed): $*" >&2
	dir=$(mktemp -d /tmp/nvmefs-torture-fail.XXXXXX)
	{
		echo "crash-torture failure: $*"
		echo "run: $cmd"
		echo "iteration $it of $iters: $kind, mount options $opts, iteration seed $iseed"
		echo "workload alone: $py tests/torture.py run ROOT MANIFEST $iseed $lib"
		echo "check again:    $py tests/torture.py verify MOUNTPOINT manifests/$(basename "$man")"
		echo "images/crashed: the members as the crash left them (before fsck and replay);"
		echo "images/now: as they are at the failure. Mount a copy: build/nvmefs d0.img,d1.img,d2.img,d3.img MNT"
	} >"$dir/README"
	# The snapshots of every iteration, the manifests of the last three.
	mkdir "$dir/manifests"
	cp -a "$mdir"/*.snap* "$dir/manifests/" 2>/dev/null || true
	for f in $(find "$mdir" -name '*.manifest' | sort | tail -n 3); do
		cp -a "$f" "$dir/manifests/"
	done
	cp -a "$ldir" "$dir/logs"
	cp "$log" "$dir/nvmefs.log"
	tail -n 60 "$log" >"$dir/nvmefs.log.tail"
	mkdir -p "$dir/images/crashed" "$dir/images/now"
	for f in "$crashed"/*.img; do
		[ -e "$f" ] && cp --sparse=always "$f" "$dir/images/crashed/"
	done
	if [ -n "$(_mnt_daemon_pids)" ]; then
		timeout 60 fusermount3 -u "$MNT" 2>/dev/null || _mnt_kill_daemon "failure"
		_mnt_wait_daemon 30 || true
	fi
	for f in "${MNT_DEV_LIST[@]}"; do
		cp --sparse=always "$f" "$dir/images/now/"
	done
	echo "--- last lines of the daemon log:" >&2
	tail -n 30 "$log" >&2
	echo "---" >&2
	echo "FAIL: evidence kept in $dir (reproduce: $cmd)" >&2
	exit 1
}

# Mount with DAEMON (nvmefs or tests/nvmefs-fi) in the foreground (-f),
# started in the background, so that its log goes to $log (a daemonized one
# logs to syslog). A subshell waits for it and writes its exit status to
# $status (and bash's "Killed" to the log, not to the terminal).
status=$MNT_TMP/daemon.status
tt_mount() { # DAEMON OPTS
	local end
	MNT_DAEMON=$1
	echo "== iteration $it: mount: $MNT_DAEMON -o $2 ($(date +%T.%N))" >>"$log"
	rm -f "$status"
	(
		rc=0
		"$MNT_BUILD/$MNT_DAEMON" "$MNT_DEVS" "$MNT" -f -o "$2" </dev/null >>"$log" 2>&1 || rc=$?
		echo "$rc" >"$status"
	) 2>>"$log" &
	wrapper=$!
	end=$((SECONDS + 60))
	until mountpoint -q "$MNT"; do
		[ ! -e "$status" ] || fail "$MNT_DAEMON -o $2 did not mount (exit status $(cat "$status"))"
		[ "$SECONDS" -lt "$end" ] || fail "$MNT not a mount point 60 s after starting $MNT_DAEMON"
		sleep 0.05
	done
	dpid=$(_mnt_daemon_pids | xargs)
	[ -n "$dpid" ] || fail "mounted, but no $MNT_DAEMON process"
	# For lib_mount.sh's cleanup: the daemon also while its main thread is
	# a zombie.
	# shellcheck disable=SC2034
	MNT_DAEMONS=" $dpid:$(_mnt_start_time "$dpid" || true)"
}

# Wait for the subshell that waits for the daemon; the daemon's status in
# $dstatus.
tt_reap() {
	wait "$wrapper" || true
	dstatus=$(cat "$status" 2>/dev/null || echo "?")
}

# Clean unmount: the daemon must exit with status 0.
tt_umount() {
	timeout 60 fusermount3 -u "$MNT" || fail "fusermount3 -u $MNT failed"
	_mnt_wait_daemon 60 || fail "the daemon still runs 60 s after unmounting"
	tt_reap
	[ "$dstatus" = 0 ] || fail "the daemon exited with status $dstatus after a clean unmount"
	echo "== iteration $it: unmounted ($(date +%T.%N))" >>"$log"
}

# After the crash: the daemon is gone; detach the dead mount.
tt_detach() {
	_mnt_wait_daemon 20 || fail "the daemon still runs after the crash"
	if _mnt_in_mountinfo; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null ||
			umount -l "$MNT" || fail "cannot detach the dead mount $MNT"
	fi
	tt_reap
	echo "== iteration $it: daemon gone (status $dstatus), detached ($(date +%T.%N))" >>"$log"
}

tt_fsck() { # WHEN
	local rc=0 out
	out=$ldir/$(printf %03d "$it").fsck-$1
	"$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}" >"$out" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		cat "$out" >&2
		fail "fsck.nvmefs -n $1 exited with status $rc"
	fi
}

# Phase timing: lap NAME adds "NAME SECONDS" (since the last lap) to $laps.
lap() {
	local now=${EPOCHREALTIME/,/.}
	laps+=" $1 $(awk -v a="$lap_t" -v b="$now" 'BEGIN { printf "%.1f", b - a }')"
	lap_t=$now
}

sleep_ms() {
	sleep "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"
}

# FIELD of the last verify's TORTURE-STATS line ($stats).
get() {
	sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$stats"
}

declare -A n_it=() n_ops=() n_syncs=() n_files=() n_exact=() n_old=() n_nw=() n_ns=()
for k in kill power; do
	n_it[$k]=0 n_ops[$k]=0 n_syncs[$k]=0 n_files[$k]=0 n_exact[$k]=0 n_old[$k]=0
	n_nw[$k]=0 n_ns[$k]=0
done
n_nopower=0 n_early=0 n_double=0 n_prefix_short=0 n_native_stop=0
t_start=$SECONDS

for ((it = 0; it < iters; it++)); do
	# 46 bits from the run's seed and the iteration number.
	iseed=$((((seed * 6364136223846793005 + (it + 1) * 1442695040888963407) >> 7) & 0x3fffffffffff))
	RANDOM=$((iseed % 1000000007))
	if [ $((it % 2)) = 0 ]; then
		kind=kill daemon=nvmefs
	else
		kind=power daemon=tests/nvmefs-fi
	fi
	opts=mode=$([ $((it / 2 % 2)) = 0 ] && echo cached || echo direct)
	[ $((RANDOM % 3)) != 0 ] || opts+=,commit=1
	double=$((RANDOM % 4 == 0 ? 1 : 0))
	man=$mdir/$(printf %03d "$it").manifest
	wlog=$ldir/$(printf %03d "$it").run
	vlog=$ldir/$(printf %03d "$it").verify
	t0=$SECONDS
	laps="" lap_t=${EPOCHREALTIME/,/.}

	tt_mount "$daemon" "$opts"
	if [ "$kind" = power ]; then
		setfattr -n trusted.nvmefs.fault -v record "$MNT" || fail "setfattr record failed"
	fi
	lap mount
	"$py" "$torture" run "$MNT" "$man" "$iseed" "$lib" >"$wlog" 2>&1 &
	wpid=$!
	if [ "$kind" = kill ]; then
		delay=$((200 + RANDOM % 2801))
		what="kill -9 after $delay ms"
		sleep_ms "$delay"
		kill -0 "$wpid" 2>/dev/null || n_early=$((n_early + 1))
		pids=$(_mnt_daemon_pids | xargs)
		[ -n "$pids" ] || fail "no daemon to kill"
		# shellcheck disable=SC2086 # one pid a word
		kill -KILL $pids
	else
		delay=$((RANDOM % 2001))
		pseed=$((RANDOM * 32768 + RANDOM))
		if [ $((RANDOM % 4)) = 0 ]; then
			cmdv="powerloss seed=$pseed"
		else
			cmdv="powerloss seed=$pseed after=$((RANDOM % 2000))"
		fi
		what="$cmdv after $delay ms"
		sleep_ms "$delay"
		kill -0 "$wpid" 2>/dev/null || n_early=$((n_early + 1))
		echo "== iteration $it: setfattr $cmdv ($(date +%T.%N))" >>"$log"
		if ! err=$(timeout 30 setfattr -n trusted.nvmefs.fault -v "$cmdv" "$MNT" 2>&1); then
			case $err in
			*"not connected"* | *"connection abort"*) ;;
			*) fail "setfattr $cmdv: $err" ;;
			esac
		fi
		if ! _mnt_wait_daemon 20; then
			n_nopower=$((n_nopower + 1))
			what+=" (no power loss in 20 s: killed)"
			echo "iteration $it: the power loss did not happen in 20 s; kill -9 instead" >&2
			_mnt_kill_daemon "no power loss"
		fi
	fi
	# The workload stops on the dead mount's errors.
	end=$((SECONDS + 20))
	while kill -0 "$wpid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
		sleep 0.05
	done
	if kill -0 "$wpid" 2>/dev/null; then
		kill -KILL "$wpid"
		wait "$wpid" || true
		fail "the workload still runs 20 s after the crash"
	fi
	wrc=0
	wait "$wpid" || wrc=$?
	[ "$wrc" = 0 ] || {
		cat "$wlog" >&2
		fail "the workload exited with status $wrc"
	}
	# The crash met the workload in a native call (the connection dropped).
	! grep -q '^run: stopped by [A-Z]* (native:' "$wlog" || n_native_stop=$((n_native_stop + 1))
	lap crash
	tt_detach
	for f in "${MNT_DEV_LIST[@]}"; do
		cp --sparse=always "$f" "$crashed/"
	done
	lap detach
	tt_fsck crashed
	lap fsck
	tt_mount nvmefs mode=cached
	lap replay
	vrc=0
	"$py" "$torture" verify "$MNT" "$man" >"$vlog" 2>&1 || vrc=$?
	if [ "$vrc" != 0 ]; then
		cat "$vlog" >&2
		fail "verify found the recovered volume wrong (status $vrc)"
	fi
	lap verify
	if [ "$double" = 1 ]; then
		# Crash the replayed volume too: it must come back exactly as the
		# verify saw it (the directory against the snapshot verify wrote).
		pids=$(_mnt_daemon_pids | xargs)
		# shellcheck disable=SC2086 # one pid a word
		kill -KILL $pids
		tt_detach
		tt_fsck recrashed
		tt_mount nvmefs mode=cached
		vrc=0
		"$py" "$torture" verify "$MNT" "$man" >"$vlog.2" 2>&1 || vrc=$?
		if [ "$vrc" != 0 ]; then
			cat "$vlog.2" >&2
			fail "after a kill -9 of the replayed volume, verify found it wrong (status $vrc)"
		fi
		what+="; the replayed volume killed again"
		n_double=$((n_double + 1))
		lap again
	fi
	tt_umount
	lap umount
	tt_fsck unmounted
	lap fsck
	# With NVMEFS_META_CROSSCHECK=1 a daemon that finds its shadow store
	# and its maps apart logs it and aborts, which looks like a crash here.
	! grep -q 'metadata crosscheck' "$log" || fail "a daemon's metadata crosscheck failed"

	stats=$(grep '^TORTURE-STATS ' "$vlog")
	n_it[$kind]=$((n_it[$kind] + 1))
	n_ops[$kind]=$((n_ops[$kind] + $(get 'done')))
	n_syncs[$kind]=$((n_syncs[$kind] + $(get syncs)))
	n_files[$kind]=$((n_files[$kind] + $(get files)))
	n_exact[$kind]=$((n_exact[$kind] + $(get exact)))
	n_old[$kind]=$((n_old[$kind] + $(get old)))
	n_nw[$kind]=$((n_nw[$kind] + $(get native_writes)))
	n_ns[$kind]=$((n_ns[$kind] + $(get native_syncs)))
	[ "$(get nsmax)" -ge "$(get 'done')" ] || n_prefix_short=$((n_prefix_short + 1))
	printf 'iteration %d: seed %d, %s, %s, %s; %s ops (%s syncs; native: %s writes, %s fsyncs), recovered the state after %s..%s (last sync #%s); %s files checked (%s fsynced exactly, %s earlier); slowest op %s ms; %d s:%s\n' \
		"$it" "$iseed" "$kind" "$opts" "$what" "$(get 'done')" "$(get syncs)" "$(get native_writes)" \
		"$(get native_syncs)" "$(get prefix)" "$(get nsmax)" \
		"$(($(get lo) - 1))" "$(($(get files) + $(get old)))" "$(get exact)" "$(get old)" "$(get slowms)" \
		$((SECONDS - t0)) "$laps"
done

row() { # NAME KIND...
	local name=$1 k a=0 b=0 c=0 d=0 e=0 f=0 g=0 h=0
	shift
	for k; do
		a=$((a + n_it[$k])) b=$((b + n_ops[$k])) c=$((c + n_syncs[$k]))
		d=$((d + n_files[$k])) e=$((e + n_exact[$k])) f=$((f + n_old[$k]))
		g=$((g + n_nw[$k])) h=$((h + n_ns[$k]))
	done
	printf '%-11s %10d %10d %8d %13d %12d %14d %14d %16d %9d\n' "$name" $a $b $c $g $h $d $e $f 0
}
echo
printf '%-11s %10s %10s %8s %13s %12s %14s %14s %16s %9s\n' "crash" iterations operations syncs \
	"native writes" "native syncs" "files verified" "fsynced exact" "earlier rechecked" failures
row "kill -9" kill
row "power loss" power
row total kill power
echo "($n_prefix_short iterations recovered fewer operations than had completed; $n_double" \
	"replayed volumes were killed again and came back the same; in $n_early the" \
	"workload had stopped before the crash, in $n_native_stop it stopped in a native call;" \
	"$n_nopower power losses did not happen and were" \
	"kills; $((SECONDS - t_start)) s)"
echo "seed $seed: all $iters iterations passed"
