#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# File handles (name_to_handle_at, open_by_handle_at), as NFS export and
# backup tools use them (xfstests generic/426; FUSE_EXPORT_SUPPORT):
#   - a file's handle opens it after the kernel has dropped its inode
#     (drop_caches): the kernel then asks the daemon for the inode by
#     number (LOOKUP of "."), which before answered nothing and the open
#     failed with ESTALE;
#   - a directory's handle opens it, connected to its path: the kernel
#     climbs to the root asking each directory for its parent (LOOKUP
#     of "..");
#   - handles outlive an unmount and mount of the same volume;
#   - a deleted file's handle is stale (ESTALE), not another file.
# usage: test_handles.sh BUILD [cached|direct]
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 120 "$0" "$@"
build=$(realpath "$1")
mode=${2:-direct}
probe=$build/tests/handle_probe
[ -x "$probe" ] || mnt_skip "$probe not built"
mnt_setup "$build" 2 256M
h=$MNT_TMP/handles
mkdir "$h"

drop() { # the kernel forgets every unused inode of the mount
	sync
	echo 2 >/proc/sys/vm/drop_caches
}
opens() { # HANDLE WANT: the handle opens, and its output holds WANT
	local out
	out=$("$probe" open "$MNT" "$h/$1" 2>&1) && grep -qF -- "$2" <<<"$out"
}

mnt_mount "mode=$mode"
echo "first line" >"$MNT/f"
mkdir -p "$MNT/d/e/g"
echo deep >"$MNT/d/e/g/x"
ino_f=$(stat -c %i "$MNT/f")
check "name_to_handle_at of a file" "$probe" save "$MNT/f" "$h/f"
check "name_to_handle_at of a directory" "$probe" save "$MNT/d/e/g" "$h/g"
check "name_to_handle_at of a file deep down" "$probe" save "$MNT/d/e/g/x" "$h/x"
check "a file's handle opens while its inode is cached" opens f "data first line"
drop
check "a file's handle opens after drop_caches (generic/426)" opens f "ino $ino_f"
check "... and reads the file" opens f "data first line"
drop
check "a directory's handle opens after drop_caches, at its path" opens g "path $MNT/d/e/g"
drop
check "a deep file's handle opens after drop_caches" opens x "data deep"
mnt_umount

mnt_mount "mode=$mode"
check "a file's handle opens on the next mount of the volume" opens f "data first line"
check "a directory's handle too, at its path" opens g "path $MNT/d/e/g"
rm "$MNT/f"
drop
out=$("$probe" open "$MNT" "$h/f" 2>&1) && rc=0 || rc=$?
check "a deleted file's handle fails ($rc)" test "$rc" = 1
check "... with ESTALE ($out)" grep -q ESTALE <<<"$out"
echo new >"$MNT/f2"
drop
out=$("$probe" open "$MNT" "$h/f" 2>&1) || true
check "... and never opens another file ($out)" bash -c "! grep -q 'data new' <<<'$out'"
mnt_umount
mnt_result
