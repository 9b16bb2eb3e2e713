#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Device errors at run time, through the test daemon nvmefs-fi (faults set
# with setfattr -n trusted.nvmefs.fault on the mount root; docs/RELIABILITY.md):
#  - reads failing (EIO) or short on one member: every file with data there
#    fails with EIO, every other file reads back exactly what was written,
#    stat and readdir go on working; in cached mode too (caches dropped);
#  - writes failing on one member: the write fails with EIO, the daemon goes
#    on, and once the fault is cleared the file is written fine;
#  - a slow member: everything still right;
#  - metadata writes failing on member 0, or a member's flush failing: fsync
#    fails with EIO, the daemon logs that the volume is now read-only, new
#    changes get EROFS, reads still work, and after unmounting fsck.nvmefs
#    finds the volume clean and a remount shows every file fsync'ed before.
#  - an OPEN or CREATE reply the kernel does not take: the opener gets
#    EINTR and the handle is released (an unlinked file's space comes back);
#    a READDIRPLUS reply not taken gives back its entries' lookups.
# The daemon must be alive (and the mount answering) after every fault.
# usage: test_faults.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 1 ] || {
	echo "usage: test_faults.sh BUILD_DIR" >&2
	exit 2
}
build=$1
mnt_time_limit 240 "$0" "$@"
mnt_need setfattr attr
mnt_need jq jq
[ -x "$build/tests/nvmefs-fi" ] || mnt_skip "$build/tests/nvmefs-fi not built"
[ -x "$build/fsck.nvmefs" ] || mnt_skip "$build/fsck.nvmefs not built"
mnt_setup "$build" 4 128M
MNT_DAEMON=tests/nvmefs-fi
MNT_FOREGROUND=1
ref=$MNT_TMP/ref
mkdir "$ref"

ctl() { # COMMAND
	setfattr -n trusted.nvmefs.fault -v "$1" "$MNT"
}

alive() { # WHEN
	check "daemon alive and answering $1" stat -f "$MNT" >/dev/null
}

# Run CMD; it must fail with "Input/output error" (EIO) or, with ERR, that.
fails_with() { # ERR CMD...
	local err=$1 out
	shift
	if out=$("$@" 2>&1); then
		echo "FAIL: '$*' succeeded, wanted '$err'" >&2
		return 1
	fi
	case $out in *"$err"*) return 0 ;; esac
	echo "FAIL: '$*' failed with '$out', wanted '$err'" >&2
	return 1
}

