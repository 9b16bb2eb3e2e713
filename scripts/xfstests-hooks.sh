# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# What xfstests lacks for nvmefs: its _scratch_mkfs for FSTYP=fuse only
# removes the scratch files, its _check_test_fs/_check_scratch_fs do
# nothing for FUSE, and its _fs_type takes the type df shows, fuse.nvmefs
# (a FUSE mount with a subtype), for another filesystem than FSTYP=fuse. The local.config scripts/xfstests.sh writes sources this
# file and calls _nvmefs_install_hooks after common/rc (which would
# otherwise redefine the functions). Uses local.config's NVMEFS_* variables
# and common/rc's helpers ($tmp, $seqres, _log_err, _test_mount...).
# shellcheck disable=SC2154,SC2034 # tmp, seqres, iam, status: xfstests's

# _nvmefs_scratch_mkfs [ARGS...]: a new volume on the scratch members (the
# ARGS, options of some other mkfs, are ignored).
_nvmefs_scratch_mkfs()
{
	if mountpoint -q "$SCRATCH_MNT"; then
		_scratch_unmount || return 1
	fi
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
	_check_test_fs() { _nvmefs_check_fs "$TEST_DIR" "$NVMEFS_TEST_MEMBERS" _test_mount; }
	_check_scratch_fs() { _nvmefs_check_fs "$SCRATCH_MNT" "$NVMEFS_SCRATCH_MEMBERS" _scratch_mount; }
}
