#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A full volume fails cleanly and gives its space back. On 3 image files of
# 64M (about 160 MiB of data space):
#  - dd (conv=fsync) of 40 MiB files of a random pattern, one after the
#    other, until one fails: it must fail with "No space left on device"
#    before 10 files, and then statfs shows (almost) nothing available (at
#    most 2 chunks per member) and nearly the whole capacity used; every file
#    holds exactly the pattern's first SIZE bytes (sha256), SIZE being what
#    dd managed to write; used space is what the files have allocated;
#  - deleting one file makes room at once: 4 MiB written right after it fit;
#  - after deleting everything, the free space comes back to its value after
#    mkfs within 10 s; filling again (now with mode=direct) gives the same
#    results; after a remount the files and statfs are unchanged;
#  - empty files created (1000 a directory) until the metadata area is full:
#    it must stop with ENOSPC before 200000 files and 120 s, not crash or
#    hang; statfs then shows no free inode; the daemon still serves, unmounts
#    (last flush) and mounts again with every file there; deleting them
#    gives the inodes and blocks back, and a new file can be written.
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries or python3.
# usage: test_enospc.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_enospc.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 240 "$0" "$@"
py=/usr/bin/python3
mnt_need "$py" python3
ndevs=3
chunk=$((1 << 20))
mnt_setup "$build" "$ndevs" 64M -c 1M

statfs() { # FIELD: stat -f's %FIELD of $MNT
	stat -f -c "%$1" "$MNT"
}

pattern=$MNT_TMP/pattern
head -c 40M /dev/urandom >"$pattern"
declare -A want # file -> sha256 of the pattern's prefix it must hold

mnt_mount
blocks0=$(statfs b) bfree0=$(statfs f) ffree0=$(statfs d) bsize=$(statfs S)
slack=$((2 * ndevs * chunk / bsize)) # blocks a full volume may still show
echo "after mkfs: $blocks0 blocks of $bsize bytes, $bfree0 free, $ffree0 free inodes"

# Files $MNT/NAME_0, _1, ... of the pattern until dd fails; check ENOSPC.
fill() { # NAME
	local i rc err size sum=0 alloc=0 avail used
	for ((i = 0; i < 10; i++)); do
		rc=0
		err=$(dd if="$pattern" of="$MNT/$1_$i" bs=1M conv=fsync status=none 2>&1) || rc=$?
		size=$(stat -c %s "$MNT/$1_$i")
		want[$MNT/$1_$i]=$(head -c "$size" "$pattern" | sha256sum)
		sum=$((sum + size))
		alloc=$((alloc + $(stat -c %b "$MNT/$1_$i") * 512))
		[ "$rc" = 0 ] || break
	done
	avail=$(statfs a)
	used=$(((blocks0 - $(statfs f)) * bsize))
	echo "$1: dd failed after $i files, $((sum >> 20)) MiB written: '$err'; $((avail * bsize >> 10)) KiB available"
	check "$1: no ENOSPC after 10 files of 40 MiB" test "$rc" != 0
	check "$1: dd failed with '$err', want 'No space left on device'" \
		grep -q "No space left on device" <<<"$err"
	check "$1: $((avail * bsize >> 10)) KiB available at ENOSPC (of $((blocks0 * bsize >> 20)) MiB), want at most $((slack * bsize >> 10)) KiB" \
		test "$avail" -le "$slack"
	check "$1: wrote $sum bytes before ENOSPC, capacity $((blocks0 * bsize))" \
		test "$sum" -ge $(((blocks0 - slack) * bsize))
	check "$1: $used bytes used, the files hold $sum" test "$used" -ge "$sum"
	check "$1: $used bytes used, the files have $alloc allocated (st_blocks)" test "$used" = "$alloc"
}

verify() { # WHEN: every file of $want holds its pattern prefix
	local f got
	for f in "${!want[@]}"; do
		got=$(sha256sum <"$f" 2>&1) || true
		check "$1: $f ($(stat -c %s "$f" 2>&1) bytes) is not the pattern's first bytes" \
			test "$got" = "${want[$f]}"
	done
}

