#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes answered before the devices complete them (-o write_behind,
# NVMEFS_WRITE_BEHIND in fs/core/data_io.c), through tests/write_behind.py
# on a mount in MODE (direct, cached): small writes answered early, seen
# whole at once through another descriptor (size, bytes, SEEK_DATA), all
# there after a remount; O_DIRECT, O_SYNC, O_DSYNC and larger writes not
# answered early; on /dev/fuse the request loop holds small writes answered
# early and sends them together, a read of one at once still finding its
# bytes (write_behind.py mountheld). Then, on the test daemon nvmefs-fi with writes to member 3
# failing: an early-answered write whose device write failed fails its
# fsync with EIO, and every file whose write and fsync succeeded reads back
# exactly; an unaligned overwrite whose edge read fails fails with EIO
# (it hung once); a write answered early that the engine refuses to send
# fails the file's next fsync; and temporary files unlinked at once while the members are slow
# leave fsck clean (a file's space goes after its writes). Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or
# Debian's python3.
# usage: test_write_behind.sh BUILD_DIR [MODE]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: test_write_behind.sh BUILD_DIR [MODE]" >&2
	exit 2
fi
build=$1
mode=${2:-direct}
mnt_time_limit 150 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_need setfattr attr
mnt_setup "$build" 4 256M
if out=$("$build/nvmefs" "$MNT_DEVS" "$MNT" -o "mode=$mode,write_behind=2M" 2>&1); then
	echo "FAIL: write_behind=2M mounted" >&2
	MNT_FAIL=$((MNT_FAIL + 1))
	fusermount3 -u "$MNT"
fi
check "write_behind=2M refused, naming it" grep -q "bad write_behind '2M'" <<<"$out"
mnt_mount "mode=$mode"
check "write_behind = 65536 in .nvmefs/config" grep -qx "write_behind = 65536" "$MNT/.nvmefs/config"
check "write_behind.py write ($mode)" "$py" "$here/write_behind.py" "$MNT" write "$MNT_TMP/ref1"
check "write_behind.py mountheld ($mode)" "$py" "$here/write_behind.py" "$MNT" mountheld "$MNT_TMP/ref1"
mnt_remount "mode=$mode"
check "write_behind.py check ($mode)" "$py" "$here/write_behind.py" "$MNT" check "$MNT_TMP/ref1"
mnt_umount
check "fsck -n clean ($mode)" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"

if [ -x "$build/tests/nvmefs-fi" ]; then
	MNT_DAEMON=tests/nvmefs-fi
	MNT_FOREGROUND=1
	mnt_mount "mode=$mode"
	setfattr -n trusted.nvmefs.fault -v "eio dev=3 ops=w" "$MNT"
	check "write_behind.py fail ($mode)" "$py" "$here/write_behind.py" "$MNT" fail "$MNT_TMP/ref2"
	setfattr -n trusted.nvmefs.fault -v "clear" "$MNT"
	mnt_remount "mode=$mode"
	check "write_behind.py failcheck ($mode)" "$py" "$here/write_behind.py" "$MNT" failcheck "$MNT_TMP/ref2"
	check "write_behind.py edgefail ($mode)" "$py" "$here/write_behind.py" "$MNT" edgefail "$MNT_TMP/ref3"
	check "write_behind.py nosend ($mode)" "$py" "$here/write_behind.py" "$MNT" nosend "$MNT_TMP/ref3"
	for d in 0 1 2 3; do
		setfattr -n trusted.nvmefs.fault -v "latency dev=$d us=20000" "$MNT"
	done
	: >"$MNT_TMP/nvmefs.log"
	check "write_behind.py tmp ($mode, slow members)" "$py" "$here/write_behind.py" "$MNT" tmp "$MNT_TMP/ref3"
	setfattr -n trusted.nvmefs.fault -v "clear" "$MNT"
	mnt_umount
	check "no error logged for the temporary files" \
		bash -c '! grep -i "error\|fail" "$1"' _ "$MNT_TMP/nvmefs.log"
	check "fsck -n clean after the temporary files ($mode)" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
else
	echo "no $build/tests/nvmefs-fi: the failure half skipped"
fi
mnt_result
