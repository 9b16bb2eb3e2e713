#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# POSIX ACLs on a mounted volume (issue 35), in one mode (direct or cached):
#  - setfacl/getfacl work; the kernel grants and denies by the ACL (named
#    user allowed, named user denied where "other" is allowed, the mask
#    limiting a named user), checked as unprivileged uids (setpriv);
#  - the mode's group bits show the mask; chmod changes the mask, owner and
#    other entries (and so what a named user may do) at once;
#  - a directory's default ACL: new files and directories inherit it (the
#    umask then does not apply), subdirectories keep it as their default;
#    without one the umask does apply (the kernel leaves it to nvmefs);
#  - an ACL the mode says all of is not kept; setfacl -b removes it; setgid
#    goes when an owner outside the file's group sets an ACL;
#  - the ACLs are listed (listxattr); bad values are refused;
#  - all of it again after a remount, then fsck.nvmefs clean.
# usage: test_acl.sh BUILD_DIR MODE   (MODE: direct or cached)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib_mount.sh source-path=SCRIPTDIR
. "$here/lib_mount.sh"

[ $# = 2 ] || {
	echo "usage: test_acl.sh BUILD_DIR MODE" >&2
	exit 2
}
build=$1
mode=$2
mnt_time_limit 240 "$0" "$@"
mnt_need setfacl acl
mnt_need getfacl acl
mnt_need setfattr attr
mnt_need setpriv util-linux
mnt_need python3
mnt_setup "$build" 2 256M
chmod 755 "$MNT_TMP" # the unprivileged uids below reach the mount point
mnt_mount "mode=$mode"

A=1001 B=1002 # uids and gids with no account: ACL entries take numbers
as() { # UID CMD...: CMD as uid and gid UID, no other group
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}
can_read() { as "$1" cat "$2" >/dev/null 2>&1; }
cannot_read() { ! can_read "$@"; }
can_write() { as "$1" sh -c "echo x >>'$2'" 2>/dev/null; }
cannot_write() { ! can_write "$@"; }
mode_is() { # PATH OCTAL
	local m
	m=$(stat -c %a "$1")
	[ "$m" = "$2" ] || {
		echo "  $1: mode $m, expected $2" >&2
		return 1
	}
}
acl_has() { # PATH LINE [-d]: getfacl's output holds LINE
	getfacl -cpnE ${3:+"$3"} "$1" 2>/dev/null | grep -qxF "$2" || {
		echo "  $1: no '$2' in:" >&2
		getfacl -cpnE ${3:+"$3"} "$1" >&2
		return 1
	}
}
no_acl_xattr() { # PATH: no access ACL stored
	python3 -c 'import os, sys
sys.exit("system.posix_acl_access" in os.listxattr(sys.argv[1]))' "$1"
}
listed() { # PATH NAME
	python3 -c 'import os, sys
sys.exit(sys.argv[2] not in os.listxattr(sys.argv[1]))' "$1" "$2"
}

# ---- made on the first mount ----
echo secret >"$MNT/f"
chmod 600 "$MNT/f"
check "setfacl u:$A:r" setfacl -m "u:$A:r" "$MNT/f"
check "the named user reads" can_read $A "$MNT/f"
check "another user does not" cannot_read $B "$MNT/f"
check "the named user may not write" cannot_write $A "$MNT/f"
check "the group bits show the mask" mode_is "$MNT/f" 640
check "getfacl shows the entry" acl_has "$MNT/f" "user:$A:r--"
check "listxattr lists the ACL" listed "$MNT/f" system.posix_acl_access

echo public >"$MNT/deny"
chmod 644 "$MNT/deny"
check "setfacl u:$A:-" setfacl -m "u:$A:-" "$MNT/deny"
check "other reads" can_read $B "$MNT/deny"
check "the named user is denied" cannot_read $A "$MNT/deny"

echo m >"$MNT/mask"
chmod 600 "$MNT/mask"
check "setfacl u:$A:rw,m::r" setfacl -m "u:$A:rw,m::r" "$MNT/mask"
check "the mask lets the named user read" can_read $A "$MNT/mask"
check "the mask keeps it from writing" cannot_write $A "$MNT/mask"

# chmod: the mask follows the group bits
chmod 600 "$MNT/f"
check "chmod 600 sets the mask to ---" acl_has "$MNT/f" "mask::---"
check "the named entry stays" acl_has "$MNT/f" "user:$A:r--"
check "after chmod 600 the named user cannot read" cannot_read $A "$MNT/f"
chmod 640 "$MNT/f"
check "after chmod 640 it can again" can_read $A "$MNT/f"
check "chmod sets other too" bash -c "chmod 604 '$MNT/f' && getfacl -cpnE '$MNT/f' | grep -qxF 'other::r--'"
chmod 640 "$MNT/f"

