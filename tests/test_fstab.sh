#!/bin/bash
# SPDX-License-Identifier: MIT
# Mounting the standard way: `cmake --install` into a scratch prefix, then,
# in a private mount namespace (so neither /etc/fstab nor /usr/local/sbin of
# the machine is touched), that prefix's sbin bound over /usr/local/sbin and
# a scratch fstab over /etc/fstab:
#   - fstab lines of type fuse.nvmefs naming the volume by uuid=, label= and
#     by paths; mount -a, mount MOUNTPOINT, umount, and mount -a again
#     (already mounted: nothing happens);
#   - umount then mount at once (the old daemon may still hold the members);
#   - discovery: a loop device and its backing file are one member; a
#     missing member, a copied member, a label on two volumes and a bad UUID
#     are refused by name;
#   - the mount command mkfs.nvmefs prints works as printed, on image files
#     (with search=) and on block devices (without);
#   - --help, --version, -o debug logging to stderr in the foreground.
#
#   test_fstab.sh BUILD_DIR     (exit 0 pass, 1 fail, 77 skip)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# check, mnt_skip and MNT_FAIL (this test mounts through mount(8), not mnt_mount)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

# ---- inside the namespace ----
inner() {
	local build=$1 ua ub uc ud n log loop i hint f loops=()
	t=$2 # global: the EXIT trap needs it
	local img=$t/imgs

	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

	inner_cleanup() {
		local m pid i
		for m in "$t"/m*; do
			mountpoint -q "$m" 2>/dev/null && { umount "$m" 2>/dev/null || umount -l "$m"; }
		done
		# The daemons finish their last flush after umount returns.
		for i in $(seq 1 100); do
			pgrep -f "^nvmefs .*$t/" >/dev/null || break
			sleep 0.1
		done
		for pid in $(pgrep -f "^nvmefs .*$t/"); do kill -9 "$pid" 2>/dev/null || true; done
	}
	trap inner_cleanup EXIT
	mount --bind "$t/prefix/sbin" /usr/local/sbin
	mkdir -p "$img" "$t/mA" "$t/mB" "$t/mC" "$t/mD"
	for f in a0 a1 b0 b1 b2 c0 c1 d0; do truncate -s 128M "$img/$f"; done
	ua=$(mkfs.nvmefs -q -L alpha "$img/a0" "$img/a1")
	ub=$(mkfs.nvmefs -q -L beta "$img/b0" "$img/b1" "$img/b2")
	uc=$(mkfs.nvmefs -q "$img/c0" "$img/c1")
	echo "volumes: alpha $ua, beta $ub, unlabelled $uc"
	cat >"$t/fstab" <<-EOF
		# scratch fstab of test_fstab.sh
		uuid=$ua  $t/mA  fuse.nvmefs  search=$img,mode=direct  0 0
		label=beta  $t/mB  fuse.nvmefs  defaults,search=$img,nofail  0 0
		$img/c0,$img/c1  $t/mC  fuse.nvmefs  noauto  0 0
	EOF
	mount --bind "$t/fstab" /etc/fstab

	check "mount -a" mount -a
	check "uuid= line mounted" mountpoint -q "$t/mA"
	check "label= line mounted" mountpoint -q "$t/mB"
	check "noauto line left alone" bash -c "! mountpoint -q '$t/mC'"
	check "mount MOUNTPOINT (paths)" mount "$t/mC"
	check "paths line mounted" mountpoint -q "$t/mC"
	n=$(findmnt -rn -t fuse.nvmefs | grep -c "$t/")
	check "three volumes mounted ($n)" test "$n" = 3
	check "mount -a again" mount -a
	n=$(findmnt -rn -t fuse.nvmefs | grep -c "$t/")
	check "mount -a again mounts nothing more ($n)" test "$n" = 3
	check "mode from fstab in force" grep -qx "mode = direct" "$t/mA/.nvmefs/config"
	check "members found in the search dir" grep -qx "member.1 = $img/a1" "$t/mA/.nvmefs/config"
	check "source is the fstab spec" test "$(findmnt -rn -o SOURCE "$t/mA")" = "uuid=$ua"
	echo hello >"$t/mA/f"
	check "umount" umount "$t/mA"
	check "mount at once after umount" mount "$t/mA"
	check "data kept" grep -qx hello "$t/mA/f"
	check "umount all" umount "$t/mA" "$t/mB" "$t/mC"
	n=$(findmnt -rn -t fuse.nvmefs | grep -c "$t/" || true)
	check "nothing left mounted ($n)" test "$n" = 0

	# A second volume labelled beta makes the label ambiguous.
	ud=$(mkfs.nvmefs -q -L beta "$img/d0")
	log=$t/err
	check "ambiguous label refused" bash -c "! mount '$t/mB' 2>'$log'"
	check "...naming both UUIDs" grep -q "$ud" "$log"
	check "...and the first" grep -q "$ub" "$log"
	rm "$img/d0"
	# A missing member.
	mv "$img/b2" "$t/b2.away"
	check "missing member refused" bash -c "! nvmefs uuid=$ub '$t/mB' -o search=$img 2>'$log'"
	check "...naming it" grep -q "member 2 was not found" "$log"
	mv "$t/b2.away" "$img/b2"
	# A copied member.
	cp --sparse=always "$img/a1" "$img/a1.copy"
	check "copied member refused" bash -c "! nvmefs UUID=$ua '$t/mA' -o search=$img 2>'$log'"
	check "...naming both copies" grep -q "found twice" "$log"
	rm "$img/a1.copy"
	check "bad UUID refused" bash -c "! nvmefs UUID=not-a-uuid '$t/mA' 2>'$log'"
	check "...naming it" grep -q "bad UUID 'not-a-uuid'" "$log"
	check "unknown label refused" bash -c "! nvmefs LABEL=nosuch '$t/mA' -o search=$img 2>'$log'"

	# A loop device over a0: found among the block devices, and the same
	# member as a0 in the search directory.
	loop=$(losetup -f --show "$img/a0")
	echo "$loop" >>"$t/loops"
	check "loop + search dir mount" nvmefs "uuid=$ua" "$t/mA" -o search="$img"
	check "the block device is kept" grep -qx "member.0 = $loop" "$t/mA/.nvmefs/config"
	check "umount" umount "$t/mA"
	for i in $(seq 1 100); do pgrep -f "^nvmefs .*$t/" >/dev/null || break; sleep 0.1; done
	check "without the search dir member 1 is missing" \
		bash -c "! nvmefs uuid=$ua '$t/mA' 2>'$log' && grep -q 'member 1 was not found' '$log'"
	losetup -d "$loop"

	# The mount command mkfs.nvmefs prints works as printed: with search=
	# for image files (found only there), without for block devices.
	for f in e0 e1; do truncate -s 128M "$img/$f"; done
	hint=$(mkfs.nvmefs "$img/e0" "$img/e1" | sed -n 's/^  mount: \(.*\) (in \/etc\/fstab.*/\1/p')
	check "image files: the hint names search=$img ($hint)" grep -qF -- "-o search=$img" <<<"$hint"
	check "image files: the hint mounts as printed ($hint)" bash -c "${hint/MOUNTPOINT/$t/mD}"
	check "image files: mounted by the hint" mountpoint -q "$t/mD"
	umount "$t/mD" || true
	mkdir "$t/blk"
	for f in 0 1; do
		truncate -s 128M "$t/blk/$f"
		loops[f]=$(losetup -f --show "$t/blk/$f")
		echo "${loops[f]}" >>"$t/loops"
	done
	hint=$(mkfs.nvmefs -f "${loops[@]}" | sed -n 's/^  mount: \(.*\) (in \/etc\/fstab.*/\1/p')
	check "block devices: a hint without search= ($hint)" \
		bash -c "[[ '$hint' == 'nvmefs uuid='*' MOUNTPOINT' ]]"
	check "block devices: the hint mounts as printed ($hint)" bash -c "${hint/MOUNTPOINT/$t/mD}"
	check "block devices: mounted by the hint" mountpoint -q "$t/mD"
	umount "$t/mD" || true
	for i in $(seq 1 100); do pgrep -f "^nvmefs .*$t/" >/dev/null || break; sleep 0.1; done
	for f in 0 1; do losetup -d "${loops[f]}"; done

	# -o debug: foreground, debug lines on stderr (the discovery's among them).
	nvmefs "label=alpha" "$t/mA" -o search="$img",debug 2>"$t/debug.log" &
	for i in $(seq 1 100); do mountpoint -q "$t/mA" && break; sleep 0.1; done
	check "debug mount" mountpoint -q "$t/mA"
	umount "$t/mA" || true
	wait || true
	check "debug log on stderr" grep -q "label=alpha: member 1 is $img/a1" "$t/debug.log"
	check "--help" bash -c "nvmefs --help | grep -q 'UUID=uuid'"
	check "--version" bash -c "nvmefs --version | grep -q '^nvmefs [0-9]'"
	check "mkfs --version" bash -c "mkfs.nvmefs -V | grep -q '^mkfs.nvmefs [0-9]'"
	return "$MNT_FAIL"
}

