#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mount -o remount,ro and back to rw on a running mount (xfstests
# generic/294, 306; fs/tools/remount.c):
#   - as mount(8) does it: `mount -o remount,ro MNT` runs mount.fuse3, which
#     runs nvmefs with "remount" among the options; that process reaches the
#     running daemon instead of starting a second one (which found the
#     members busy and failed);
#   - read-only: every change fails with EROFS (create, write, mkdir,
#     unlink, rename, chmod, truncate, setfattr), reads work,
#     .nvmefs/config says read_only = 1,
#     and no byte of any member changes while reads go on over several
#     commit intervals (no atime, no commit, no compaction);
#   - a file open for writing keeps the mount read-write: exit 1, said so;
#   - read-write again: changes work, and survive an unmount and fsck;
#   - the atime policy follows a remount (noatime, then relatime);
#   - only root: a user's remount is refused, the mount unchanged;
#   - a volume mounted -o ro is not made read-write by a remount.
# usage: test_remount.sh BUILD [cached|direct]
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 180 "$0" "$@"
build=$(realpath "$1")
mode=${2:-direct}
mnt_setup "$build" 2 256M

remount() { # OPTS: what mount.fuse3 runs for `mount -o remount,OPTS MNT`
	"$build/nvmefs" "$MNT_DEVS" "$MNT" -o "$1,remount,user_id=0,group_id=0,allow_other"
}
fails_erofs() { # CMD...: fails, saying "Read-only file system"
	local out
	! out=$("$@" 2>&1) && [[ $out == *"Read-only file system"* ]]
}
members_sum() { cat "${MNT_DEV_LIST[@]}" | sha256sum; }
config_ro() { grep -qx "read_only = $1" "$MNT/.nvmefs/config"; }

mnt_mount "mode=$mode,commit=1"
echo one >"$MNT/a"
mkdir "$MNT/d"
head -c 1M /dev/urandom >"$MNT/big"

# A writer open: the kernel refuses read-only, and so do we, saying why.
exec 3>>"$MNT/a"
out=$(remount ro 2>&1) && rc=0 || rc=$?
exec 3>&-
check "a file open for writing: remount ro exits 1 ($rc)" test "$rc" = 1
check "... saying a file is open for writing ($out)" grep -q "open for writing" <<<"$out"
check "... and the mount stays read-write" bash -c "echo two >>'$MNT/a'"
check "... config says read_only = 0" config_ro 0

# Read-only through mount(8), as xfstests and administrators do it: in a
# mount namespace of its own, so that the helper it runs (mount.fuse3, then
# nvmefs from /usr/local/sbin) is this build's without touching the machine.
sbin=$MNT_TMP/sbin
mkdir "$sbin"
ln -s "$build/nvmefs" "$sbin/nvmefs"
if command -v unshare >/dev/null && [ -x /sbin/mount.fuse3 ]; then
	check "mount -o remount,ro MNT (mount(8), mount.fuse3)" \
		unshare -m --propagation slave sh -c \
		"mount --bind '$sbin' /usr/local/sbin && PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin mount -o remount,ro '$MNT'"
else
	check "nvmefs -o remount,ro (no unshare or mount.fuse3 here)" remount ro
fi
check "read-only: config says read_only = 1" config_ro 1
check "read-only: create fails with EROFS" fails_erofs touch "$MNT/new"
check "read-only: write fails with EROFS" fails_erofs sh -c "echo x >>'$MNT/a'"
check "read-only: mkdir fails with EROFS" fails_erofs mkdir "$MNT/e"
check "read-only: unlink fails with EROFS" fails_erofs rm -f "$MNT/a"
check "read-only: rename fails with EROFS" fails_erofs mv "$MNT/a" "$MNT/b"
check "read-only: chmod fails with EROFS" fails_erofs chmod 600 "$MNT/a"
check "read-only: truncate fails with EROFS" fails_erofs truncate -s 0 "$MNT/a"
check "read-only: setfattr fails with EROFS" fails_erofs \
	setfattr -n user.nvmefs.layout -v count=1 "$MNT/d"
check "read-only: reads work" grep -qx two "$MNT/a"
# Nothing reaches the members: no atime moved by these reads, no commit
# (every second), no compaction.
sum0=$(members_sum)
for _ in 1 2 3; do
	cat "$MNT/big" "$MNT/a" >/dev/null
	dd if="$MNT/big" of=/dev/null bs=64k iflag=direct status=none
	ls -l "$MNT/d" >/dev/null
	sleep 1.1
done
check "read-only: no byte of a member changes over 3 commit intervals of reads" \
	test "$(members_sum)" = "$sum0"
check "remount ro again: nothing to do, exit 0" remount ro

# A user may not remount; the mount stays as it is.
chmod 711 "$MNT_TMP"
check "a user's remount rw is refused" \
	bash -c "! su nobody -s /bin/sh -c \"'$build/nvmefs' '$MNT_DEVS' '$MNT' -o remount,rw\" 2>/dev/null"
check "... the mount is still read-only" config_ro 1

# Read-write again, with noatime: the daemon's atime policy follows.
check "nvmefs -o remount,rw,noatime" remount rw,noatime
check "read-write: config says read_only = 0" config_ro 0
check "read-write: create works" touch "$MNT/new"
check "read-write: write works" bash -c "echo three >>'$MNT/a'"
touch -a -d '2001-01-01 00:00:00' "$MNT/a"
at0=$(stat -c %X "$MNT/a")
dd if="$MNT/a" of=/dev/null bs=4096 iflag=direct status=none
check "noatime after the remount: a read leaves atime" test "$(stat -c %X "$MNT/a")" = "$at0"
check "nvmefs -o remount,rw,relatime" remount rw,relatime
dd if="$MNT/a" of=/dev/null bs=4096 iflag=direct status=none
check "relatime after the remount: a read moves an old atime" \
	test "$(stat -c %X "$MNT/a")" -gt "$at0"
mnt_umount
check "fsck after ro and rw again: clean" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_mount "mode=$mode"
check "the changes made after read-write survive an unmount" \
	test "$(cat "$MNT/a")" = "$(printf 'one\ntwo\nthree')"
check "... and so does the file made then" test -e "$MNT/new"
mnt_umount

# Mounted -o ro: a remount does not make it read-write.
mnt_mount "mode=$mode,ro"
out=$(remount rw 2>&1) && rc=0 || rc=$?
check "mounted -o ro: remount rw exits 1 ($rc)" test "$rc" = 1
check "... saying it was mounted read-only ($out)" grep -q "mounted with -o ro" <<<"$out"
check "... and it stays read-only" fails_erofs touch "$MNT/x"
mnt_umount
mnt_result
