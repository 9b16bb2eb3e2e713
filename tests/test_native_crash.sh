#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Native writes are durable like the mount's (issue 21): what libnvmefs
# writes completed and an fsync covered (nvmefs_fsync, or fsync(2) through
# the mount) survives the daemon's death. On 4 image files of 256M mounted
# with commit=3600 (so only a sync makes anything durable), four rounds, each
# in a directory of its own: cached and direct mode, each crashed by kill -9
# of nvmefs and by an emulated power loss of tests/nvmefs-fi that drops
# every device write not yet flushed (keep=0 tear=0, so also the data of a
# sync that did not flush). tests/test_native_crash.py writes files through
# the native client (aligned and not, shared buffer, ordinary memory, a
# batch) and through the mount, syncs them with nvmefs_fsync, and stays
# attached while the daemon dies. After each crash: fsck.nvmefs -n clean,
# a remount (journal replay), every file there with its size and sha256,
# a clean unmount and fsck -n clean again.
# usage: test_native_crash.sh BUILD_DIR
#   Exit 77 (skip) without root, /dev/fuse, setfattr, python3 or the binaries.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# != 1 ]; then
	echo "usage: test_native_crash.sh BUILD_DIR" >&2
	exit 2
fi
build=$(cd "$1" && pwd)
mnt_time_limit 180 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_need setfattr attr
for b in fsck.nvmefs tests/nvmefs-fi client/libnvmefs.so; do
	[ -x "$build/$b" ] || mnt_skip "$build/$b not built"
done
mnt_setup "$build" 4 256M
# In the foreground: its log in $MNT_TMP/nvmefs.log, and no daemon left
# behind by a failed start.
MNT_FOREGROUND=1

fsck_clean() { # WHEN
	local rc=0
	"$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}" >"$MNT_TMP/fsck.log" 2>&1 || rc=$?
	[ "$rc" = 0 ] || cat "$MNT_TMP/fsck.log" >&2
	check "fsck.nvmefs -n $1: exit $rc" test "$rc" = 0
}

round() { # NAME MODE CRASH(kill|power)
	local dir=$MNT/$1 expect=$MNT_TMP/$1.json go=$MNT_TMP/$1.go wpid end rc=0 err
	if [ "$3" = power ]; then
		MNT_DAEMON=tests/nvmefs-fi
	fi
	mnt_mount "mode=$2,commit=3600"
	[ "$3" = kill ] || setfattr -n trusted.nvmefs.fault -v record "$MNT"
	mkdir "$dir"
	"$py" "$here/test_native_crash.py" write "$dir" "$build/client/libnvmefs.so" \
		"$expect" "$go" &
	wpid=$!
	end=$((SECONDS + 60))
	until [ -e "$expect" ]; do
		kill -0 "$wpid" 2>/dev/null || break
		[ "$SECONDS" -lt "$end" ] || break
		sleep 0.02
	done
	if [ ! -e "$expect" ]; then
		touch "$go"
		wait "$wpid" || rc=$?
		mnt_die "$1: the writer stopped (status $rc) or hung before its last nvmefs_fsync"
	fi
	if [ "$3" = kill ]; then
		# shellcheck disable=SC2046 # one pid a word
		kill -KILL $(_mnt_daemon_pids)
	elif ! err=$(timeout 30 setfattr -n trusted.nvmefs.fault \
		-v "powerloss seed=1 keep=0 tear=0" "$MNT" 2>&1); then
		case $err in
		*"not connected"* | *"connection abort"*) ;;
		*) mnt_die "$1: setfattr powerloss: $err" ;;
		esac
	fi
	_mnt_wait_daemon 20 || mnt_die "$1: the daemon still runs 20 s after the $3"
	touch "$go"
	wait "$wpid" || rc=$?
	check "$1: the writer exited with status $rc" test "$rc" = 0
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	MNT_DAEMON=nvmefs
	fsck_clean "after the $3 ($1)"
	mnt_mount "mode=$2"
	check "$1 ($2 mode, $3): the fsynced files after replay" \
		"$py" "$here/test_native_crash.py" check "$dir" "$expect"
	mnt_umount
	fsck_clean "after unmounting ($1)"
}

round r1 cached kill
round r2 direct kill
round r3 cached power
round r4 direct power
grep -h "power loss:" "$MNT_TMP/nvmefs.log" || true
mnt_result
