/* SPDX-License-Identifier: MIT */
/*
 * namei_i.h: what fs/core/namei_attr.c (what an inode carries) takes from
 * fs/core/namei.c (the names) beyond namei.h, the doors' API, what both
 * count and wait for, and what both take from fs/core/namei_acl.c.
 */
#ifndef NVMEFS_NAMEI_I_H
#define NVMEFS_NAMEI_I_H

#include "fs_i.h"
#include "namei.h"

/* Bytes an xattr costs in meta_bytes beyond its name and value (the fixed
 * part of its XATTR_SET record, which meta_bytes counts). */
#define NVMEFS_XATTR_COST 24

/* Change the regular file in's size, holding its whole range (io_lock) for
 * it; meta not held. For an open with O_TRUNC and setattr. */
int nvmefs_ns_truncate_locked(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint64_t size);
/*
 * Wait (meta held) until no push holds in (nvmefs_ns_push_begin): an open
 * or a truncation waits for it, so that while statahead stores a file's
 * data in the kernel's page cache nobody else reads, writes or resizes
 * the file, and no page of it is locked by a reader waiting for us.
 */
static inline void nvmefs_ns_wait_push(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	while (in->pushing) {
		if (nvmefs_before_wait_locked(&vol->lock) && !in->pushing)
			break;
		pthread_cond_wait(&vol->push_cond, &vol->lock);
	}
}

/* ---- namei_acl.c ---- */

/* Log an XATTR_SET record of name = value (size bytes) for ino (meta
 * held). 0 or -errno. */
int nvmefs_ns_log_xattr_set(struct nvmefs_vol *vol, uint64_t ino, const char *name,
			    const void *value, size_t size);

/* What a new inode inherits of its directory's default ACL, as Linux's
 * posix_acl_create(): the default itself (NULL: none) and the access ACL
 * made from it (NULL: none, the mode says it all). */
struct nvmefs_acl_inherit {
	const struct nvmefs_xattr *dflt;
	void *access; /* malloc'ed: the caller frees it */
	size_t len;
};

/* The mode of a new inode made with *mode by cred in directory p, and what
 * it inherits (meta held): the umask off *mode when p has no default
 * ACL. 0 or -ENOMEM. */
int nvmefs_ns_inherit_acl(struct nvmefs_inode *p, const struct nvmefs_cred *cred, mode_t *mode,
			  struct nvmefs_acl_inherit *ai);
/* The bytes ai adds to the metadata (meta_bytes). */
uint64_t nvmefs_ns_inherit_cost(const struct nvmefs_acl_inherit *ai);
/* Log the new inode in's inherited ACLs (meta held), in the transaction of
 * its INODE record, so that no crash leaves it with the mode but not the
 * ACL. */
int nvmefs_ns_give_acls(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			const struct nvmefs_acl_inherit *ai);

#endif
