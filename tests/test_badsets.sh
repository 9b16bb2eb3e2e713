#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mkfs.nvmefs and nvmefs refuse bad device sets with a clear message, and
# overwrite nothing when they refuse:
#  - mkfs on an image holding ext4, xfs, btrfs or an nvmefs volume (also one
#    whose primary label is gone) is refused without -f: exit 1, the message
#    names the image and the signature, the image's sha256 is unchanged; with
#    -f it formats (the old signature is gone for blkid, the image mounts);
#  - mkfs with a path given twice (also through a symlink), a too-small image
#    (4 KiB, 1 MiB, 40 MiB), a nonexistent path, a bad -c (3K, 2G, abc, 0,
#    1M5), a label over 63 bytes, or a good image next to an ext4 one exits
#    non-zero naming the input and writes nothing; -L of 63 bytes works;
#  - with two 3-member volumes A and B, nvmefs refuses a member missing, a
#    member of B among A's, a path given twice (also through a symlink), a
#    cp'd copy of a member in place of another one, a truncated copy of a
#    member, a plain zero image, and a second mount of a mounted volume on
#    its own mount point: exit non-zero within 30 s, a message naming the
#    member, no mount, no daemon left, every image involved byte-identical
#    (sha256); mkfs on a member of the mounted volume is refused too (a
#    second mount elsewhere binds the first: test_mount_again.sh);
#  - members in shuffled orders mount and show the same files; a member whose
#    first 4 KiB are zeroed (primary label gone) still mounts from the backup
#    label, with a warning, and the files read back;
#  - nvmefs refuses contradictory options (writeback or dirty= or
#    readahead= with mode=direct, prefetch= in cached mode, dirty= without
#    writeback) naming both, and members given space-separated, saying that
#    they are comma-separated and showing the command meant;
#  - fsck.nvmefs on a mounted volume is refused at once (exit 8, naming the
#    member and the daemon that has it mounted), while the README's
#    "umount MNT && fsck.nvmefs MEMBERS" works (3 rounds), as do "umount &&
#    nvmefs" and "umount && mkfs.nvmefs -f": they wait for the daemon that
#    is still releasing the members.
# Exit 77 (skip) without root, /dev/fuse, the nvmefs binaries, mkfs.ext4,
# mkfs.xfs or mkfs.btrfs.
# usage: test_badsets.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

