# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# What xfstests lacks for nvmefs: its _scratch_mkfs for FSTYP=fuse only
# removes the scratch files, it has no _scratch_mkfs_sized for FUSE, its
# _check_test_fs/_check_scratch_fs do nothing for FUSE, and its _fs_type
# takes the type df shows, fuse.nvmefs (a FUSE mount with a subtype), for
# another filesystem than FSTYP=fuse. The local.config
# scripts/xfstests.sh writes sources this file and calls
# _nvmefs_install_hooks after common/rc (which would otherwise redefine
# the functions). Uses local.config's NVMEFS_* variables
# and common/rc's helpers ($tmp, $seqres, _log_err, _test_mount...).
# shellcheck disable=SC2154,SC2034 # tmp, seqres, iam, status: xfstests's

# _nvmefs_scratch_mkfs [ARGS...]: a new volume on the scratch members (the
# ARGS, options of some other mkfs, are ignored), its members at their
# full size again.
_nvmefs_scratch_mkfs()
{
	if mountpoint -q "$SCRATCH_MNT"; then
		_scratch_unmount || return 1
	fi
	_nvmefs_full_members || return 1
	# shellcheck disable=SC2086 # the members, one a word
	"$NVMEFS_SBIN/mkfs.nvmefs" -f -q -L "$NVMEFS_SCRATCH_LABEL" $NVMEFS_SCRATCH_MEMBERS
}

# _nvmefs_full_members: the scratch members back at their full size
# (NVMEFS_MEMBER_SIZE), after a sized volume made them smaller.
_nvmefs_full_members()
{
	local m

	for m in $NVMEFS_SCRATCH_MEMBERS; do
		truncate -s "$NVMEFS_MEMBER_SIZE" "$m" || return 1
	done
}

# _nvmefs_meta_size SIZE0: the metadata area mkfs.nvmefs puts on member 0
# of SIZE0 bytes (fs/tools/mkfs.c's plan_meta: 2% of the member, from 32
# MiB to 32 GiB, seven eighths run area and an eighth journal, each
# rounded down to the 4 KiB block, and two blocks).
_nvmefs_meta_size()
{
	local meta=$(($1 / 50)) b=4096 runs journal

	((meta >= 32 << 20)) || meta=$((32 << 20))
	((meta <= 32 << 30)) || meta=$((32 << 30))
	runs=$((meta / 8 * 7))
	journal=$((meta / 8))
	echo $((2 * b + runs - runs % b + journal - journal % b))
}

# _nvmefs_try_scratch_mkfs_sized BYTES [BLOCKSIZE [ARGS...]]: common/rc's
# _try_scratch_mkfs_sized, a volume of BYTES on the scratch members:
# they are cut to sizes that add up to BYTES, each member with the same
# data space (every file is striped over all of them, so mkfs gives each
# the smallest's) and member 0 larger by the metadata, then formatted. 0,
# or 1 with the reason on stderr when nvmefs cannot make that volume (a
# block size other than its 4 KiB, BYTES below its smallest volume);
# _notrun, as common/rc does for a block device, when BYTES is more than
# the full-size members hold. The next _scratch_mkfs restores them.
_nvmefs_try_scratch_mkfs_sized()
{
	local fssize=$1 bs=${2:-4096} b=4096 n=0 meta data min i m

	if ! [[ $fssize =~ ^[0-9]+$ ]]; then
		_notrun "error: _scratch_mkfs_sized: fs size \"$fssize\" not an integer."
	fi
	if [ "$bs" != 4096 ]; then
		echo "nvmefs: block size $bs asked; nvmefs's is 4096" >&2
		return 1
	fi
	_check_minimal_fs_size "$fssize"
	for m in $NVMEFS_SCRATCH_MEMBERS; do
		n=$((n + 1))
	done
	((fssize <= n * NVMEFS_MEMBER_SIZE)) || _notrun "Scratch device too small"
	# Each member: a block before and after its data (member 0: the
	# metadata area before); data of at least 16 MiB (mkfs.c's MIN_DATA).
	# The metadata's size depends on member 0's: settle it in turns.
	meta=$(_nvmefs_meta_size 0)
	for i in 1 2 3; do
		data=$(((fssize - meta - n * 2 * b) / n / b * b))
		meta=$(_nvmefs_meta_size $((data + meta + 2 * b)))
	done
	data=$(((fssize - meta - n * 2 * b) / n / b * b))
	min=$(((16 << 20) * n + n * 2 * b + $(_nvmefs_meta_size 0)))
	if ((data < 16 << 20)); then
		echo "nvmefs: a volume of $fssize bytes asked; the smallest of $n members is $min bytes" >&2
		return 1
	fi
	if mountpoint -q "$SCRATCH_MNT"; then
		_scratch_unmount || return 1
	fi
	i=0
	for m in $NVMEFS_SCRATCH_MEMBERS; do
		# Cut to nothing first: a member shrunk keeps no old blocks.
		truncate -s 0 "$m" || return 1
		if [ $i = 0 ]; then
			truncate -s $((meta + data + 2 * b)) "$m" || return 1
		else
			truncate -s $((data + 2 * b)) "$m" || return 1
		fi
		i=$((i + 1))
	done
	# shellcheck disable=SC2086 # the members, one a word
	"$NVMEFS_SBIN/mkfs.nvmefs" -f -q -L "$NVMEFS_SCRATCH_LABEL" $NVMEFS_SCRATCH_MEMBERS
}

# _nvmefs_check_fs MNT MEMBERS MOUNT_FUNCTION: fsck.nvmefs -n on the volume,
# unmounted for it (fsck refuses a mounted volume) and mounted again after,
# as common/rc's _check_generic_filesystem does for a block filesystem.
_nvmefs_check_fs()
{
	local mnt=$1 members=$2 remount=0 ok=1

	if mountpoint -q "$mnt"; then
		$UMOUNT_PROG "$mnt" || return 1
		remount=1
	fi
	# shellcheck disable=SC2086 # the members, one a word
	if ! "$NVMEFS_SBIN/fsck.nvmefs" -n $members >"$tmp.fsck" 2>&1; then
		_log_err "_nvmefs_check_fs: filesystem on $mnt is inconsistent"
		{
			echo "*** fsck.nvmefs output ***"
			cat "$tmp.fsck"
			echo "*** end fsck.nvmefs output"
		} >>"$seqres.full"
		ok=0
	fi
	rm -f "$tmp.fsck"
	if [ "$remount" = 1 ]; then
		"$3" || ok=0
	fi
	if [ "$ok" = 0 ]; then
		status=1
		[ "$iam" = check ] || _exit 1
		return 1
	fi
	return 0
}

# _nvmefs_fs_type DEV: common/rc's _fs_type, with fuse.nvmefs shown as fuse.
_nvmefs_fs_type()
{
	_df_device "$1" | $AWK_PROG '{ print $2 }' | sed -e 's/^fuse\.nvmefs$/fuse/'
}

_nvmefs_install_hooks()
{
	_fs_type() { _nvmefs_fs_type "$@"; }
	_scratch_mkfs() { _nvmefs_scratch_mkfs "$@"; }
	_try_scratch_mkfs_sized() { _nvmefs_try_scratch_mkfs_sized "$@"; }
	_check_test_fs() { _nvmefs_check_fs "$TEST_DIR" "$NVMEFS_TEST_MEMBERS" _test_mount; }
	_check_scratch_fs() { _nvmefs_check_fs "$SCRATCH_MNT" "$NVMEFS_SCRATCH_MEMBERS" _scratch_mount; }
}
