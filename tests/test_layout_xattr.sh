#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Layouts and the control directory on a mounted 4-member volume (issue 6):
#  - user.nvmefs.layout: a file's layout; a directory's default, inherited
#    by new files (members rotating) and subdirectories, removable; a file
#    re-laid out while empty and refused (ENOTEMPTY) once it holds data;
#    bad values refused with EINVAL; not listed; kept across a remount;
#  - a file striped over members 1 and 2 of 4 writes only there (the
#    per-member counters of .nvmefs/stats; member 0 also takes the journal);
#  - .nvmefs: absent from the root's listing, read-only, its name not
#    creatable; stats is JSON that moves under load, config says what is in
#    force; nvmefs-stat reads a live mount;
#  - fsck.nvmefs clean at the end.
# usage: test_layout_xattr.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 1 ] || {
	echo "usage: test_layout_xattr.sh BUILD_DIR" >&2
	exit 2
}
build=$1
mnt_time_limit 240 "$0" "$@"
mnt_need getfattr attr
mnt_need python3
mnt_setup "$build" 4 256M -c 256K
mnt_mount mode=direct

X=user.nvmefs.layout
get() { getfattr --absolute-names --only-values -n "$X" "$1" 2>/dev/null; }
is() { # PATH EXPECTED
	local v
	v=$(get "$1") || v="(none)"
	[ "$v" = "$2" ] || {
		echo "  $1: layout '$v', expected '$2'" >&2
		return 1
	}
}
refused() { # ERRNO-TEXT PATH VALUE
	local err
	if err=$(setfattr -n "$X" -v "$3" "$2" 2>&1); then
		echo "  setfattr $3 on $2 succeeded" >&2
		return 1
	fi
	case $err in *"$1"*) return 0 ;; esac
	echo "  setfattr $3 on $2: '$err', expected '$1'" >&2
	return 1
}
# stats KEY...: a number out of .nvmefs/stats, e.g. devices 1 write_bytes.
stat_of() {
	python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v.get(k, 0)
print(v)' "$MNT/.nvmefs/stats" "$@"
}

# ---- layouts ----
touch "$MNT/f0"
check "a new file spans every member" bash -c "getfattr --absolute-names --only-values -n $X '$MNT/f0' | grep -Eq '^chunk=256K,count=4,devs=[0-3]:[0-3]:[0-3]:[0-3]$'"
check "the root has no default" is "$MNT" "(none)"
mkdir "$MNT/d"
check "set a directory default" setfattr -n "$X" -v "chunk=64K,count=2" "$MNT/d"
check "read it back" is "$MNT/d" "chunk=64K,count=2"
mkdir "$MNT/d/sub"
check "a subdirectory inherits" is "$MNT/d/sub" "chunk=64K,count=2"
touch "$MNT/d/a" "$MNT/d/b" "$MNT/d/sub/c"
a=$(get "$MNT/d/a") b=$(get "$MNT/d/b")
check "a file inherits chunk and count ($a)" bash -c "[[ '$a' =~ ^chunk=64K,count=2,devs=[0-3]:[0-3]$ ]]"
check "files rotate over the members ($a, $b)" test "$a" != "$b"
check "a file in the subdirectory inherits" bash -c "get() { getfattr --absolute-names --only-values -n $X \"\$1\"; }; [[ \$(get '$MNT/d/sub/c') =~ ^chunk=64K,count=2, ]]"
check "the layout is not listed" bash -c "! getfattr --absolute-names -d -m - '$MNT/d/a' '$MNT/d' 2>/dev/null | grep -q nvmefs"

touch "$MNT/e"
check "re-lay out an empty file" setfattr -n "$X" -v "devs=3" "$MNT/e"
check "...to member 3 alone" is "$MNT/e" "chunk=256K,count=1,devs=3"
echo data >"$MNT/full"
check "a file with data keeps its layout" refused "Directory not empty" "$MNT/full" "count=1"
truncate -s 1M "$MNT/sized"
check "a sized file keeps its layout" refused "Directory not empty" "$MNT/sized" "count=1"
for v in "chunk=3K" "chunk=2G" "chunk=1k1" "count=0" "count=5" "devs=4" "devs=1:1" \
	"devs=1:2,count=3" "size=1M" "chunk" ",," "chunk=64K,chunk=128K" "devs=0:1:2,devs=1"; do
	check "bad value '$v' refused" refused "Invalid argument" "$MNT/e" "$v"
done
check "a symlink has no layout to set" bash -c "ln -s e '$MNT/l' && ! setfattr -h -n $X -v count=1 '$MNT/l' 2>/dev/null"

# A file striped over members 1 and 2 writes only there.
mkdir "$MNT/two"
check "explicit members" setfattr -n "$X" -v "devs=1:2,chunk=128K" "$MNT/two"
head -c 8M /dev/urandom >"$MNT_TMP/src"
sync
declare -A before
for d in 0 1 2 3; do before[$d]=$(stat_of devices "$d" write_bytes); done
dd if="$MNT_TMP/src" of="$MNT/two/data" bs=1M oflag=direct status=none
check "the file is on 1 and 2" is "$MNT/two/data" "chunk=128K,count=2,devs=1:2"
for d in 1 2; do
	w=$(($(stat_of devices "$d" write_bytes) - before[$d]))
	check "member $d took half the file ($w bytes)" test "$w" -ge $((4 << 20))