# default ACLs and the umask
mkdir "$MNT/d"
check "setfacl -d" setfacl -d -m "u::rwx,u:$A:rwx,g::r-x,m::rwx,o::---" "$MNT/d"
check "the default is read back" acl_has "$MNT/d" "user:$A:rwx" -d
(umask 077 && touch "$MNT/d/f" && mkdir "$MNT/d/sub" && mknod "$MNT/d/fifo" p)
check "a file inherits: mode 660, umask ignored" mode_is "$MNT/d/f" 660
check "...and the named entry" acl_has "$MNT/d/f" "user:$A:rwx"
check "...its mask from the create mode" acl_has "$MNT/d/f" "mask::rw-"
check "the named user writes the new file" can_write $A "$MNT/d/f"
check "another user does not" cannot_write $B "$MNT/d/f"
check "a fifo inherits too" mode_is "$MNT/d/fifo" 660
check "a directory inherits: mode 770" mode_is "$MNT/d/sub" 770
check "...as its access ACL" acl_has "$MNT/d/sub" "user:$A:rwx"
check "...and its default" acl_has "$MNT/d/sub" "user:$A:rwx" -d
(umask 027 && touch "$MNT/plain" && mkdir "$MNT/pdir")
check "no default ACL: the umask applies to a file" mode_is "$MNT/plain" 640
check "...and to a directory" mode_is "$MNT/pdir" 750
check "...and no ACL is made" no_acl_xattr "$MNT/plain"
ln -s plain "$MNT/d/link"
check "a symlink inherits nothing" bash -c "[ \"\$(stat -c %a '$MNT/d/link')\" = 777 ]"

# an ACL the mode says all of; removal
touch "$MNT/eq"
chmod 600 "$MNT/eq"
check "a minimal ACL sets the mode" setfacl -m "g::rw" "$MNT/eq"
check "...to 660" mode_is "$MNT/eq" 660
check "...and is not kept" no_acl_xattr "$MNT/eq"
touch "$MNT/rm"
check "an ACL to remove" setfacl -m "u:$A:rwx" "$MNT/rm"
check "setfacl -b removes the ACL" setfacl -b "$MNT/rm"
check "...no xattr left" no_acl_xattr "$MNT/rm"
check "setfacl -k where there is no default" setfacl -k "$MNT/pdir"
check "a default ACL on a file is refused" bash -c "! setfacl -d -m u:$A:r '$MNT/rm' 2>/dev/null"

# setgid goes when an owner outside the file's group sets an ACL
touch "$MNT/sg"
chown "$A:0" "$MNT/sg"
chmod 2770 "$MNT/sg"
check "the owner sets an ACL" as $A setfacl -m "u:$B:r" "$MNT/sg"
check "...and setgid is gone" mode_is "$MNT/sg" 770
touch "$MNT/sg2"
chmod 2770 "$MNT/sg2"
check "root keeps setgid" bash -c "setfacl -m u:$B:r '$MNT/sg2' && [ \"\$(stat -c %a '$MNT/sg2')\" = 2770 ]"

# values the kernel passes on but no ACL: refused, nothing changed
check "a bad ACL value is refused" bash -c "! setfattr -n system.posix_acl_access -v 0x02000000010006 '$MNT/f' 2>/dev/null"
check "...and the ACL is intact" acl_has "$MNT/f" "user:$A:r--"
check "other system.* names are refused" bash -c "! setfattr -n system.nvmefs -v 1 '$MNT/f' 2>/dev/null"

# ---- after a remount ----
mnt_remount "mode=$mode"
check "remount: the ACL is there" acl_has "$MNT/f" "user:$A:r--"
check "remount: the named user reads" can_read $A "$MNT/f"
check "remount: another user does not" cannot_read $B "$MNT/f"
check "remount: the mode shows the mask" mode_is "$MNT/f" 640
check "remount: the denial holds" cannot_read $A "$MNT/deny"
check "remount: the default holds" acl_has "$MNT/d" "user:$A:rwx" -d
check "remount: the inherited ACL holds" can_write $A "$MNT/d/f"
(umask 077 && touch "$MNT/d/after")
check "remount: a new file inherits" mode_is "$MNT/d/after" 660
check "remount: listed" listed "$MNT/d/sub" system.posix_acl_default

mnt_umount
[ "$MNT_NO_MOUNT" = 1 ] || check "fsck clean" "$build/fsck.nvmefs" -n "${MNT_DEV_LIST[@]}"
mnt_result
