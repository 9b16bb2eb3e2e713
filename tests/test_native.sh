#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libnvmefs, the native client (issue 21), on a volume mounted in MODE
# (cached or direct), through tests/test_client.c (each of its tests says
# what it checks):
#  - groups api, coherence and hostile on -o mode=MODE, and the README's
#    example (client/examples/roundtrip.c) writing and reading back 64 MiB
#    of a file that then reads the same through the mount;
#  - MODE cached: group writeback on -o mode=cached,writeback;
#  - group slow on the test daemon nvmefs-fi with every member's I/O slowed
#    by 50 ms, so that requests are in flight long enough: a handle and a
#    region busy while a read uses them, a client SIGKILLed with its writes
#    in flight;
#  - after each unmount fsck.nvmefs -n is clean.
# The daemon must serve through all of it: the mount answers after each
# group. usage: test_native.sh BUILD_DIR MODE
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 2 ] && { [ "$2" = cached ] || [ "$2" = direct ]; } || {
	echo "usage: test_native.sh BUILD_DIR cached|direct" >&2
	exit 2
}
build=$1
mode=$2
mnt_time_limit 240 "$0" "$@"
mnt_need setfattr attr
client=$build/tests/test_client
example=$build/nvmefs-example-roundtrip
for f in "$client" "$example" "$build/tests/nvmefs-fi" "$build/fsck.nvmefs"; do
	[ -x "$f" ] || mnt_skip "$f not built"
done
mnt_setup "$build" 4 256M
# coh_kill_privs writes as uid 65534, which must reach the mount point.
chmod 711 "$MNT_TMP"
MNT_FOREGROUND=1 # the daemon's log in $MNT_TMP/nvmefs.log

fsck_clean() { # WHEN
	local out
	if ! out=$("$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}" 2>&1); then
		echo "$out" >&2
		check "fsck.nvmefs -n clean $1" false
	fi
}

serving() { # GROUP: the daemon still answers through the mount
	check "$mode: the daemon serves the mount after group $1" \
		timeout 10 stat -c %s "$MNT/.nvmefs/stats" >/dev/null
}

run() { # GROUP...: test_client on the mount
	local g
	check "$mode: test_client $*" "$client" "$MNT" "$@"
	for g in "$@"; do serving "$g"; done
}

mnt_mount "mode=$mode"
check "$mode: the README's example writes and reads back 64 MiB" "$example" "$MNT/roundtrip"
check "$mode: the example's file is 64 MiB through the mount" \
	test "$(stat -c %s "$MNT/roundtrip")" = $((64 << 20))
run api coherence hostile
check "$mode: test_client_create (the door's CREATE)" "$build/tests/test_client_create" "$MNT"
mnt_umount
fsck_clean "after api, coherence, hostile ($mode)"

if [ "$mode" = cached ]; then
	mnt_mount mode=cached,writeback
	run writeback
	check "writeback: CREATE refused" "$build/tests/test_client_create" "$MNT" writeback
	mnt_umount
	fsck_clean "after writeback"
fi

MNT_DAEMON=tests/nvmefs-fi
mnt_mount "mode=$mode"
for d in 0 1 2 3; do
	setfattr -n trusted.nvmefs.fault -v "latency dev=$d us=50000" "$MNT"
done
run slow
setfattr -n trusted.nvmefs.fault -v clear "$MNT"
mnt_umount
fsck_clean "after a client was killed mid-write ($mode)"

mnt_result
