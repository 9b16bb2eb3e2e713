#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A second mount of a volume mounted already (xfstests generic/732): a
# kernel filesystem gives the same superblock at both places; nvmefs binds
# the running mount on the second mount point (fs/tools/remount_again.c),
# so that both are one daemon's:
#  - the second mount succeeds, by member list (in another order) and by
#    label, and prints nothing;
#  - what one place makes, the other sees at once; renames across
#    directories through both places (generic/732's sequence);
#  - -o ro on the second: that place refuses writes (EROFS), the first
#    still writes;
#  - unmounting the first leaves the second working; unmounting the last
#    ends the daemon; fsck is clean.
# Before: "image file is busy: in use by nvmefs (pid N), which has the
# volume mounted", exit 1.
# Exit 77 (skip) without root, /dev/fuse or the nvmefs binaries.
# usage: test_mount_again.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_mount_again.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 120 "$0" "$@"
mnt_setup "$build" 2 256M -L again
m2=$MNT_TMP/m2
m3=$MNT_TMP/m3
mkdir -p "$m2" "$m3"
# The second and third mount points go before the first (the library's
# cleanup unmounts that one and waits for the daemon).
trap 'umount -l "$m2" 2>/dev/null || true; umount -l "$m3" 2>/dev/null || true; _mnt_cleanup' EXIT
mnt_mount

IFS=, read -r -a members <<<"$MNT_DEVS"
reversed=$(printf '%s\n' "${members[@]}" | tac | paste -sd,)
out=$(timeout 30 "$build/nvmefs" "$reversed" "$m2" 2>&1) && rc=0 || rc=$?
check "a second mount of the mounted members succeeds (exit $rc: $out)" test "$rc" = 0
check "and prints nothing" test -z "$out"
check "$m2 is a mount point" mountpoint -q "$m2"
check "no second daemon: the mount's process has left" test -z "$(pgrep -f -- "nvmefs $reversed" || true)"

mkdir "$MNT/A" "$MNT/B"
echo hello >"$MNT/A/f"
check "made on the first, seen on the second" test "$(cat "$m2/A/f" 2>/dev/null)" = hello
mv "$MNT/A/f" "$MNT/B/"
check "renamed on the first, read on the second" test "$(cat "$m2/B/f" 2>/dev/null)" = hello
mv "$m2/B/f" "$m2/A/"
check "renamed on the second, read on the first" test "$(cat "$MNT/A/f" 2>/dev/null)" = hello
mv "$MNT/A/f" "$MNT/B/"
check "same inode at both places" test "$(stat -c %i "$MNT/B/f")" = "$(stat -c %i "$m2/B/f")"

src=$(dirname "${members[0]}")
out=$(timeout 30 "$build/nvmefs" label=again "$m3" -o ro,search="$src" 2>&1) && rc=0 || rc=$?
check "a third mount, by label, read-only, succeeds (exit $rc: $out)" test "$rc" = 0
if mountpoint -q "$m3"; then
	check "the read-only place reads" test "$(cat "$m3/B/f" 2>/dev/null)" = hello
	if touch "$m3/new" 2>"$MNT_TMP/err"; then
		check "the read-only place refuses a write" false
	else
		check "the read-only place refuses a write with EROFS" grep -q 'Read-only' "$MNT_TMP/err"
	fi
	check "the first still writes" touch "$MNT/new"
	check "unmounting the third" umount "$m3"
fi

check "unmounting the first" fusermount3 -u "$MNT"
check "the second still serves" test "$(cat "$m2/B/f" 2>/dev/null)" = hello
echo more >"$m2/B/g"
check "and writes" test "$(cat "$m2/B/g" 2>/dev/null)" = more
check "unmounting the last" umount "$m2"
gone=0
for _ in $(seq 100); do
	if [ -z "$(_mnt_daemon_pids)" ]; then
		gone=1
		break
	fi
	sleep 0.1
done
check "the daemon ended with the last mount" test "$gone" = 1
check "fsck is clean" "$build/fsck.nvmefs" -n "${members[@]}"
mnt_result
