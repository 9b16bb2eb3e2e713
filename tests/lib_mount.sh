# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Helpers for the tests that run ordinary programs on a mounted nvmefs volume;
# source it from a bash script that runs under `set -euo pipefail`.
#
#   mnt_time_limit SECONDS "$0" "$@"   re-run the calling script under
#       timeout(1) (once); on expiry the script gets SIGTERM, says so, and its
#       EXIT trap still unmounts and removes everything (a watchdog process
#       SIGKILLs the daemon if the script is stuck in a FUSE request the
#       daemon does not answer). NVMEFS_TEST_TIME_LIMIT overrides SECONDS.
#   mnt_setup BUILD [NDEVS [SIZE [MKFS_ARGS...]]]   skip (exit 77) unless root,
#       /dev/fuse, fusermount3 and BUILD/{nvmefs,mkfs.nvmefs} are there; make
#       $MNT_TMP (a scratch directory for the test's own files, outside the
#       volume), NDEVS (4) sparse image files of SIZE (512M) each, in /dev/shm
#       when it has room and takes O_DIRECT, else in $MNT_TMP, run
#       mkfs.nvmefs MKFS_ARGS... on them, and make the mount point $MNT. Sets
#       $MNT_DEVS (the images, comma-joined) and the array MNT_DEV_LIST. An
#       EXIT trap always unmounts (fusermount3 -u; if the daemon does not
#       answer or that fails, SIGKILL to the daemon, which aborts the FUSE
#       connection, then a lazy unmount), kills a leftover daemon (SIGKILL
#       if it must) and removes the images and directories.
#   mnt_mount [OPTS]    nvmefs $MNT_DEVS $MNT [-o OPTS]; waits for the mount.
#                       With NVMEFS_TEST_TRANSPORT=uring, -o uring is added
#                       (FUSE over io_uring; its enable_uring must be on);
#                       with NVMEFS_TEST_TRANSPORT=fuse, -o nouring.
#                       The daemon is $MNT_BUILD/$MNT_DAEMON: nvmefs, or set
#                       MNT_DAEMON=tests/nvmefs-fi (the test-only build with
#                       fault injection, docs/RELIABILITY.md) before it.
#                       With MNT_FOREGROUND=1 the daemon runs with -f in the
#                       background, its log (stderr) in $MNT_TMP/nvmefs.log.
#   mnt_umount          fusermount3 -u, then waits for the daemon to exit (so
#                       everything it had is on the images): fails after 30 s.
#   mnt_remount [OPTS]  both.
#   check MESSAGE CMD...   run CMD; if it fails print "FAIL: MESSAGE", go on.
#   mnt_result          "all checks passed" and exit 0, or exit 1.
#   mnt_need CMD [PKG]  skip (exit 77) naming CMD when it is not installed.
#   mnt_direct_mmap     true when direct_io files can be mapped shared (6.6+).
#
# No-mount mode: with NVMEFS_TEST_NO_MOUNT=1, mnt_setup makes $MNT a plain
# directory under ${TMPDIR:-/tmp} (no images, no binaries needed) and
# mnt_mount, mnt_umount and mnt_remount do nothing, so a test's expectations
# can be checked against a kernel filesystem (ext4 for /tmp, tmpfs with
# TMPDIR=/dev/shm): what fails there is the test's fault, not nvmefs's.

MNT_NO_MOUNT=0
[ "${NVMEFS_TEST_NO_MOUNT:-0}" = 1 ] && MNT_NO_MOUNT=1
MNT_BUILD=""
MNT_DAEMON=nvmefs
MNT_FOREGROUND=0
MNT_TMP=""
MNT_IMGDIR=""
MNT=""
MNT_DEVS=""
MNT_DEV_LIST=()
MNT_FAIL=0
# The daemons mnt_mount saw, as PID:START_TIME: one whose main thread is
# already a zombie (its command line gone) while other threads still exit,
# holding the images' locks, is still waited for.
MNT_DAEMONS=""
MNT_WATCHDOG=""

mnt_skip() {
	echo "SKIP: $*"
	exit 77
}

mnt_die() {
	echo "FAIL: $*" >&2
	exit 1
}

mnt_need() { # CMD [PKG]
	command -v "$1" >/dev/null || mnt_skip "$1 not installed (Debian package ${2:-$1})"
}

