/* SPDX-License-Identifier: MIT */
/*
 * acl_i.h: the interface of fs/core/acl.c, POSIX ACLs in the form the
 * kernel passes them as xattrs (system.posix_acl_access and
 * system.posix_acl_default): the check of a value and the rules of
 * Linux's fs/posix_acl.c that a FUSE server with FUSE_POSIX_ACL must apply
 * itself, because the kernel checks permissions from the ACLs but leaves
 * the mode, chmod and inheritance to the server. Pure functions on the
 * value's bytes: no volume, no lock, no I/O.
 *
 * The value: a little-endian u32 version (2), then entries of 8 bytes
 * (u16 tag, u16 perm, u32 id), as Linux's struct posix_acl_xattr_header
 * and posix_acl_xattr_entry.
 */
#ifndef NVMEFS_ACL_I_H
#define NVMEFS_ACL_I_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define NVMEFS_ACL_ACCESS  "system.posix_acl_access"
#define NVMEFS_ACL_DEFAULT "system.posix_acl_default"

/* Bytes of a value's header and of each entry. */
#define NVMEFS_ACL_HDR	 4u
#define NVMEFS_ACL_ENTRY 8u

/* Whether name is one of the two ACL xattrs. */
bool nvmefs_acl_name(const char *name);

/*
 * Check an ACL value of size bytes as Linux's posix_acl_from_xattr and
 * posix_acl_valid do, and more strictly: version 2; whole entries; each
 * tag known and its permission within rwx; one owner, one owning group,
 * one other, entries in the order owner, users, owning group, groups,
 * mask, other; a mask when there are named users or groups, at most one;
 * named ids not -1 and strictly increasing within users and within groups
 * (sorted, no duplicates: libacl's setfacl sends them so). A header alone
 * (no entries) is valid: it stands for no ACL. 0 or -EINVAL.
 */
int nvmefs_acl_check(const void *value, size_t size);

/*
 * How a valid access ACL sets the mode, as posix_acl_equiv_mode: the
 * owner's, the owning group's (or the mask's, when there is one) and
 * other's permissions replace the rwx bits of *mode. 1 when the ACL says
 * more than the mode does (named entries or a mask: it must be kept), 0
 * when the mode alone says it all.
 */
int nvmefs_acl_equiv_mode(const void *value, size_t size, mode_t *mode);

/*
 * chmod of a file with the valid access ACL value, in place, as
 * posix_acl_chmod: the owner's and other's entries take mode's bits, and
 * the mask takes the group bits (the owning group's entry when there is no
 * mask); named entries keep theirs.
 */
void nvmefs_acl_chmod(void *value, size_t size, mode_t mode);

/*
 * A new inode's access ACL from its directory's valid default ACL value
 * (a copy the caller owns, changed in place), and *mode the create's
 * mode changed with it, as posix_acl_create_masq: each of owner, other
 * and mask (owning group without a mask) keeps only what both the ACL and
 * the mode give, and the mode only what the ACL gives. 1 when the result
 * must be kept as the inode's access ACL, 0 when the mode says it all.
 */
int nvmefs_acl_create_masq(void *value, size_t size, mode_t *mode);

#endif
