#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs tests/test_posix.c (POSIX and Linux semantics of every operation:
# create, read/write, truncate, timestamps, setattr, links, rename, readdir,
# symlinks, mknod, xattrs, fallocate, SEEK_DATA/SEEK_HOLE, statfs, fsync,
# names, open files, permissions) on a freshly formatted and mounted volume,
# in the mount mode given (cached or direct), then remounts and runs it again.
# tests/test_posix_ref.sh runs the same program on tmpfs, which keeps the
# expectations honest.
# usage: test_posix.sh BUILD [cached|direct]
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 280 "$0" "$@"
build=$1
mode=${2:-cached}
# Direct mode before Linux 6.6: shared mmap is refused (ENODEV), README.
if [ "$mode" = direct ] && ! mnt_direct_mmap; then
	export NVMEFS_TEST_NO_SHARED_MMAP=1
fi
mnt_setup "$build" 4 256M
mnt_mount "mode=$mode"
mkdir "$MNT/run1"
check "test_posix, $mode mode" "$build/tests/test_posix" "$MNT/run1"
mnt_remount "mode=$mode"
mkdir "$MNT/run2"
check "test_posix after a remount" "$build/tests/test_posix" "$MNT/run2"
check "nothing left behind by the runs" test -z "$(find "$MNT/run1" "$MNT/run2" -mindepth 1)"
mnt_result
