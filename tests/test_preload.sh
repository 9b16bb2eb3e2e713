#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libnvmefs-preload.so, the create door for unmodified programs: Debian's
# Python (/usr/bin/python3) runs tests/test_preload.py under LD_PRELOAD on a
# volume mounted in MODE (each of its checks says what it asserts: new files
# through the door, existing ones through the mount, seeking, calls the
# kernel must serve, fork, a subprocess's stdout, threads, a rename, another
# user refused); that its small writes are held and sent together
# (tests/write_behind.py doorheld); then, on the test daemon with a
# member's writes failing,
# that a small write answered early fails its file's fsync
# (tests/write_behind.py doorfail); then fsck.nvmefs -n is clean.
# usage: test_preload.sh BUILD_DIR MODE
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 2 ] && { [ "$2" = cached ] || [ "$2" = direct ]; } || {
	echo "usage: test_preload.sh BUILD_DIR cached|direct" >&2
	exit 2
}
build=$1
mode=$2
mnt_time_limit 180 "$0" "$@"
lib=$build/client/libnvmefs-preload.so
[ -e "$lib" ] || mnt_skip "$lib not built"
[ -x /usr/bin/python3 ] || mnt_skip "/usr/bin/python3 not installed"
mnt_setup "$build" 4 256M
# The test's other user must reach the mount point.
chmod 711 "$MNT_TMP"

mnt_mount "mode=$mode"
check "$mode: test_preload.py" env LD_PRELOAD="$lib" MNT_TMP="$MNT_TMP" \
	/usr/bin/python3 "$here/test_preload.py" "$MNT"
check "$mode: write_behind.py doorheld" env LD_PRELOAD="$lib" \
	/usr/bin/python3 "$here/write_behind.py" "$MNT" doorheld "$MNT_TMP/refh"
mnt_umount
# Its small writes are answered early, as the mount's are: on the test
# daemon with writes to member 3 failing, a file whose device write failed
# fails its fsync (EIO), and every file whose fsync passed reads back.
if [ -x "$build/tests/nvmefs-fi" ] && command -v setfattr >/dev/null; then
	MNT_DAEMON=tests/nvmefs-fi
	MNT_FOREGROUND=1
	mnt_mount "mode=$mode"
	setfattr -n trusted.nvmefs.fault -v "eio dev=3 ops=w" "$MNT"
	check "$mode: write_behind.py doorfail" env LD_PRELOAD="$lib" \
		/usr/bin/python3 "$here/write_behind.py" "$MNT" doorfail "$MNT_TMP/ref"
	setfattr -n trusted.nvmefs.fault -v "clear" "$MNT"
	mnt_remount "mode=$mode"
	check "$mode: write_behind.py doorcheck" /usr/bin/python3 "$here/write_behind.py" \
		"$MNT" doorcheck "$MNT_TMP/ref"
	mnt_umount
fi
if ! out=$("$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}" 2>&1); then
	echo "$out" >&2
	check "fsck.nvmefs -n clean after the preloaded program ($mode)" false
fi
mnt_result
