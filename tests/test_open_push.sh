#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The open's push (fs/fuse/ops_file.c, open_push): tests/open_push.py on a
# mount in MODE (direct, cached, cached,writeback): the data right after
# overwrites and truncations, no READ for a cold read of a file read
# before, the atime as a local filesystem keeps it, no push over a page a
# shared mapping dirtied, the 64 KiB bound, nothing pushed with -o
# writeback. Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries
# or Debian's python3.
# usage: test_open_push.sh BUILD_DIR [MODE]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: test_open_push.sh BUILD_DIR [MODE]" >&2
	exit 2
fi
build=$1
mode=${2:-direct}
mnt_time_limit 120 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
mnt_setup "$build" 4 256M
mnt_mount "mode=$mode"
check "open_push.py ($mode)" "$py" "$here/open_push.py" "$MNT" "$mode"
mnt_umount
mnt_result