if [ $# -ne 1 ]; then
	echo "usage: test_badsets.sh BUILD_DIR" >&2
	exit 2
fi
build=$1
mnt_time_limit 240 "$0" "$@"
[ "$(id -u)" = 0 ] || mnt_skip "mounting needs root"
mnt_need mkfs.ext4 e2fsprogs
mnt_need mkfs.xfs xfsprogs
mnt_need mkfs.btrfs btrfs-progs
mnt_need blkid util-linux
mnt_need sha256sum coreutils

# Volume A: the 3 images mnt_setup formats.
mnt_setup "$build" 3 64M -L A
mkfs=$build/mkfs.nvmefs
img=$MNT_IMGDIR
a=("${MNT_DEV_LIST[@]}")

sums() { # FILE...: their sha256 sums ("missing" for a file not there)
	local f
	for f; do
		if [ -e "$f" ]; then
			sha256sum "$f"
		else
			echo "missing $f"
		fi
	done
}

# The functions below run through check; shellcheck cannot see that.
# shellcheck disable=SC2317
not_mounted() { # DIR
	! mountpoint -q "$1"
}

# shellcheck disable=SC2317
not_blkid_type() { # TYPE FILE: blkid -p does not take FILE for TYPE
	[ "$(blkid -p -s TYPE -o value "$2" 2>/dev/null)" != "$1" ]
}

# shellcheck disable=SC2317
all_zero() { # FILE
	cmp -s -n "$(stat -c %s "$1")" "$1" /dev/zero
}

# WHAT PATTERN... -- CMD...: CMD exits non-zero (not by timeout) and its
# output contains every PATTERN (fixed strings). The output is in $out.
out=""
expect_refusal() {
	local what=$1 rc=0 p pats=()
	shift
	while [ "$1" != -- ]; do
		pats+=("$1")
		shift
	done
	shift
	out=$(timeout 30 "$@" </dev/null 2>&1) || rc=$?
	check "$what: exit status $rc, want a refusal (output: $out)" \
		test "$rc" -ne 0 -a "$rc" -ne 124 -a "$rc" -lt 128
	for p in "${pats[@]}"; do
		check "$what: message '$out' lacks '$p'" grep -qF -- "$p" <<<"$out"
	done
}

# ---- mkfs on images holding a filesystem ----

# NAME SIZE MAKER...: an image of SIZE holding what MAKER (given the path) writes.
make_fs_image() {
	local name=$1 size=$2
	shift 2
	truncate -s "$size" "$img/$name.img"
	"$@" "$img/$name.img" >"$MNT_TMP/$name.mkfs.log" 2>&1 ||
		mnt_die "$* $img/$name.img failed: $(cat "$MNT_TMP/$name.mkfs.log")"
}
make_fs_image ext4 64M mkfs.ext4 -q -F
make_fs_image xfs 320M mkfs.xfs -q -f
make_fs_image btrfs 128M mkfs.btrfs -q -f
make_fs_image nvmefs 64M "$mkfs" -q
make_fs_image backup 64M "$mkfs" -q
dd if=/dev/zero of="$img/backup.img" bs=4096 count=1 conv=notrunc status=none

# NAME SIGNATURE OLD_BLKID_TYPE
foreign() {
	local name=$1 sig=$2 type=$3 f=$img/$1.img before uuid rc=0
	before=$(sums "$f")
	expect_refusal "mkfs on $name" "$f" "$sig" "use -f" -- "$mkfs" "$f"
	check "mkfs on $name: image changed although refused" test "$(sums "$f")" = "$before"
	uuid=$("$mkfs" -f -q "$f" 2>&1) || rc=$?
	check "mkfs -f on $name: exit status $rc ($uuid)" test "$rc" = 0
	check "mkfs -f on $name: prints a UUID, not '$uuid'" \
		grep -qxE '[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}' <<<"$uuid"
	if [ -n "$type" ]; then
		# blkid -p: 2 means nothing found. An old superblock left behind
		# makes blkid, udev and mount(8) take the image for $type.
		check "mkfs -f on $name: blkid -p still finds $type ($(blkid -p "$f" 2>&1))" \
			not_blkid_type "$type" "$f"
	fi
	expect_refusal "mkfs again on $name" "$f" "an nvmefs volume member" -- "$mkfs" "$f"
	if timeout 30 "$build/nvmefs" "$f" "$MNT" </dev/null >"$MNT_TMP/$name.mount.log" 2>&1; then
		check "$name formatted with -f: not mounted" mountpoint -q "$MNT"
		check "$name formatted with -f: empty root" test -z "$(ls -A "$MNT")"
		mnt_umount
	else
		check "$name formatted with -f: mount failed: $(cat "$MNT_TMP/$name.mount.log")" false
	fi
}
foreign ext4 "holds a filesystem signature (ext4)" ext4
foreign xfs "holds a filesystem signature (xfs)" xfs
foreign btrfs "holds a filesystem signature (btrfs)" btrfs
foreign nvmefs "holds an nvmefs volume member" ""
foreign backup "holds an nvmefs volume member (backup label)" ""

# ---- mkfs: bad input, nothing written ----

zero=$img/zero.img
truncate -s 64M "$zero"
zsum=$(sums "$zero")
ln -s "$zero" "$img/zero.link"
truncate -s 4K "$img/tiny4k.img"
truncate -s 1M "$img/tiny1m.img"
truncate -s 40M "$img/small40m.img"
make_fs_image ext4b 64M mkfs.ext4 -q -F
e4sum=$(sums "$img/ext4b.img")
expect_refusal "mkfs path given twice" "$zero: given twice" -- "$mkfs" "$zero" "$zero"
expect_refusal "mkfs path given twice (symlink)" "given twice" "$img/zero.link" -- \
	"$mkfs" "$zero" "$img/zero.link"
expect_refusal "mkfs 4 KiB image" "$img/tiny4k.img: too small" -- "$mkfs" "$img/tiny4k.img"
expect_refusal "mkfs 1 MiB image" "$img/tiny1m.img: too small" -- "$mkfs" "$img/tiny1m.img"
expect_refusal "mkfs 1 MiB second member" "$img/tiny1m.img: too small" -- \
	"$mkfs" "$zero" "$img/tiny1m.img"
expect_refusal "mkfs 40 MiB first member (no room for metadata)" "$img/small40m.img: too small" -- \
	"$mkfs" "$img/small40m.img" "$zero"
expect_refusal "mkfs nonexistent path" "$img/nope.img" "no such file" -- "$mkfs" "$zero" "$img/nope.img"
check "mkfs nonexistent path: created it" test ! -e "$img/nope.img"
for c in 3K 2G abc 0 1M5; do
	expect_refusal "mkfs -c $c" "'$c'" "chunk" -- "$mkfs" -c "$c" "$zero"
done
long=$(printf 'L%.0s' {1..64})
expect_refusal "mkfs 64-byte label" "$long" "63 bytes" -- "$mkfs" -L "$long" "$zero"
expect_refusal "mkfs good image next to an ext4 one" "$img/ext4b.img" "ext4" -- \
	"$mkfs" "$zero" "$img/ext4b.img"
check "refused mkfs runs wrote to $zero" test "$(sums "$zero")" = "$zsum"
check "refused mkfs wrote to $img/ext4b.img" test "$(sums "$img/ext4b.img")" = "$e4sum"
for f in tiny4k tiny1m small40m; do
	check "refused mkfs wrote to $f.img" all_zero "$img/$f.img"
done
label63=${long:1}
truncate -s 64M "$img/label63.img"
out=$("$mkfs" -L "$label63" "$img/label63.img" 2>&1) || check "mkfs -L (63 bytes) failed: $out" false
check "mkfs -L (63 bytes): label not printed ($out)" grep -qF "label: $label63" <<<"$out"

# ---- mount refusals ----

make_vol() { # NAME: 3 images $img/NAME{0,1,2}.img formatted as one volume
	local i
	for i in 0 1 2; do truncate -s 64M "$img/$1$i.img"; done
	"$mkfs" -q -L "$1" "$img/$1"{0,1,2}.img >/dev/null
}
make_vol b
b=("$img"/b{0,1,2}.img)

# The default mode: direct where direct_io files can be mapped shared
# (Linux 6.6+), else cached; cached too with an option only it has.
want_mode=cached
mnt_direct_mmap && want_mode=direct
mnt_mount
check "default mode is $want_mode on Linux $(uname -r)" grep -qx "mode = $want_mode" "$MNT/.nvmefs/config"
mnt_umount
mnt_mount readahead=8M
check "readahead= without mode= mounts cached" grep -qx "mode = cached" "$MNT/.nvmefs/config"
mnt_umount

# Some files on A, to read back after the mounts that must work.
mnt_mount
mkdir "$MNT/dir"
head -c 3000000 /dev/urandom >"$MNT/dir/file"
echo hello >"$MNT/hello"
want=$(cd "$MNT" && sha256sum dir/file hello)
# A mounted volume: a second mount on its own mount point and mkfs on a
# member are refused; a second mount elsewhere binds the first
# (fs/tools/remount_again.c, tests/test_mount_again.sh).
mkdir "$MNT_TMP/mnt2"
expect_refusal "second mount of a mounted volume on its mount point" "${a[1]}" "busy" -- \
	"$build/nvmefs" "${a[1]},${a[0]},${a[2]}" "$MNT"
if out=$(timeout 30 "$build/nvmefs" "${a[1]},${a[0]},${a[2]}" "$MNT_TMP/mnt2" </dev/null 2>&1); then
	check "second mount of a mounted volume elsewhere: the same files" \
		test "$(cat "$MNT_TMP/mnt2/hello" 2>/dev/null)" = hello
	umount "$MNT_TMP/mnt2" || umount -l "$MNT_TMP/mnt2"
else
	check "second mount of a mounted volume elsewhere binds the first: $out" false
fi
check "second mount of a mounted volume elsewhere: unmounted again" not_mounted "$MNT_TMP/mnt2"
expect_refusal "mkfs -f on a member of a mounted volume" "${a[2]}" "busy" -- \
	"$mkfs" -f "${a[2]}"
mnt_umount

# Volume A mounts with its members in ORDER and shows the files.
mount_works() { # WHAT DEVS
	local got
	if ! out=$(timeout 30 "$build/nvmefs" "$2" "$MNT" </dev/null 2>&1); then
		check "$1: nvmefs $2 failed: $out" false
		return 0
	fi
	got=$(cd "$MNT" && sha256sum dir/file hello 2>&1) || true
	check "$1: files differ: '$got', want '$want'" test "$got" = "$want"
	mnt_umount
}

cp --sparse=always "${a[1]}" "$img/a1copy.img"
cp --sparse=always "${a[2]}" "$img/a2short.img"
truncate -s 60M "$img/a2short.img"
ln -s "${a[1]}" "$img/a1.link"

# WHAT DEVS PATTERN...: nvmefs DEVS is refused and changes none of DEVS.
mount_refused() {
	local what=$1 devs=$2 list before
	shift 2
	IFS=, read -r -a list <<<"$devs"
	before=$(sums "${list[@]}")
	expect_refusal "mount $what" "$@" -- "$build/nvmefs" "$devs" "$MNT"
	check "mount $what: $MNT is mounted" not_mounted "$MNT"
	check "mount $what: daemon left: $(_mnt_daemon_pids | xargs)" test -z "$(_mnt_daemon_pids)"
	check "mount $what: images changed" test "$(sums "${list[@]}")" = "$before"
	if mountpoint -q "$MNT"; then
		mnt_umount
	fi
}
mount_refused "member 2 missing" "${a[0]},${a[1]}" "member 2 is missing"
mount_refused "member 0 missing" "${a[2]},${a[1]}" "member 0 is missing"
mount_refused "member of B among A's" "${a[0]},${b[1]},${a[2]}" "${b[1]}: belongs to another volume"
mount_refused "member of B first" "${b[0]},${a[1]},${a[2]}" "belongs to another volume"
mount_refused "4 members: B's member 1 added" "${a[0]},${a[1]},${a[2]},${b[1]}" \
	"belongs to another volume"
mount_refused "path given twice" "${a[0]},${a[1]},${a[1]}" "${a[1]}: given twice"
mount_refused "path given twice (symlink)" "${a[0]},${a[1]},$img/a1.link" "given twice"
mount_refused "copy of member 1 for member 2" "${a[0]},${a[1]},$img/a1copy.img" \
	"claims to be member 1" "$img/a1copy.img"
mount_refused "truncated member 2" "${a[0]},${a[1]},$img/a2short.img" \
	"$img/a2short.img" "formatted as"
mount_refused "zero image for member 2" "${a[0]},${a[1]},$zero" "$zero: not an nvmefs member"
mount_refused "nonexistent member" "${a[0]},${a[1]},$img/nope.img" "$img/nope.img"

# ---- contradictory options, members separated by spaces ----

# OPTS PATTERN...: nvmefs A MNT -o OPTS is refused, naming PATTERNs.
opts_refused() {
	local opts=$1
	shift
	expect_refusal "mount -o $opts" "$@" -- "$build/nvmefs" "${a[0]},${a[1]},${a[2]}" "$MNT" -o "$opts"
	check "mount -o $opts: $MNT is mounted" not_mounted "$MNT"
	if mountpoint -q "$MNT"; then
		mnt_umount
	fi
}
opts_refused writeback,mode=direct "writeback" "mode=direct" "contradict"
opts_refused mode=direct,writeback "writeback" "mode=direct" "contradict"
opts_refused mode=direct,readahead=4M "readahead=4M" "mode=direct"
# Without mode=, an option only cached mode has makes cached the default.
opts_refused writeback,prefetch=4 "prefetch=4" "mode=cached (the default)"
opts_refused mode=cached,prefetch=4 "prefetch=4" "mode=cached"
opts_refused dirty=256M "dirty=256M" "writeback"
opts_refused mode=direct,dirty=256M,writeback "writeback" "mode=direct"
expect_refusal "members separated by spaces" "unexpected argument '${a[2]}'" \
	"comma-separated" "${a[0]},${a[1]},${a[2]} $MNT" -- "$build/nvmefs" "${a[@]}" "$MNT"
check "members separated by spaces: $MNT is mounted" not_mounted "$MNT"
expect_refusal "an argument after the mount point" "unexpected argument 'stray'" \
	"comma-separated" -- "$build/nvmefs" "${a[0]},${a[1]},${a[2]}" "$MNT" stray
check "an argument after the mount point: $MNT is mounted" not_mounted "$MNT"

mount_works "members in order" "${a[0]},${a[1]},${a[2]}"
mount_works "members shuffled (2,0,1)" "${a[2]},${a[0]},${a[1]}"
mount_works "members shuffled (1,2,0)" "${a[1]},${a[2]},${a[0]}"

# ---- right after umount ----

# The daemon releases the members a moment after umount(8) returns: the
# README's "umount MNT && fsck.nvmefs MEMBERS" (and mkfs, and mounting
# again) wait for it, while a mounted volume is refused at once.
fsck=$build/fsck.nvmefs
for round in 1 2 3; do
	mnt_mount
	echo "$round" >"$MNT/round"
	start=$SECONDS rc=0
	out=$(timeout 30 "$fsck" "${a[@]}" 2>&1) || rc=$?
	check "fsck on the mounted volume: exit $rc, want 8 ($out)" test "$rc" = 8
	check "fsck on the mounted volume: took $((SECONDS - start)) s, want a refusal at once" \
		test $((SECONDS - start)) -le 5
	for p in "${a[0]}: image file is busy" "which has the volume mounted"; do
		check "fsck on the mounted volume: message '$out' lacks '$p'" grep -qF -- "$p" <<<"$out"
	done
	rc=0
	out=$(umount "$MNT" && timeout 60 "$fsck" "${a[@]}" 2>&1) || rc=$?
	check "umount && fsck.nvmefs (round $round): exit $rc, want 0 ($out)" test "$rc" = 0
	check "umount && fsck.nvmefs (round $round): not clean: $out" grep -qx clean <<<"$out"
	_mnt_wait_daemon 30 || check "daemon still running after umount" false
done
mnt_mount
rc=0
# (Output to a file: the daemon must not hold a pipe that is read to its end.)
umount "$MNT" && timeout 60 "$build/nvmefs" "$MNT_DEVS" "$MNT" </dev/null >"$MNT_TMP/again.log" 2>&1 ||
	rc=$?
check "umount && nvmefs (mount again): exit $rc, want 0 ($(cat "$MNT_TMP/again.log"))" test "$rc" = 0
check "umount && nvmefs: the volume is not mounted again" mountpoint -q "$MNT"
check "umount && nvmefs: files differ" test "$(cat "$MNT/round" 2>&1)" = 3
if mountpoint -q "$MNT"; then
	mnt_umount
fi
timeout 30 "$build/nvmefs" "${b[0]},${b[1]},${b[2]}" "$MNT" </dev/null >"$MNT_TMP/b.mount.log" 2>&1 ||
	check "mount B failed: $(cat "$MNT_TMP/b.mount.log")" false
rc=0
out=$(umount "$MNT" && timeout 60 "$mkfs" -q -f "${b[@]}" 2>&1) || rc=$?
check "umount && mkfs.nvmefs -f: exit $rc, want 0 ($out)" test "$rc" = 0
_mnt_wait_daemon 30 || check "daemon still running after umount" false

# Damaged primary label: the backup label in the last block still mounts.
dd if=/dev/zero of="${a[1]}" bs=4096 count=1 conv=notrunc status=none
mount_works "member 1 without its primary label" "${a[2]},${a[1]},${a[0]}"
check "no warning about the damaged label in '$out'" grep -qF "${a[1]}: primary label damaged" <<<"$out"
mount_works "member 1 without its primary label, again" "${a[0]},${a[1]},${a[2]}"

mnt_result