# Delete everything; the free blocks and inodes come back within 10 s.
delete_all() { # WHEN
	local end=$((SECONDS + 10)) f d
	find "$MNT" -mindepth 1 -delete
	want=()
	while f=$(statfs f) d=$(statfs d) && [ "$f" != "$bfree0" ] || [ "$d" != "$ffree0" ]; do
		[ "$SECONDS" -lt "$end" ] || break
		sleep 0.2
	done
	echo "$1: deleted everything: $f free blocks, $d free inodes"
	check "$1: $f free blocks 10 s after deleting everything, $bfree0 after mkfs" test "$f" = "$bfree0"
	check "$1: $d free inodes after deleting everything, $ffree0 after mkfs" test "$d" = "$ffree0"
}

# Delete NAME_0 and at once write 4 MiB into its space.
reuse_now() { # NAME
	local err rc=0
	rm "$MNT/$1_0"
	unset "want[$MNT/$1_0]"
	err=$(dd if="$pattern" of="$MNT/$1_now" bs=1M count=4 conv=fsync status=none 2>&1) || rc=$?
	check "$1: 4 MiB right after deleting a 40 MiB file: '$err'" test "$rc" = 0
	want[$MNT/$1_now]=$(head -c "$(stat -c %s "$MNT/$1_now")" "$pattern" | sha256sum)
}

fill cached
verify "cached fill"
reuse_now cached
verify "cached fill, a file replaced"
delete_all "cached fill"

mnt_remount mode=direct
fill direct
verify "direct fill"
reuse_now direct
free1=$(statfs f) files1=$(find "$MNT" -type f | wc -l)
mnt_remount
verify "after a remount"
check "after a remount: $(statfs f) free blocks, $free1 before" test "$(statfs f)" = "$free1"
check "after a remount: $(find "$MNT" -type f | wc -l) files, $files1 before" \
	test "$(find "$MNT" -type f | wc -l)" = "$files1"
delete_all "after a remount"

# Empty files until the metadata area is full (or the cap).
out=$("$py" - "$MNT" <<'EOF'
import errno, os, sys, time
root, n, t0 = sys.argv[1], 0, time.time()
try:
    while n < 200000 and time.time() - t0 < 120:
        d = os.path.join(root, 'e%03d' % (n // 1000))
        if n % 1000 == 0:
            os.mkdir(d)
        os.close(os.open(os.path.join(d, 'f%d' % n), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
        n += 1
    print('cap %d %.1f' % (n, time.time() - t0))
except OSError as e:
    print('%s %d %.1f %s' % (errno.errorcode.get(e.errno, e.errno), n, time.time() - t0, e))
EOF
)
read -r how nfiles secs _ <<<"$out"
echo "empty files: $out"
case $how in
ENOSPC) echo "metadata full: ENOSPC after $nfiles files in $secs s" ;;
cap) echo "metadata not full: stopped at the cap, $nfiles files in $secs s" ;;
*) echo "empty files: stopped by $how after $nfiles files in $secs s" ;;
esac
check "empty files: stopped by '$out', want ENOSPC" test "$how" = ENOSPC
check "empty files: daemon gone after '$out'" test -n "$(_mnt_daemon_pids)"
check "empty files: $(statfs d) free inodes at ENOSPC, want 0" test "$(statfs d)" = 0
nlisted=$(find "$MNT" -type f | wc -l)
check "empty files: $nlisted listed, $nfiles created" test "$nlisted" = "$nfiles"
mnt_remount
nlisted=$(find "$MNT" -type f | wc -l)
check "empty files after a remount: $nlisted listed, $nfiles created" test "$nlisted" = "$nfiles"
delete_all "empty files"
head -c 1M "$pattern" >"$MNT/again"
check "a new file after the metadata was full" cmp -s -n 1M "$pattern" "$MNT/again"
mnt_umount
mnt_result