read_all() { # FILE
	cat "$1" >/dev/null
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# One 8 MiB file over every member and 8 of 64 KiB (each on one member).
make_files() {
	local i
	head -c 8M /dev/urandom >"$ref/big"
	cp "$ref/big" "$MNT/big"
	for i in 0 1 2 3 4 5 6 7; do
		head -c 64K /dev/urandom >"$ref/s$i"
		cp "$ref/s$i" "$MNT/s$i"
	done
	sync "$MNT"/big "$MNT"/s*
}

# With reads on member 1 failing: big and some small files EIO, the other
# small files exact.
reads_fail() { # MODE
	local i ok=0 bad=0 out
	[ "$1" = direct ] || drop_caches
	check "$1: big file read fails with EIO" fails_with "Input/output error" read_all "$MNT/big"
	for i in 0 1 2 3 4 5 6 7; do
		if out=$(cmp "$MNT/s$i" "$ref/s$i" 2>&1); then
			ok=$((ok + 1))
		elif [[ $out == *"Input/output error"* ]]; then
			bad=$((bad + 1))
		else
			echo "FAIL: $1: s$i: $out (wrong data instead of an error)" >&2
			MNT_FAIL=$((MNT_FAIL + 1))
		fi
	done
	echo "$1: with member 1 failing reads: $ok small files read right, $bad failed with EIO"
	check "$1: some small files fail" [ "$bad" -ge 1 ]
	check "$1: the others read right" [ "$ok" -ge 4 ]
	check "$1: stat works" stat "$MNT/big" "$MNT/s0" >/dev/null
	check "$1: readdir works" [ "$(find "$MNT" -maxdepth 1 -type f | wc -l)" = 9 ]
}

all_right() { # WHEN
	local i
	check "$1: big intact" cmp "$MNT/big" "$ref/big"
	for i in 0 1 2 3 4 5 6 7; do
		check "$1: s$i intact" cmp "$MNT/s$i" "$ref/s$i"
	done
}

# Read faults, in both modes.
for mode in direct cached; do
	mnt_mount "mode=$mode"
	[ -f "$MNT/big" ] || make_files
	ctl "eio dev=1 ops=r"
	reads_fail "$mode"
	ctl "clear"
	[ "$mode" = direct ] || drop_caches
	all_right "$mode: after clearing the read fault"
	ctl "short dev=2 ops=r"
	[ "$mode" = direct ] || drop_caches
	check "$mode: a short read is EIO" fails_with "Input/output error" read_all "$MNT/big"
	ctl "clear dev=2"
	alive "after read faults ($mode)"
	mnt_umount
done

mnt_mount mode=direct
# Write faults on a data member (member 3 holds no metadata).
ctl "eio dev=3 ops=w"
check "a write touching member 3 fails with EIO" \
	fails_with "Input/output error" dd if="$ref/big" of="$MNT/w" bs=1M oflag=direct conv=fsync status=none
alive "after a failed write"
ctl "clear"
check "the same write works once cleared" dd if="$ref/big" of="$MNT/w" bs=1M oflag=direct conv=fsync status=none
check "and reads back" cmp "$MNT/w" "$ref/big"
# One short write on member 3: of four 1 MiB writes (one chunk each, so
# one per member) exactly one fails, with EIO. (A larger write would see a
# short count from the kernel and dd would write the rest again.)
ctl "short dev=3 ops=w count=1"
failed=0
for k in 0 1 2 3; do
	if ! out=$(dd if="$ref/big" of="$MNT/w" bs=1M count=1 seek=$k skip=$k oflag=direct \
		conv=notrunc status=none 2>&1); then
		failed=$((failed + 1))
		check "a short write is EIO ($out)" grep -q "Input/output error" <<<"$out"
	fi
done
check "exactly one of the four writes was short ($failed)" [ "$failed" = 1 ]
ctl "clear"
check "rewritten once cleared" dd if="$ref/big" of="$MNT/w" bs=1M oflag=direct conv=notrunc,fsync status=none
check "and reads back" cmp "$MNT/w" "$ref/big"
# A slow member.
ctl "latency dev=0 us=20000"
check "a slow member: reads right" cmp "$MNT/big" "$ref/big"
check "a slow member: writes" cp "$ref/s0" "$MNT/slow"
ctl "clear"
all_right "after write faults"

# A lost OPEN or CREATE reply (the kernel no longer waits for it): no
# RELEASE will come, so the daemon must release the handle itself, or an
# unlinked file keeps its space until unmount.
avail() { stat -f -c '%a' "$MNT"; }
freed_after_unlink() { # FILE: unlink FILE; its 8 MiB come back within 10 s
	local before end
	before=$(avail)
	rm -f "$1"
	end=$((SECONDS + 10))
	while [ "$(avail)" -le "$before" ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
	[ "$(avail)" -gt "$before" ]
}
cp "$ref/big" "$MNT/lost"
sync "$MNT/lost"
ctl "lose_open"
check "a lost OPEN reply reaches the opener as EINTR" \
	fails_with "Interrupted system call" read_all "$MNT/lost"
check "the handle of a lost OPEN reply is released (space freed at unlink)" \
	freed_after_unlink "$MNT/lost"
ctl "lose_open"
check "a lost CREATE reply reaches the creator as EINTR" \
	fails_with "Interrupted system call" cp "$ref/big" "$MNT/lostc"
check "the lost CREATE made the file" test -f "$MNT/lostc"
cp "$ref/big" "$MNT/lostc"
sync "$MNT/lostc"
check "the handle of a lost CREATE reply is released (space freed at unlink)" \
	freed_after_unlink "$MNT/lostc"
alive "after lost OPEN and CREATE replies"

# A lost READDIRPLUS reply: each entry in it counted a lookup the kernel
# never took, and the daemon must give them back: once the kernel has
# forgotten what it holds, the daemon's count of inodes it holds
# (.nvmefs/stats metadata.lookups) is what it was before (20 more, and
# their table entries kept until unmount, before the fix).
lookups() { jq .metadata.lookups "$MNT/.nvmefs/stats"; }
settled_lookups() { # the count once the kernel's FORGETs have come
	local n m end=$((SECONDS + 10))
	echo 2 >/proc/sys/vm/drop_caches
	n=$(lookups)
	while [ $SECONDS -lt $end ]; do
		sleep 0.3
		m=$(lookups)
		[ "$m" = "$n" ] && break
		n=$m
	done
	echo "$n"
}
mkdir "$MNT/rd"
for i in $(seq 20); do echo "$i" >"$MNT/rd/f$i"; done
sync
l0=$(settled_lookups)
ctl "lose_readdir"
check "a lost READDIRPLUS reply reaches the reader as EINTR" \
	fails_with "Interrupted system call" ls -l "$MNT/rd"
l1=$(settled_lookups)
check "the lookups of a lost READDIRPLUS reply are given back ($l0 before, $l1 after)" \
	test "$l1" -eq "$l0"
check "the directory lists after a lost READDIRPLUS reply" \
	test "$(ls "$MNT/rd" | wc -l)" = 20
alive "after a lost READDIRPLUS reply"

# Metadata writes failing on member 0: read-only, not corrupt.
ctl "eio dev=0 ops=w"
check "fsync after metadata writes fail is EIO" \
	fails_with "Input/output error" dd if="$ref/s1" of="$MNT/late" conv=fsync status=none
check "then changes get EROFS" fails_with "Read-only file system" touch "$MNT/after"
check "then mkdir gets EROFS" fails_with "Read-only file system" mkdir "$MNT/dir"
check "reads still work" cmp "$MNT/big" "$ref/big"
check "the log says read-only" grep -q "the volume is now read-only" "$MNT_TMP/nvmefs.log"
alive "after a metadata write failure"
mnt_umount
check "fsck -n clean after the metadata write failure" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
MNT_DAEMON=nvmefs
MNT_FOREGROUND=0
mnt_mount mode=direct
all_right "remounted after the metadata write failure"
check "w (fsync'ed) intact" cmp "$MNT/w" "$ref/big"
check "nothing made after the failure" [ ! -e "$MNT/after" ]
mnt_umount

# A member's flush failing.
MNT_DAEMON=tests/nvmefs-fi
MNT_FOREGROUND=1
mnt_mount mode=direct
: >"$MNT_TMP/nvmefs.log"
ctl "eio dev=2 ops=f"
check "fsync when a flush fails is EIO" \
	fails_with "Input/output error" dd if="$ref/s2" of="$MNT/late2" conv=fsync status=none
check "then changes get EROFS" fails_with "Read-only file system" touch "$MNT/after2"
check "the log names the member" grep -q "d2.img: flush failed" "$MNT_TMP/nvmefs.log"
alive "after a flush failure"
mnt_umount
check "fsck -n clean after the flush failure" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_mount mode=direct
all_right "remounted after the flush failure"
mnt_umount
mnt_result