done
w=$(($(stat_of devices 3 write_bytes) - before[3]))
check "member 3 took nothing ($w bytes)" test "$w" = 0
w=$(($(stat_of devices 0 write_bytes) - before[0]))
check "member 0 took only metadata ($w bytes)" test "$w" -lt $((1 << 20))
check "the data reads back" cmp "$MNT_TMP/src" "$MNT/two/data"

check "remove a directory default" setfattr -x "$X" "$MNT/d"
check "...gone" is "$MNT/d" "(none)"
touch "$MNT/d/after"
check "...new files span every member again" bash -c "getfattr --absolute-names --only-values -n $X '$MNT/d/after' | grep -q ',count=4,'"

mnt_remount mode=direct
check "a directory default survives a remount" is "$MNT/d/sub" "chunk=64K,count=2"
check "a file's layout survives a remount" is "$MNT/two/data" "chunk=128K,count=2,devs=1:2"
check "a re-laid-out file survives a remount" is "$MNT/e" "chunk=256K,count=1,devs=3"
check "its data too" cmp "$MNT_TMP/src" "$MNT/two/data"

# ---- the control directory ----
check ".nvmefs is not in the root's listing" bash -c "! ls -a '$MNT' | grep -qx .nvmefs"
check ".nvmefs lists stats and config" test "$(ls "$MNT/.nvmefs" | tr '\n' ' ')" = "config stats "
check "stats is JSON" python3 -c "import json; json.load(open('$MNT/.nvmefs/stats'))"
check "config names the members" grep -qx "member.2 = ${MNT_DEV_LIST[2]}" "$MNT/.nvmefs/config"
check "config says direct" grep -qx "mode = direct" "$MNT/.nvmefs/config"
check "stats cannot be written" bash -c "! echo x 2>/dev/null >'$MNT/.nvmefs/stats'"
check "no .nvmefs can be made in the root" bash -c "! mkdir '$MNT/.nvmefs' 2>/dev/null && ! touch '$MNT/.nvmefs' 2>/dev/null"
check "nor renamed to" bash -c "! mv '$MNT/f0' '$MNT/.nvmefs' 2>/dev/null && test -e '$MNT/f0'"
eperm() { # CMD...: fails with EPERM
	local err
	if err=$("$@" 2>&1); then
		echo "  $* succeeded" >&2
		return 1
	fi
	case $err in *"Operation not permitted"*) return 0 ;; esac
	echo "  $*: '$err', expected EPERM" >&2
	return 1
}
check "rmdir .nvmefs: EPERM" eperm rmdir "$MNT/.nvmefs"
check "rm -rf .nvmefs fails" eperm rm -rf "$MNT/.nvmefs"
check "mv .nvmefs: EPERM" eperm mv "$MNT/.nvmefs" "$MNT/elsewhere"
check "mkdir in .nvmefs: EPERM" eperm mkdir "$MNT/.nvmefs/d"
check "rm .nvmefs/stats: EPERM" eperm rm -f "$MNT/.nvmefs/stats"
check "ln .nvmefs/stats: EPERM" eperm ln "$MNT/.nvmefs/stats" "$MNT/statslink"
check "setfattr on stats: EPERM" eperm setfattr -n user.x -v 1 "$MNT/.nvmefs/stats"
check "chmod stats: EPERM" eperm chmod 666 "$MNT/.nvmefs/stats"
# An open control file keeps reading after ls -l (readdirplus) of its
# directory: lookup and readdirplus give the same generation (they did not,
# and the kernel then took the cached inode for a stale one: EIO).
exec 3<"$MNT/.nvmefs/config"
sleep 1.2
ls -l "$MNT/.nvmefs" >/dev/null
check "an open control file still reads after ls -l" bash -c "head -1 <&3 | grep -q '^version = '"
exec 3<&-
w0=$(stat_of devices 1 write_bytes) r0=$(stat_of devices 1 read_bytes) q0=$(stat_of requests WRITE)
dd if=/dev/zero of="$MNT/load" bs=1M count=16 oflag=direct status=none
dd if="$MNT/load" of=/dev/null bs=1M iflag=direct status=none
w1=$(stat_of devices 1 write_bytes) r1=$(stat_of devices 1 read_bytes) q1=$(stat_of requests WRITE)
check "written bytes move under load ($w0 -> $w1)" test "$w1" -ge $((w0 + (4 << 20)))
check "read bytes move under load ($r0 -> $r1)" test "$r1" -ge $((r0 + (4 << 20)))
check "WRITE requests are counted ($q0 -> $q1)" test "$q1" -ge $((q0 + 16))
check "the pool is reported" test "$(stat_of pool buffers)" -gt 0
if [ -x "$build/nvmefs-stat" ]; then
	check "nvmefs-stat reads the mount" bash -c "'$build/nvmefs-stat' '$MNT' | grep -q '${MNT_DEV_LIST[3]}'"
	check "nvmefs-stat with an interval" bash -c "'$build/nvmefs-stat' -c 2 '$MNT' 0.2 >/dev/null"
fi

mnt_umount
check "fsck clean" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_result