# True when this kernel lets a FUSE server allow shared mmap of direct_io
# files (FUSE_DIRECT_IO_ALLOW_MMAP, FUSE 7.39, Linux 6.6); before it nvmefs's
# direct mode answers MAP_SHARED with ENODEV.
mnt_direct_mmap() {
	local v maj min
	v=$(uname -r)
	maj=${v%%.*}
	min=${v#*.}
	min=${min%%[!0-9]*}
	[ "$maj" -gt 6 ] || { [ "$maj" -eq 6 ] && [ "$min" -ge 6 ]; }
}

check() { # MESSAGE CMD...
	local msg=$1
	shift
	if ! "$@"; then
		echo "FAIL: $msg" >&2
		MNT_FAIL=$((MNT_FAIL + 1))
	fi
}

mnt_result() {
	if [ "$MNT_FAIL" = 0 ]; then
		echo "all checks passed"
		exit 0
	fi
	echo "$MNT_FAIL checks failed" >&2
	exit 1
}

mnt_time_limit() { # SECONDS SCRIPT ARGS...
	local secs=${NVMEFS_TEST_TIME_LIMIT:-$1}
	shift
	[ -z "${_NVMEFS_TEST_TIMED:-}" ] || return 0
	export _NVMEFS_TEST_TIMED=$secs
	# SIGTERM to the script and its children after secs, SIGKILL 45 s later
	# if the cleanup itself hangs (the ctest TIMEOUT is 300).
	exec timeout -k 45 "$secs" "$BASH" "$@"
}

# Process PID exists and is not a zombie: some thread of it is not. (After
# SIGKILL the main thread can be a zombie while others still exit, holding the
# images' locks.)
_mnt_alive() {
	local t st
	for t in /proc/"$1"/task/*/stat; do
		st=$(cat "$t" 2>/dev/null) || continue
		st=${st##*) }
		case ${st%% *} in Z | X) ;; *) return 0 ;; esac
	done
	return 1
}

# Start time of process PID (field 22 of /proc/PID/stat).
_mnt_start_time() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	# shellcheck disable=SC2086 # split into fields
	set -- $st
	echo "${20}"
}

# PIDs of the nvmefs daemons whose command line names $MNT, or that
# mnt_mount saw, one a line.
_mnt_daemon_pids() {
	local f pid a args seen=" "
	[ -n "$MNT" ] || return 0
	for f in /proc/[0-9]*/cmdline; do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		args=()
		mapfile -d '' -t args 2>/dev/null <"$f" || continue
		if [ ${#args[@]} -lt 2 ] || [ "${args[0]##*/}" != "${MNT_DAEMON##*/}" ]; then
			continue
		fi
		for a in "${args[@]:1}"; do
			if [ "$a" = "$MNT" ] || [ "$a" = "$MNT/" ]; then
				if _mnt_alive "$pid"; then
					echo "$pid"
					seen+="$pid "
				fi
				break
			fi
		done
	done
	for a in $MNT_DAEMONS; do
		pid=${a%%:*}
		case $seen in *" $pid "*) continue ;; esac
		if [ "$(_mnt_start_time "$pid")" = "${a#*:}" ] && _mnt_alive "$pid"; then
			echo "$pid"
		fi
	done
}

# $MNT is in the mount table (also when its daemon is gone and stat fails).
_mnt_in_mountinfo() {
	[ -n "$MNT" ] && awk -v m="$MNT" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

_mnt_log_tail() {
	if [ -s "$MNT_TMP/nvmefs.log" ]; then
		echo "--- last lines of $MNT_TMP/nvmefs.log:" >&2
		tail -n 30 "$MNT_TMP/nvmefs.log" >&2
		echo "---" >&2
	fi
}

# Wait up to SECONDS for the daemons of $MNT to exit; 1 if some remain.
_mnt_wait_daemon() {
	local end=$((SECONDS + $1))
	while [ -n "$(_mnt_daemon_pids)" ]; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# SIGKILL the daemons of $MNT: that aborts the FUSE connection, so whatever
# waits for them fails (ENOTCONN) instead of hanging.
_mnt_kill_daemon() { # WHY
	local pids
	pids=$(_mnt_daemon_pids | xargs)
	[ -n "$pids" ] || return 0
	echo "$1: SIGKILL to nvmefs daemon $pids" >&2
	# shellcheck disable=SC2086 # one pid a word
	kill -KILL $pids 2>/dev/null
	_mnt_wait_daemon 10
}

# Run CMD in the background for up to SECONDS; its status, or 124 if it is
# still running (left so: a process stuck in a FUSE request may not die).
_mnt_bg() { # SECONDS CMD...
	local end=$((SECONDS + $1)) pid
	shift
	"$@" </dev/null >/dev/null 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		[ "$SECONDS" -lt "$end" ] || return 124
		sleep 0.1
	done
	wait "$pid"
}

# A process beside the script, started by mnt_setup: when SIGTERM (the time
# limit), SIGINT or SIGHUP reach the script's process group, it gives the
# script 5 s to get to its EXIT trap; a script still there is stuck in a
# request the daemon does not answer, and killing the daemon frees it.
# SIGUSR1 (from the EXIT trap) ends it.
_mnt_watchdog() { # PID
	local main=$1 fired=0 end
	set +e
	trap 'fired=1' TERM INT HUP
	trap 'exit 0' USR1
	while kill -0 "$main" 2>/dev/null; do
		if [ "$fired" = 1 ]; then
			fired=2
			end=$((SECONDS + 5))
			while kill -0 "$main" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
				sleep 0.1
			done
			! kill -0 "$main" 2>/dev/null || _mnt_kill_daemon "watchdog: test stuck"
		fi
		# Not holding the script's stdout: whoever reads it (ctest) would
		# wait for this sleep to end.
		sleep 1 >/dev/null 2>&1 &
		wait $!
	done
}

_mnt_cleanup() {
	local pids
	set +e
	[ -z "$MNT_WATCHDOG" ] || kill -USR1 "$MNT_WATCHDOG" 2>/dev/null
	if [ "$MNT_NO_MOUNT" = 0 ] && [ -n "$MNT" ]; then
		if _mnt_in_mountinfo; then
			echo "cleanup: unmounting $MNT" >&2
			# A daemon that does not answer statfs in 5 s is not going to
			# flush anything: kill it rather than hang in umount.
			_mnt_bg 5 stat -f "$MNT" || _mnt_kill_daemon "cleanup: no answer"
			if ! _mnt_bg 20 fusermount3 -u "$MNT"; then
				_mnt_kill_daemon "cleanup: fusermount3 -u failed"
				_mnt_bg 10 fusermount3 -u -z "$MNT" || _mnt_bg 10 umount -l "$MNT"
			fi
		fi
		if ! _mnt_wait_daemon 10; then
			pids=$(_mnt_daemon_pids | xargs)
			echo "cleanup: nvmefs daemon still running, SIGTERM to $pids" >&2
			# shellcheck disable=SC2086 # one pid a word
			kill -TERM $pids 2>/dev/null
			_mnt_wait_daemon 5 || _mnt_kill_daemon "cleanup: still running"
		fi
		[ -n "$MNT_IMGDIR" ] && rm -rf "$MNT_IMGDIR"
	fi
	if [ -n "$MNT_TMP" ]; then
		if _mnt_in_mountinfo; then
			echo "cleanup: $MNT still mounted, leaving $MNT_TMP" >&2
		else
			rm -rf --one-file-system "$MNT_TMP"
		fi
	fi
}

_mnt_signal() { # NAME STATUS
	echo "FAIL: got SIG$1${_NVMEFS_TEST_TIMED:+ (time limit ${_NVMEFS_TEST_TIMED} s?)}; cleaning up" >&2
	exit "$2"
}

# A new directory in /dev/shm if it has BYTES free and takes O_DIRECT, as the
# devices must (tmpfs does since Linux 6.6).
_mnt_shm_dir() { # BYTES
	local avail dir
	[ -d /dev/shm ] && [ -w /dev/shm ] || return 1
	avail=$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -n 1) || return 1
	[ "$avail" -gt "$1" ] || return 1
	dir=$(mktemp -d /dev/shm/nvmefs_img.XXXXXX) || return 1
	if ! dd if=/dev/zero of="$dir/probe" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
		rm -rf "$dir"
		return 1
	fi
	rm -f "$dir/probe"
	echo "$dir"
}

mnt_setup() { # BUILD [NDEVS [SIZE [MKFS_ARGS...]]]
	local build=${1:?mnt_setup: BUILD missing} ndevs=${2:-4} size=${3:-512M} i need
	shift $(($# < 3 ? $# : 3))
	MNT_BUILD=$build
	if [ "$MNT_NO_MOUNT" = 0 ]; then
		[ "$(id -u)" = 0 ] || mnt_skip "mounting needs root"
		[ -c /dev/fuse ] || mnt_skip "no /dev/fuse"
		mnt_need fusermount3 fuse3
		mnt_need mountpoint util-linux
		[ -x "$build/mkfs.nvmefs" ] || mnt_skip "$build/mkfs.nvmefs not built"
		[ -x "$build/nvmefs" ] || mnt_skip "$build/nvmefs not built"
	fi
	MNT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nvmefs_test.XXXXXX")
	trap _mnt_cleanup EXIT
	trap '_mnt_signal TERM 143' TERM
	trap '_mnt_signal INT 130' INT
	trap '_mnt_signal HUP 129' HUP
	MNT=$MNT_TMP/mnt
	mkdir "$MNT"
	if [ "$MNT_NO_MOUNT" = 1 ]; then
		echo "no-mount mode: $MNT is a plain $(stat -f -c %T "$MNT") directory"
		return 0
	fi
	_mnt_watchdog $$ </dev/null &
	MNT_WATCHDOG=$!

	need=$(($(numfmt --from=iec "$size") * ndevs))
	if ! MNT_IMGDIR=$(_mnt_shm_dir "$need"); then
		MNT_IMGDIR=$MNT_TMP/img
		mkdir "$MNT_IMGDIR"
	fi
	MNT_DEV_LIST=()
	for ((i = 0; i < ndevs; i++)); do
		truncate -s "$size" "$MNT_IMGDIR/d$i.img"
		MNT_DEV_LIST+=("$MNT_IMGDIR/d$i.img")
	done
	MNT_DEVS=$(
		IFS=,
		echo "${MNT_DEV_LIST[*]}"
	)
	if ! "$build/mkfs.nvmefs" "$@" "${MNT_DEV_LIST[@]}" >"$MNT_TMP/mkfs.log" 2>&1; then
		cat "$MNT_TMP/mkfs.log" >&2
		mnt_die "mkfs.nvmefs $* ${MNT_DEV_LIST[*]} failed"
	fi
	echo "volume: $ndevs x $size in $MNT_IMGDIR, mount point $MNT"
}

mnt_mount() { # [OPTS]
	local args end pid opts=${1:-}
	[ "$MNT_NO_MOUNT" = 0 ] || return 0
	args=("$MNT_DEVS" "$MNT")
	# NVMEFS_TEST_TRANSPORT=uring: every mount on FUSE over io_uring;
	# fuse: every mount on /dev/fuse.
	case "${NVMEFS_TEST_TRANSPORT:-}" in
	uring) opts=${opts:+$opts,}uring ;;
	fuse) opts=${opts:+$opts,}nouring ;;
	esac
	[ -z "$opts" ] || args+=(-o "$opts")
	# Output to a file, not a pipe: a daemon that kept the pipe open would
	# hang whoever reads it (ctest).
	echo "mount: $MNT_DAEMON ${args[*]}" >>"$MNT_TMP/nvmefs.log"
	if [ "$MNT_FOREGROUND" = 1 ]; then
		"$MNT_BUILD/$MNT_DAEMON" "${args[@]}" -f </dev/null >>"$MNT_TMP/nvmefs.log" 2>&1 &
		pid=$!
	elif ! timeout 30 "$MNT_BUILD/$MNT_DAEMON" "${args[@]}" </dev/null >>"$MNT_TMP/nvmefs.log" 2>&1; then
		_mnt_log_tail
		mnt_die "$MNT_DAEMON ${args[*]} failed"
	fi
	end=$((SECONDS + 30))
	until mountpoint -q "$MNT"; do
		if [ -n "${pid:-}" ] && ! kill -0 "$pid" 2>/dev/null; then
			_mnt_log_tail
			mnt_die "$MNT_DAEMON ${args[*]} -f exited"
		fi
		if [ "$SECONDS" -ge "$end" ]; then
			_mnt_log_tail
			mnt_die "$MNT not a mount point 30 s after nvmefs returned"
		fi
		sleep 0.1
	done
	MNT_DAEMONS=""
	for pid in $(_mnt_daemon_pids); do
		MNT_DAEMONS+=" $pid:$(_mnt_start_time "$pid" || true)"
	done
}

mnt_umount() {
	[ "$MNT_NO_MOUNT" = 0 ] || return 0
	if ! timeout 60 fusermount3 -u "$MNT"; then
		_mnt_log_tail
		mnt_die "fusermount3 -u $MNT failed"
	fi
	if ! _mnt_wait_daemon 30; then
		_mnt_log_tail
		_mnt_dump_daemons
		mnt_die "nvmefs daemon (pid $(_mnt_daemon_pids | xargs)) still running 30 s after unmounting"
	fi
}

# Where each thread of a daemon that does not exit waits (kernel wait
# channel, and the stacks when gdb is installed): a hang says where it is.
_mnt_dump_daemons() {
	local pid t c
	# Whether the kernel still has the connection (a superblock that
	# outlived the mount: another mount of it, a clone), and its waiters.
	for c in /sys/fs/fuse/connections/*; do
		[ -e "$c/waiting" ] && echo "fuse connection ${c##*/}: $(cat "$c/waiting") waiting"
	done
	grep -h ' fuse' /proc/[0-9]*/mountinfo 2>/dev/null | sort -u || true
	for pid in $(_mnt_daemon_pids); do
		for t in /proc/"$pid"/task/*; do
			echo "thread $(cat "$t/comm" 2>/dev/null): waits in $(cat "$t/wchan" 2>/dev/null)"
		done
		if command -v gdb >/dev/null; then
			timeout 30 gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null |
				grep -E '^(Thread|#)' || true
		fi
	done
}

mnt_remount() { # [OPTS]
	mnt_umount
	mnt_mount "$@"
}
