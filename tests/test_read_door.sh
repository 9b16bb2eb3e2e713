#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The read door of libnvmefs-preload.so (client/preload_read.c): on a volume
# mounted in MODE, tests/read_door.c runs under LD_PRELOAD. Its own checks:
# the bytes of every O_DIRECT read through pread, read, dup2, libaio and a
# forked child; an overwrite, a truncate and an extension seen at once; no
# 1 MiB read that shows two writes racing it (a run of its own). Here: the daemon lent the
# file's extents (native.layouts) and served fewer than a quarter of those
# reads as FUSE READs; with NVMEFS_PRELOAD_READ=0 the same program's reads
# all cross /dev/fuse (so the count above can tell). A reader whose daemon
# is killed under it fails its next read. Then fsck is clean.
# usage: test_read_door.sh BUILD_DIR MODE
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 2 ] && { [ "$2" = cached ] || [ "$2" = direct ]; } || {
	echo "usage: test_read_door.sh BUILD_DIR cached|direct" >&2
	exit 2
}
build=$1
mode=$2
mnt_time_limit 180 "$0" "$@"
lib=$build/client/libnvmefs-preload.so
prog=$build/tests/read_door
[ -e "$lib" ] || mnt_skip "$lib not built"
[ -x "$prog" ] || mnt_skip "$prog not built"
# Under ASan (scripts/test.sh's sanitizer stage) the library needs the
# sanitizer's runtime loaded first.
preload=$lib
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -z "$asan" ] || preload="$asan $lib"
mnt_setup "$build" 4 512M
mnt_mount "mode=$mode"

# stat SECTION KEY: a counter of the mount's .nvmefs/stats
stat() {
	/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))[sys.argv[2]].get(sys.argv[3], 0))' \
		"$MNT/.nvmefs/stats" "$@"
}

# run NAME ARG [ENV...]: read_door under the preload; sets reads, fuse_reads, lent
run() {
	local name=$1 arg=$2 out r0 l0
	shift 2
	r0=$(stat requests READ)
	l0=$(stat native layouts)
	# shellcheck disable=SC2086 # arg is empty or one word
	if ! out=$(env "$@" LD_PRELOAD="$preload" timeout 120 "$prog" "$MNT" $arg 2>&1); then
		echo "$out" >&2
		check "$mode, $name: read_door's checks" false
		reads=0
	else
		echo "$out"
		check "$mode, $name: read_door's checks" true
		reads=$(echo "$out" | sed -n 's/^reads //p')
		reads=${reads:-0}
	fi
	fuse_reads=$(($(stat requests READ) - r0))
	lent=$(($(stat native layouts) - l0))
	echo "$mode, $name: $reads reads, $fuse_reads FUSE READs, $lent loans"
}

run "the read door" ""
check "$mode: the daemon lent the file's extents" test "$lent" -ge 1
# The race's reads are more; the reads that go to the mount are the
# retried ones, the ends and holes, and the first of libaio's (before
# the program's first io_getevents).
check "$mode: fewer than a quarter of $reads reads crossed /dev/fuse ($fuse_reads)" \
	test "$((fuse_reads * 4))" -lt "$reads"
run "the door off" "" NVMEFS_PRELOAD_READ=0
check "$mode: with the door off no loan is made" test "$lent" = 0
check "$mode: with the door off, $reads reads are FUSE READs ($fuse_reads)" \
	test "$fuse_reads" -ge "$reads"
run "writes racing the door's reads" race
mnt_umount

# The daemon killed under a reader that holds a loan: its next read fails,
# as the mount's do, instead of reading members nobody answers for.
mnt_mount "mode=$mode"
rm -f "$MNT_TMP/dead.ready" "$MNT_TMP/dead.go"
LD_PRELOAD="$preload" timeout 120 "$prog" "$MNT" dead "$MNT_TMP/dead.ready" "$MNT_TMP/dead.go" &
rpid=$!
end=$((SECONDS + 60))
while [ ! -e "$MNT_TMP/dead.ready" ] && kill -0 "$rpid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
	sleep 0.05
done
_mnt_kill_daemon "the dead daemon's check"
_mnt_wait_daemon 20 || mnt_die "the daemon still runs 20 s after SIGKILL"
touch "$MNT_TMP/dead.go"
rc=0
wait "$rpid" || rc=$?
check "$mode: a read after the daemon died failed (read_door status $rc)" test "$rc" = 0
fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
if ! out=$("$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}" 2>&1); then
	echo "$out" >&2
	check "fsck.nvmefs -n clean after the read door ($mode)" false
fi
mnt_result
