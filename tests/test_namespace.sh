#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Randomized namespace test (tests/test_namespace.py) on a fresh volume: STEPS
# seeded random operations per seed applied to the volume, mounted in MODE
# (cached or direct), and to a reference directory on tmpfs, outcomes and
# trees compared after every step; then a clean unmount, fsck.nvmefs -n must
# be clean, and after a remount the two trees must still be the same.
# usage: test_namespace.sh BUILD MODE STEPS SEED...
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -lt 4 ]; then
	echo "usage: test_namespace.sh BUILD MODE STEPS SEED..." >&2
	exit 2
fi
build=$1 mode=$2 steps=$3
shift 3
# About 10 ms a step on a 2-core machine, plus mounts and fsck.
mnt_time_limit $((120 + steps * $# / 100)) "$0" "$build" "$mode" "$steps" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
[ -x "$build/fsck.nvmefs" ] || mnt_skip "$build/fsck.nvmefs not built"
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] || mnt_skip "/dev/shm is not tmpfs"
# $MNT_TMP in /dev/shm: the reference tree is on tmpfs and goes with it.
TMPDIR=/dev/shm mnt_setup "$build" 4 256M
ref=$MNT_TMP/ref
mkdir "$ref"
mnt_mount "mode=$mode"
mkdir "$MNT/ns"
check "$mode mode: random operations, the volume against tmpfs" \
	"$py" "$here/test_namespace.py" --steps "$steps" --seed "$@" -- "$MNT/ns" "$ref"
mnt_umount
check "fsck.nvmefs -n clean after unmounting" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_mount "mode=$mode"
check "the same trees after a remount" \
	"$py" "$here/test_namespace.py" --compare -- "$MNT/ns" "$ref"
mnt_umount
mnt_result