if [ "${1:-}" = --inner ]; then
	inner "$2" "$3"
	exit $?
fi

# ---- outside ----
[ $# = 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 1; }
build=$(realpath "$1")
[ "$(id -u)" = 0 ] || mnt_skip "needs root"
[ -c /dev/fuse ] || mnt_skip "no /dev/fuse"
for c in unshare losetup findmnt mount.fuse3; do
	command -v "$c" >/dev/null || mnt_skip "$c not installed"
done
t=$(mktemp -d /tmp/nvmefs-fstab.XXXXXX)
cleanup() {
	local l
	if [ -f "$t/loops" ]; then
		while read -r l; do losetup -d "$l" 2>/dev/null || true; done <"$t/loops"
	fi
	rm -rf "$t"
}
trap cleanup EXIT
cmake --install "$build" --prefix "$t/prefix" >"$t/install.log"
for f in sbin/nvmefs sbin/mkfs.nvmefs sbin/fsck.nvmefs sbin/nvmefs-stat sbin/nvmefs-tune \
	share/man/man8/nvmefs.8 share/man/man8/mkfs.nvmefs.8 share/man/man8/fsck.nvmefs.8 \
	share/man/man8/nvmefs-tune.8 share/man/man8/nvmefs-stat.8; do
	check "cmake --install puts $f" test -e "$t/prefix/$f"
done
rc=0
timeout -k 20 240 unshare -m --propagation private "$BASH" "$0" --inner "$build" "$t" || rc=$?
[ "$rc" = 0 ] || MNT_FAIL=$((MNT_FAIL + 1))
mnt_result
