// SPDX-License-Identifier: MIT
/*
 * namei_acl.c: what the namespace does with POSIX ACLs beyond their rules
 * (acl.c): a new inode's mode and ACLs from its directory's default ACL
 * (for namei.c's make_node), and the journal record of an xattr, which
 * namei_attr.c's setxattr, chmod and removal log too. Kept out of both so
 * that namei.c and namei_attr.c do not call each other (fs/README.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs_i.h"
#include "acl_i.h"
#include "namei.h"
#include "namei_i.h"
#include "journal_i.h"
#include "meta_i.h"

int nvmefs_ns_log_xattr_set(struct nvmefs_vol *vol, uint64_t ino, const char *name,
			    const void *value, size_t size)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_XATTR_SET};

	r.xattr.ino = ino;
	r.xattr.name = name;
	r.xattr.name_len = (uint16_t)strlen(name);
	r.xattr.value = value;
	r.xattr.value_len = (uint32_t)size;
	return nvmefs_journal_log(vol, &r);
}

/* The mode of a new inode made with mode by cred in p, and what it
 * inherits (meta held). 0 or -ENOMEM. */
int nvmefs_ns_inherit_acl(struct nvmefs_inode *p, const struct nvmefs_cred *cred, mode_t *mode,
			  struct nvmefs_acl_inherit *ai)
{
	const struct nvmefs_xattr *d = NULL;

	memset(ai, 0, sizeof(*ai));
	if (S_ISLNK(*mode))
		return 0;
	if (p && p->nxattrs)
		d = nvmefs_meta_xattr_find(p, NVMEFS_ACL_DEFAULT, strlen(NVMEFS_ACL_DEFAULT));
	if (!d || d->value_len <= NVMEFS_ACL_HDR || nvmefs_acl_check(d->value, d->value_len)) {
		*mode &= ~(mode_t)(cred->umask & 0777);
		return 0;
	}
	ai->dflt = S_ISDIR(*mode) ? d : NULL;
	ai->access = malloc(d->value_len);
	if (!ai->access)
		return -ENOMEM;
	memcpy(ai->access, d->value, d->value_len);
	ai->len = d->value_len;
	if (nvmefs_acl_create_masq(ai->access, ai->len, mode) == 0) {
		free(ai->access);
		ai->access = NULL;
	}
	return 0;
}

/* The bytes ai adds to the metadata. */
uint64_t nvmefs_ns_inherit_cost(const struct nvmefs_acl_inherit *ai)
{
	uint64_t cost = 0;

	if (ai->access)
		cost += NVMEFS_XATTR_COST + strlen(NVMEFS_ACL_ACCESS) + ai->len;
	if (ai->dflt)
		cost += NVMEFS_XATTR_COST + strlen(NVMEFS_ACL_DEFAULT) + ai->dflt->value_len;
	return cost;
}

/* The new inode in's ACLs (meta held): in the transaction of its INODE
 * record, so that no crash leaves it with the mode but not the ACL. */
int nvmefs_ns_give_acls(struct nvmefs_vol *vol, struct nvmefs_inode *in,
			const struct nvmefs_acl_inherit *ai)
{
	int ret = 0;

	if (ai->access)
		ret = nvmefs_ns_log_xattr_set(vol, in->ino, NVMEFS_ACL_ACCESS, ai->access, ai->len);
	if (!ret && ai->dflt)
		ret = nvmefs_ns_log_xattr_set(vol, in->ino, NVMEFS_ACL_DEFAULT, ai->dflt->value,
					      ai->dflt->value_len);
	return ret;
}
