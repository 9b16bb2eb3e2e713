// SPDX-License-Identifier: MIT
/*
 * POSIX ACLs in their xattr form (acl_i.h): the check of a value, and the
 * three rules of Linux's fs/posix_acl.c that a FUSE server negotiating
 * FUSE_POSIX_ACL applies itself: the mode an access ACL sets
 * (posix_acl_equiv_mode), chmod (posix_acl_chmod) and a new inode's ACL
 * from its directory's default (posix_acl_create_masq). The kernel checks
 * permissions from the ACL it fetched with GETXATTR; what the mode shows
 * and what a new inode inherits is this file's. namei_attr.c and namei.c
 * call it under the metadata lock, on values they own.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "acl_i.h"

/* The tags (Linux's include/uapi/linux/posix_acl.h) and the version. */
#define TAG_USER_OBJ  0x01
#define TAG_USER      0x02
#define TAG_GROUP_OBJ 0x04
#define TAG_GROUP     0x08
#define TAG_MASK      0x10
#define TAG_OTHER     0x20
#define ACL_VERSION   2u
#define UNDEFINED_ID  0xffffffffu

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* Entry i's fields. */
#define ENT(v, i)  ((uint8_t *)(v) + NVMEFS_ACL_HDR + (size_t)(i)*NVMEFS_ACL_ENTRY)
#define TAG(e)	   get16(e)
#define PERM(e)	   get16((e) + 2)
#define ID(e)	   get32((e) + 4)
#define NENT(size) (((size)-NVMEFS_ACL_HDR) / NVMEFS_ACL_ENTRY)

bool nvmefs_acl_name(const char *name)
{
	return !strcmp(name, NVMEFS_ACL_ACCESS) || !strcmp(name, NVMEFS_ACL_DEFAULT);
}

/*
 * The order a valid ACL's tags come in, as posix_acl_valid's states: each
 * tag's rank, and whether it may repeat (named entries).
 */
static int tag_rank(uint16_t tag)
{
	switch (tag) {
	case TAG_USER_OBJ:
		return 0;
	case TAG_USER:
		return 1;
	case TAG_GROUP_OBJ:
		return 2;
	case TAG_GROUP:
		return 3;
	case TAG_MASK:
		return 4;
	case TAG_OTHER:
		return 5;
	default:
		return -1;
	}
}

int nvmefs_acl_check(const void *value, size_t size)
{
	int last = -1;
	uint32_t last_id = 0;
	bool named = false, mask = false, obj[3] = {false, false, false};

	if (size < NVMEFS_ACL_HDR || (size - NVMEFS_ACL_HDR) % NVMEFS_ACL_ENTRY)
		return -EINVAL;
	if (get32(value) != ACL_VERSION)
		return -EINVAL;
	if (size == NVMEFS_ACL_HDR)
		return 0;
	for (size_t i = 0; i < NENT(size); i++) {
		const uint8_t *e = ENT(value, i);
		int rank = tag_rank(TAG(e));

		if (rank < 0 || (PERM(e) & ~7u) || rank < last)
			return -EINVAL;
		if (rank == 1 || rank == 3) {
			/* Named: a real id, sorted and unique within its kind. */
			if (ID(e) == UNDEFINED_ID || (rank == last && ID(e) <= last_id))
				return -EINVAL;
			last_id = ID(e);
			named = true;
		} else if (rank == last) {
			return -EINVAL; /* a second owner, owning group, mask or other */
		}
		if (rank == 0 || rank == 2 || rank == 5)
			obj[rank / 2] = true;
		mask |= rank == 4;
		last = rank;
	}
	if (!obj[0] || !obj[1] || !obj[2] || (named && !mask))
		return -EINVAL;
	return 0;
}

int nvmefs_acl_equiv_mode(const void *value, size_t size, mode_t *mode)
{
	mode_t m = 0, group = 0;
	int not_equiv = 0;
	bool mask = false;

	for (size_t i = 0; i < NENT(size); i++) {
		const uint8_t *e = ENT(value, i);
		mode_t perm = PERM(e) & 7u;

		switch (TAG(e)) {
		case TAG_USER_OBJ:
			m |= perm << 6;
			break;
		case TAG_GROUP_OBJ:
			if (!mask)
				group = perm << 3;
			break;
		case TAG_MASK:
			group = perm << 3; /* the mask, not the owning group, shows */
			mask = true;
			not_equiv = 1;
			break;
		case TAG_OTHER:
			m |= perm;
			break;
		default: /* named users and groups */
			not_equiv = 1;
			break;
		}
	}
	*mode = (*mode & ~(mode_t)0777) | m | group;
	return not_equiv;
}

void nvmefs_acl_chmod(void *value, size_t size, mode_t mode)
{
	uint8_t *group_obj = NULL, *mask = NULL;

	for (size_t i = 0; i < NENT(size); i++) {
		uint8_t *e = ENT(value, i);

		switch (TAG(e)) {
		case TAG_USER_OBJ:
			put16(e + 2, (uint16_t)((mode >> 6) & 7));
			break;
		case TAG_GROUP_OBJ:
			group_obj = e;
			break;
		case TAG_MASK:
			mask = e;
			break;
		case TAG_OTHER:
			put16(e + 2, (uint16_t)(mode & 7));
			break;
		default:
			break;
		}
	}
	if (mask)
		put16(mask + 2, (uint16_t)((mode >> 3) & 7));
	else if (group_obj)
		put16(group_obj + 2, (uint16_t)((mode >> 3) & 7));
}

int nvmefs_acl_create_masq(void *value, size_t size, mode_t *mode)
{
	uint8_t *group_obj = NULL, *mask = NULL, *e;
	mode_t m = *mode;
	int not_equiv = 0;
	uint16_t perm;

	for (size_t i = 0; i < NENT(size); i++) {
		e = ENT(value, i);
		perm = PERM(e);
		switch (TAG(e)) {
		case TAG_USER_OBJ:
			perm &= (uint16_t)((m >> 6) & 7);
			put16(e + 2, perm);
			m &= ~(mode_t)S_IRWXU | (mode_t)perm << 6;
			break;
		case TAG_GROUP_OBJ:
			group_obj = e;
			break;
		case TAG_MASK:
			mask = e;
			not_equiv = 1;
			break;
		case TAG_OTHER:
			perm &= (uint16_t)(m & 7);
			put16(e + 2, perm);
			m &= ~(mode_t)S_IRWXO | perm;
			break;
		default: /* named users and groups */
			not_equiv = 1;
			break;
		}
	}
	e = mask ? mask : group_obj;
	if (e) {
		perm = PERM(e) & (uint16_t)((m >> 3) & 7);
		put16(e + 2, perm);
		m &= ~(mode_t)S_IRWXG | (mode_t)perm << 3;
	}
	*mode = m;
	return not_equiv;
}
