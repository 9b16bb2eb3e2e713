// SPDX-License-Identifier: MIT
/*
 * The shadow (store.h): a second copy of the metadata's keys and values,
 * in a memtable (memtable_i.h's skip list), for the crosschecks
 * (docs/FORMAT.md, "Crosschecks"). Never written to a member.
 */
#include "store.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtable_i.h"
#include "nvmefs/util.h"

struct nvmefs_shadow {
	struct nvmefs_memtable mem;
	int err;      /* the first put or tombstone that failed */
	uint8_t *val; /* NVMEFS_VAL_MAX bytes: a value being encoded */
	/* For nvmefs_shadow_check_due: writes since the last check, and the
	 * live keys that check saw. */
	size_t writes, checked_keys;
};

int nvmefs_shadow_create(struct nvmefs_shadow **out)
{
	struct nvmefs_shadow *sh = calloc(1, sizeof(*sh));

	if (!sh)
		return -ENOMEM;
	sh->val = malloc(NVMEFS_VAL_MAX);
	if (!sh->val)
		goto err_free;
	/* Heights need no randomness a user could steer: a fixed seed. */
	if (nvmefs_mem_init(&sh->mem, 0x5eed))
		goto err_val;
	*out = sh;
	return 0;
err_val:
	free(sh->val);
err_free:
	free(sh);
	return -ENOMEM;
}

void nvmefs_shadow_destroy(struct nvmefs_shadow *sh)
{
	if (!sh)
		return;
	nvmefs_mem_exit(&sh->mem);
	free(sh->val);
	free(sh);
}

static int fail(struct nvmefs_shadow *sh, int err)
{
	if (!sh->err)
		sh->err = err;
	return err;
}

int nvmefs_shadow_put(struct nvmefs_shadow *sh, const struct nvmefs_val *v)
{
	uint8_t key[NVMEFS_KEY_MAX];
	size_t klen = 0;
	ssize_t vlen = nvmefs_val_encode(v, key, &klen, sh->val);

	if (vlen < 0) {
		char name[128] = "?";

		/* The encoder wrote no key: name what it was given. */
		if (v->kind == NVMEFS_KEY_INODE)
			snprintf(name, sizeof(name), "INODE(%llu)",
				 (unsigned long long)v->rec.inode.ino);
		else
			snprintf(name, sizeof(name), "a key of kind %u (record type %u)", v->kind,
				 v->rec.type);
		nvmefs_err("metadata crosscheck: %s: format v2 refuses its value", name);
		return fail(sh, (int)vlen);
	}
	if (nvmefs_mem_put(&sh->mem, key, klen, sh->val, (size_t)vlen, false))
		return fail(sh, -ENOMEM);
	sh->writes++;
	return 0;
}

int nvmefs_shadow_del(struct nvmefs_shadow *sh, const uint8_t *key, size_t klen)
{
	if (nvmefs_mem_put(&sh->mem, key, klen, NULL, 0, true))
		return fail(sh, -ENOMEM);
	sh->writes++;
	return 0;
}

/* Small states are checked every time; past that, a check costs as much
 * as the state, so wait for writes worth a sixteenth of it (a test's
 * thousands of small commits would be quadratic otherwise). */
#define CHECK_ALWAYS_KEYS 10000u

bool nvmefs_shadow_check_due(const struct nvmefs_shadow *sh)
{
	return sh->checked_keys < CHECK_ALWAYS_KEYS || sh->writes * 16 >= sh->checked_keys;
}

void nvmefs_shadow_checked(struct nvmefs_shadow *sh, size_t keys)
{
	sh->writes = 0;
	sh->checked_keys = keys;
}

int nvmefs_shadow_error(const struct nvmefs_shadow *sh)
{
	return sh->err;
}

int nvmefs_shadow_get(const struct nvmefs_shadow *sh, const uint8_t *key, size_t klen,
		      const uint8_t **val, size_t *vlen)
{
	const struct nvmefs_mem_node *x = nvmefs_mem_find(&sh->mem, key, klen);

	if (!x || x->tomb)
		return -ENOENT;
	*val = x->key + x->klen;
	*vlen = x->vlen;
	return 0;
}

bool nvmefs_shadow_next(const struct nvmefs_shadow *sh, const void **pos, struct nvmefs_run_ent *e)
{
	const struct nvmefs_mem_node *x = *pos ? ((const struct nvmefs_mem_node *)*pos)->next[0]
					       : nvmefs_mem_seek(&sh->mem, NULL, 0);

	if (!x)
		return false;
	nvmefs_mem_ent(x, e);
	*pos = x;
	return true;
}

static unsigned long long be64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return (unsigned long long)be64toh(v);
}

void nvmefs_shadow_key_name(const uint8_t *k, size_t klen, char *buf, size_t size)
{
	if (nvmefs_key_check(k, klen)) {
		snprintf(buf, size, "an invalid key of %zu bytes", klen);
		return;
	}
	/* The fields as sorted.c lays them out (values.c key_fields). */
	switch (k[0]) {
	case NVMEFS_KEY_INODE:
		snprintf(buf, size, "INODE(%llu)", be64_at(k + 1));
		break;
	case NVMEFS_KEY_DIRENT:
		snprintf(buf, size, "DIRENT(%llu, \"%.*s\")", be64_at(k + 1), (int)(klen - 17),
			 (const char *)k + 17);
		break;
	case NVMEFS_KEY_DCOOKIE:
		snprintf(buf, size, "DCOOKIE(%llu, %llu)", be64_at(k + 1), be64_at(k + 9));
		break;
	case NVMEFS_KEY_EXTENT:
		snprintf(buf, size, "EXTENT(%llu, slot %u, %llu)", be64_at(k + 1), k[9],
			 be64_at(k + 10));
		break;
	case NVMEFS_KEY_XATTR:
		snprintf(buf, size, "XATTR(%llu, \"%.*s\")", be64_at(k + 1), (int)(klen - 9),
			 (const char *)k + 9);
		break;
	case NVMEFS_KEY_ORPHAN:
		snprintf(buf, size, "ORPHAN(%llu)", be64_at(k + 1));
		break;
	default:
		snprintf(buf, size, "FREE(member %u, end %llu)", k[1], be64_at(k + 2));
		break;
	}
}
