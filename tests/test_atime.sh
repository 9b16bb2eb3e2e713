#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The atime mount options, which the daemon keeps itself (the kernel leaves
# a FUSE file's atime to its server: it ignores the mount's own atime flags
# there). On a volume mounted with
#   noatime      no read moves atime: not cat, not an O_DIRECT read, not
#                running the file (xfstests generic/120);
#   relatime     (the default) a read moves an atime not newer than mtime
#                or ctime, and the next read does not;
#   strictatime  every read moves it, and every cat in cached mode too
#                (each open then starts with an empty page cache);
#   nodiratime   (here with relatime) mounts: generic/003 remounts with it.
# libfuse 3.14 itself refuses relatime, strictatime and nodiratime: nvmefs
# must take them, as mount(8) passes them on to it.
# The other reads that must reach the daemon are O_DIRECT: in cached mode a
# read served from the page cache reaches no FUSE server.
# usage: test_atime.sh BUILD [cached|direct]
set -euo pipefail
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib_mount.sh"
mnt_time_limit 120 "$0" "$@"
build=$1
mode=${2:-direct}
mnt_setup "$build" 4 256M

atime() { stat -c %X "$1"; }
# An atime in 2001: older than the file's mtime and ctime.
age() { touch -a -d '2001-01-01 00:00:00' "$1"; }
dread() { dd if="$1" of=/dev/null bs=4096 iflag=direct status=none; }
same() { [ "$(atime "$1")" = "$2" ]; }
later() { [ "$(atime "$1")" -gt "$2" ]; }

for opts in noatime relatime,nodiratime strictatime; do
	mnt_mount "mode=$mode,$opts"
	policy=${opts%%,*}
	f=$MNT/data
	head -c 8192 /dev/urandom >"$f"
	cp "$(type -P true)" "$MNT/prog"
	age "$f"
	age "$MNT/prog"
	a0=$(atime "$f")
	p0=$(atime "$MNT/prog")
	dread "$f"
	a1=$(atime "$f")
	sleep 1.1
	dread "$f"
	case $policy in
	noatime)
		check "noatime: an O_DIRECT read leaves atime" same "$f" "$a0"
		cat "$f" >/dev/null
		check "noatime: cat leaves atime" same "$f" "$a0"
		"$MNT/prog"
		check "noatime: running the file leaves its atime (generic/120)" \
			same "$MNT/prog" "$p0"
		;;
	relatime)
		check "relatime: a read moves an atime older than mtime" later "$f" "$a0"
		check "relatime: the next read leaves it" same "$f" "$a1"
		;;
	strictatime)
		check "strictatime: a read moves atime" later "$f" "$a0"
		check "strictatime: the next read moves it again" later "$f" "$a1"
		# In cached mode too for cat, whose pages the last cat left in
		# the page cache (generic/003): each open starts afresh.
		cat "$f" >/dev/null
		a2=$(atime "$f")
		sleep 1.1
		cat "$f" >/dev/null
		check "strictatime: a second cat moves it again" later "$f" "$a2"
		;;
	esac
	rm "$f" "$MNT/prog"
	mnt_umount
done
mnt_result
