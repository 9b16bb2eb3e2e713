#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/test_aio_handle.py (the Python package's aio_handle, issue 22) on a
# freshly formatted and mounted volume, mounted -o mode=MODE: everything
# the handle does must give the same bytes as plain file I/O, through the
# native client (the daemon's counters say so), also after the volume is
# unmounted and mounted again under a live handle; then fsck -n is clean.
# MODE writeback (cached,writeback): the daemon refuses native writes
# there, so the handle's writes go through the mount, its reads native.
# MODE direct runs the test daemon tests/nvmefs-fi (the same daemon with
# fault injection) when it is built, and device errors are injected under
# the native client too.
# NVMEFS_TEST_K=PATTERN runs only the tests whose names match it.
# usage: test_aio_handle.sh BUILD_DIR cached|direct|writeback
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# != 2 ]; then
	echo "usage: test_aio_handle.sh BUILD_DIR cached|direct|writeback" >&2
	exit 2
fi
build=$1
mode=$2
case $mode in
cached | direct)
	opts=mode=$mode
	native=all
	;;
writeback)
	opts=mode=cached,writeback
	native=reads
	;;
*) mnt_die "unknown mode $mode" ;;
esac
mnt_time_limit 120 "$0" "$@"
[ -x /usr/bin/python3 ] || mnt_skip "no /usr/bin/python3"
[ -f "$build/python/nvmefs/_paths.py" ] || mnt_skip "$build/python/nvmefs not built"
faults=()
if [ "$mode" = direct ] && [ -x "$build/tests/nvmefs-fi" ]; then
	MNT_DAEMON=tests/nvmefs-fi
	faults=(--faults)
fi
mnt_setup "$build" 4 256M
mnt_mount "$opts"
# The EACCES check runs a child as nobody, who must reach the mount point.
chmod 0711 "$MNT_TMP"
check "test_aio_handle.py on a $mode mount" \
	env PYTHONPATH="$build/python" /usr/bin/python3 "$here/test_aio_handle.py" \
	--dir "$MNT" --native "$native" --mount "$MNT" "${faults[@]}" \
	--remount "$build/$MNT_DAEMON" "$MNT_DEVS" "$opts" "$MNT_TMP/nvmefs.log" \
	${NVMEFS_TEST_K:+-k "$NVMEFS_TEST_K"}
check "nothing left behind by the run" test -z "$(find "$MNT" -mindepth 1 -maxdepth 1 ! -name .nvmefs)"
mnt_umount
check "fsck -n clean after the run" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_result
