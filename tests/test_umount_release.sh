#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The volume is free when the unmount returns (issue 35, item 1; xfstests'
# generic/030, 071, 097, ... run a mount or a check right after umount):
#  - `umount MNT && nvmefs MEMBERS MNT` 100 times in a row, umount(8) and
#    fusermount3 -u by turns: each mount prints nothing (no "waiting for
#    nvmefs (pid N) to release ...") and returns within 2 s;
#  - `umount MNT && fsck.nvmefs MEMBERS` 100 times in a row (mounting again
#    after each check): each check prints its report and nothing else,
#    finds the volume clean, and returns within 2 s;
#  - between the rounds a file is written, and every file written so far is
#    read back after the next mount: the last commit and flush that follow
#    the unmount lose nothing.
# The daemon lets go of the members tens of milliseconds after umount(2)
# returns (a plain FUSE unmount does not wait for it: docs/RELIABILITY.md,
# "Unmounting"); the program that comes next waits for that silently.
#
#   test_umount_release.sh BUILD_DIR     (exit 0 pass, 1 fail, 77 skip)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"
mnt_time_limit 240 "$0" "$@"
[ $# = 1 ] || mnt_die "usage: $0 BUILD_DIR"
build=$(realpath "$1")
[ -x "$build/fsck.nvmefs" ] || mnt_skip "$build/fsck.nvmefs not built"
mnt_need umount util-linux

ROUNDS=${NVMEFS_TEST_ROUNDS:-100}
LIMIT_US=2000000

mnt_setup "$build" 4 128M
mnt_mount

# Microseconds since the epoch.
now_us() {
	local t=${EPOCHREALTIME/./}
	echo "$((10#$t))"
}

# Run CMD..., its stdout and stderr in $MNT_TMP/out, its duration in
# microseconds in $took, its status in $status (and returned).
timed() {
	local t0
	status=0
	t0=$(now_us)
	"$@" >"$MNT_TMP/out" 2>&1 || status=$?
	took=$(($(now_us) - t0))
	return "$status"
}

# Round N's file holds its line; with ALL, every round's up to N (read with
# a builtin: a cat per file would make the test quadratic in forks).
file_kept() { # N [ALL]
	local i=$1 line
	[ -z "${2:-}" ] || i=1
	for (( ; i <= $1; i++)); do
		line=""
		read -r line <"$MNT/r$i" 2>/dev/null || true
		[ "$line" = "round $i" ] || {
			echo "round $1: $MNT/r$i lost" >&2
			return 1
		}
	done
}

# What went wrong in a round, with the command's output (failures always,
# the first few of the others).
reported=0
report() { # WHAT ROUND
	reported=$((reported + 1))
	if [ "$reported" -le 5 ] || [ "$status" != 0 ]; then
		echo "$1, round $2 (status $status, $((took / 1000)) ms):" >&2
		sed 's/^/  | /' "$MNT_TMP/out" >&2
	fi
}

# Mount, counting a mount that fails, waits or prints; then round N's file
# must be there.
mount_now() { # ROUND N
	if ! timed "$build/nvmefs" "$MNT_DEVS" "$MNT"; then
		bad=$((bad + 1))
		report "mount failed" "$1"
		mountpoint -q "$MNT" || mnt_mount
	fi
	[ "$took" -le "$longest" ] || longest=$took
	[ "$took" -le "$LIMIT_US" ] || { slow=$((slow + 1)) && report "mount waited" "$1"; }
	[ ! -s "$MNT_TMP/out" ] || { said=$((said + 1)) && report "mount printed" "$1"; }
	file_kept "$2" || lost=$((lost + 1))
}

# Write round N's file, then unmount: umount(8) and fusermount3 -u by turns.
write_umount() { # ROUND N
	echo "round $2" >"$MNT/r$2"
	if (($1 % 2)); then
		umount "$MNT"
	else
		fusermount3 -u "$MNT"
	fi
}

slow=0 said=0 lost=0 bad=0 n=0 longest=0 longest_fsck=0

# 1: unmount, mount at once.
for ((r = 1; r <= ROUNDS; r++)); do
	n=$((n + 1))
	write_umount "$r" "$n"
	mount_now "$r" "$n"
done
echo "mount right after umount: the longest took $((longest / 1000)) ms"
check "mount right after umount: $slow of $ROUNDS waited more than 2 s" test "$slow" = 0
check "mount right after umount: $said of $ROUNDS printed something" test "$said" = 0
check "mount right after umount: files lost in $lost of $ROUNDS" test "$lost" = 0
check "mount right after umount: $bad of $ROUNDS failed" test "$bad" = 0
check "every file of rounds 1..$n kept" file_kept "$n" all

# 2: unmount, check at once, mount again (that mount counted with the
# checks').
slow=0 said=0 lost=0 bad=0 longest=0
for ((r = 1; r <= ROUNDS; r++)); do
	n=$((n + 1))
	write_umount "$r" "$n"
	if ! timed "$build/fsck.nvmefs" "${MNT_DEV_LIST[@]}"; then
		bad=$((bad + 1))
		report "fsck after umount failed" "$r"
	fi
	[ "$took" -le "$longest_fsck" ] || longest_fsck=$took
	[ "$took" -le "$LIMIT_US" ] || { slow=$((slow + 1)) && report "fsck waited" "$r"; }
	# Its report is "N files, N directories, N of N bytes used" and "clean".
	if grep -vqE '^([0-9]+ files, [0-9]+ directories, [0-9]+ of [0-9]+ bytes used|clean)$' \
		"$MNT_TMP/out"; then
		said=$((said + 1))
		report "fsck printed more than its report" "$r"
	fi
	mount_now "$r" "$n"
done
echo "fsck right after umount: the longest took $((longest_fsck / 1000)) ms (the mounts" \
	"after it $((longest / 1000)) ms)"
check "fsck right after umount: $slow of $ROUNDS waited more than 2 s" test "$slow" = 0
check "fsck right after umount: $said of $ROUNDS printed something else" test "$said" = 0
check "fsck right after umount: files lost in $lost of $ROUNDS" test "$lost" = 0
check "fsck right after umount: $bad of $ROUNDS failed (or found damage)" test "$bad" = 0
check "every file of rounds 1..$n kept" file_kept "$n" all
mnt_umount
mnt_result
