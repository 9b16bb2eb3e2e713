#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuse_null, the FUSE ceiling of scripts/bench.sh, in both modes: what
# the bench's dd and fio passes rely on, so that its figures count real bytes.
#  - dd writes 8 MiB (conv=fsync): the file's size is 8 MiB, ls lists it; it reads back
#    exactly 8 MiB, all zeros, after caches are dropped;
#  - fallocate lays out 16 MiB (fio's layout), truncate cuts to 4096 bytes;
#  - O_EXCL create of an existing name fails; unlink removes the file;
#  - a directory of 300 files of 4 KiB (the bench's small-file pass): listed,
#    stat'ed; a directory in it and its listing's '..'; neither
#    removable while not empty, then removed with the rest;
#  - -o mode=bogus exits non-zero naming "bogus".
# With NVMEFS_TEST_TRANSPORT=uring (scripts/test.sh's io_uring pass) both
# modes run with -o uring: the daemon says its queues at INIT and, at the
# end, that requests came through them. With enable_uring off, -o uring is
# refused at once, naming enable_uring, and nothing is mounted; a queue the
# kernel refuses after INIT stops fuse_null within seconds.
# The mount has its own directory, the script runs under timeout(1) and
# always unmounts. usage: test_fuse_null.sh BUILD_DIR
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh" # check, mnt_result, mnt_need, mnt_skip
mnt_time_limit 100 "$0" "$@"
null=$1/tests/fuse_null
[ "$(id -u)" = 0 ] || mnt_skip "needs root (drop_caches)"
[ -c /dev/fuse ] || mnt_skip "no /dev/fuse"
mnt_need fusermount3 fuse3
dir=$(mktemp -d "${TMPDIR:-/tmp}/test_fuse_null.XXXXXX")
mnt=$dir/mnt
pid=
mkdir "$mnt"
cleanup() {
	if grep -q " $mnt " /proc/self/mounts; then
		timeout 10 fusermount3 -u "$mnt" || { [ -z "$pid" ] || kill -KILL "$pid"; timeout 10 umount -l "$mnt"; }
	fi
	if [ -n "$pid" ]; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap "exit 143" TERM INT

# The inode number a directory's listing gives '..' (ls and stat look the
# name up instead): getdents64 on it, read by Debian's python3.
dotdot_ino() {
	/usr/bin/python3 - "$1" <<'EOF'
import ctypes, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
buf = ctypes.create_string_buffer(1 << 16)
n = ctypes.CDLL(None, use_errno=True).syscall(217, fd, buf, len(buf))  # getdents64
off = 0
while off < n:
    reclen = int.from_bytes(buf.raw[off + 16:off + 18], "little")
    if buf.raw[off + 19:off + reclen].split(b"\0")[0] == b"..":
        print(int.from_bytes(buf.raw[off:off + 8], "little"))
    off += reclen
EOF
}

param=/sys/module/fuse/parameters/enable_uring
uring=
[ "${NVMEFS_TEST_TRANSPORT:-}" != uring ] || uring=,uring

for mode in cached direct; do
	"$null" "$mnt" -f -o "mode=$mode$uring" 2>"$dir/log" &
	pid=$!
	for _ in $(seq 100); do
		grep -q " $mnt " /proc/self/mounts && break
		sleep 0.1
	done
	check "$mode: mounted" grep -q " $mnt " /proc/self/mounts
	f=$mnt/dd.bin
	check "$mode: dd write" timeout 60 dd if=/dev/zero of="$f" bs=1M count=8 conv=fsync status=none
	check "$mode: size after dd" test "$(stat -c %s "$f")" = 8388608
	check "$mode: ls lists the file" test "$(ls "$mnt")" = dd.bin
	echo 3 >/proc/sys/vm/drop_caches
	check "$mode: read back 8 MiB of zeros" timeout 60 cmp -n 8388609 "$f" <(head -c 8388608 /dev/zero)
	check "$mode: fallocate" fallocate -l 16M "$mnt/fio.bin"
	check "$mode: size after fallocate" test "$(stat -c %s "$mnt/fio.bin")" = 16777216
	check "$mode: truncate" truncate -s 4096 "$mnt/fio.bin"
	check "$mode: size after truncate" test "$(stat -c %s "$mnt/fio.bin")" = 4096
	check "$mode: O_EXCL create of an existing file fails" \
		bash -c "! (set -o noclobber; : >'$f') 2>/dev/null"
	check "$mode: unlink" rm "$f" "$mnt/fio.bin"
	check "$mode: gone after unlink" test ! -e "$f"
	# The small-file pass: a directory of more files than one page of the
	# table, found by name, stat'ed, listed and removed with it; and a
	# directory in it, which keeps it from going while it has a file.
	d=$mnt/small
	check "$mode: mkdir" mkdir "$d"
	check "$mode: 300 files of 4 KiB in a directory" \
		bash -c "for i in \$(seq 300); do head -c 4096 /dev/zero >'$d'/f\$i || exit 1; done"
	check "$mode: the directory lists 300" test "$(find "$d" -mindepth 1 | wc -l)" = 300
	check "$mode: a file's size" test "$(stat -c %s "$d/f150")" = 4096
	check "$mode: a name in the root is not one in the directory" test ! -e "$mnt/f150"
	check "$mode: a directory in the directory" mkdir "$d/sub"
	check "$mode: a file in it" touch "$d/sub/x"
	check "$mode: listed as a directory" test "$(find "$d" -mindepth 1 -type d)" = "$d/sub"
	check "$mode: its listing's '..' is the directory" \
		test "$(dotdot_ino "$d/sub")" = "$(stat -c %i "$d")"
	rm -f "$d"/f*
	check "$mode: rmdir of a directory with a directory with a file: not empty" \
		bash -c "rmdir '$d' 2>&1 | grep -q 'Directory not empty'"
	check "$mode: rmdir of a directory with a file: not empty" \
		bash -c "rmdir '$d/sub' 2>&1 | grep -q 'Directory not empty'"
	check "$mode: remove them all" rm -r "$d"
	check "$mode: the directory is gone" test ! -e "$d"
	check "$mode: the root is empty" test -z "$(find "$mnt" -mindepth 1)"
	check "$mode: unmount" timeout 30 fusermount3 -u "$mnt"
	rc=0
	timeout 30 tail --pid="$pid" -f /dev/null || rc=$?
	check "$mode: daemon exited after unmount" test "$rc" = 0
	rc=0
	wait "$pid" || rc=$?
	pid=
	check "$mode: daemon exit status $rc" test "$rc" = 0
	if [ -n "$uring" ]; then
		check "$mode: queues set up at INIT" grep -q "FUSE over io_uring: [0-9]* queue" "$dir/log"
		served=$(sed -n 's/^fuse_null: \([0-9]*\) requests served over io_uring$/\1/p' "$dir/log")
		check "$mode: requests came through the queues (${served:-none})" test "${served:-0}" -gt 0
	fi
done

# A queue the kernel refuses after INIT (a payload buffer too small): every
# request would wait for it, so fuse_null must stop and unmount at once.
if [ -n "$uring" ]; then
	rc=0
	start=$SECONDS
	NVMEFS_TEST_URING_SHORT_PAYLOAD=1 timeout 20 "$null" "$mnt" -f -o uring 2>"$dir/log" &
	pid=$!
	sleep 1
	timeout 5 stat "$mnt" >/dev/null 2>&1 || true
	wait "$pid" || rc=$?
	pid=
	check "a queue refused after INIT: exit status $rc" sh -c "[ $rc -ne 0 ] && [ $rc -ne 124 ]"
	check "a queue refused after INIT: stopped at once" test $((SECONDS - start)) -le 10
	check "a queue refused after INIT: nothing mounted" sh -c "! grep -q ' $mnt ' /proc/self/mounts"
fi

if [ -r "$param" ] && [ "$(cat "$param")" = N ]; then
	rc=0
	start=$SECONDS
	err=$(timeout 20 "$null" "$mnt" -f -o uring 2>&1) || rc=$?
	check "-o uring with enable_uring off: exit status $rc" sh -c "[ $rc -ne 0 ] && [ $rc -ne 124 ]"
	check "-o uring refused at once" test $((SECONDS - start)) -le 5
	check "-o uring: message '$err' names enable_uring" grep -q enable_uring <<<"$err"
	check "-o uring refused: nothing mounted" sh -c "! grep -q ' $mnt ' /proc/self/mounts"
fi

rc=0
err=$("$null" "$mnt" -f -o mode=bogus 2>&1) || rc=$?
check "mode=bogus: exit status $rc" test "$rc" -ne 0
check "mode=bogus: message '$err' lacks 'bogus'" grep -q bogus <<<"$err"

mnt_result
