// SPDX-License-Identifier: MIT
/*
 * The metadata as the journal's INODE records and the store's keys and
 * values (meta_keys_i.h): an inode's INODE record (its overwrite time
 * folded in or not); what apply (meta.c) writes through for each change of
 * an inode, an entry, an xattr or an orphan (kv.c takes them to the store,
 * and to the shadow when it is on); the summary fields an INODE value
 * carries. The crosscheck (meta_check.c) builds the same values from the
 * maps to compare. It calls nothing of meta.c, which calls it.
 */
#include "meta_keys_i.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "kv_i.h"
#include "meta_i.h"
#include "store.h"

/* ---- an inode as its INODE record ---- */

static struct nvmefs_time ts_to(const struct timespec *ts)
{
	return (struct nvmefs_time){.sec = ts->tv_sec, .nsec = (uint32_t)ts->tv_nsec};
}

void nvmefs_inode_fold_wtime(struct nvmefs_inode *in)
{
	uint64_t ns = atomic_exchange(&in->wtime_ns, 0);
	struct timespec t = {.tv_sec = (time_t)(ns / 1000000000u),
			     .tv_nsec = (long)(ns % 1000000000u)};

	if (!ns)
		return;
	in->shadow_stale = true; /* the shadow's INODE has the times before */
	if (t.tv_sec > in->mtime.tv_sec ||
	    (t.tv_sec == in->mtime.tv_sec && t.tv_nsec > in->mtime.tv_nsec))
		in->mtime = t;
	if (t.tv_sec > in->ctime.tv_sec ||
	    (t.tv_sec == in->ctime.tv_sec && t.tv_nsec > in->ctime.tv_nsec))
		in->ctime = t;
}

/* The INODE record of in as it is (no overwrite time folded). */
void nvmefs_meta_inode_rec(const struct nvmefs_inode *in, struct nvmefs_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = NVMEFS_REC_INODE;
	r->inode.ino = in->ino;
	r->inode.mode = in->mode;
	r->inode.uid = in->uid;
	r->inode.gid = in->gid;
	r->inode.nlink = in->nlink;
	r->inode.flags = in->flags;
	r->inode.size = in->size;
	r->inode.rdev = in->rdev;
	r->inode.atime = ts_to(&in->atime);
	r->inode.mtime = ts_to(&in->mtime);
	r->inode.ctime = ts_to(&in->ctime);
	r->inode.crtime = ts_to(&in->crtime);
	r->inode.layout = in->layout;
	if (in->target) {
		r->inode.target = in->target;
		r->inode.target_len = (uint16_t)strlen(in->target);
	}
}

void nvmefs_inode_to_rec(struct nvmefs_inode *in, struct nvmefs_rec *r)
{
	nvmefs_inode_fold_wtime(in);
	nvmefs_meta_inode_rec(in, r);
}

/* ---- keys ---- */

/* The summary fields of in's INODE value (meta_keys_i.h): from the maps,
 * never from an INODE record. */
void nvmefs_meta_inode_sum(const struct nvmefs_inode *in, struct nvmefs_inode_sum *s)
{
	memset(s, 0, sizeof(*s));
	s->nxattrs = in->nxattrs;
	if (S_ISREG(in->mode) && in->slots) {
		s->alloc_bytes = in->alloc_bytes;
		if (!in->ext_loaded)
			s->nextents = in->nextents;
		for (unsigned k = 0; in->ext_loaded && k < in->layout.stripe_count; k++)
			s->nextents += in->slots[k].n;
	} else if (in->dir) {
		s->parent = in->parent;
		s->nentries = in->dir->live;
		s->next_cookie = in->dir->next_cookie;
	}
}

/* The two writes (kv_i.h: the store, and the shadow in tests); what fails
 * sticks there, for the next commit and the crosscheck: apply has changed
 * the maps and goes on. */
static void kv_put(struct nvmefs_vol *vol, const struct nvmefs_val *v)
{
	nvmefs_kv_put(vol, v);
}

static void kv_del(struct nvmefs_vol *vol, const uint8_t *key, size_t klen)
{
	nvmefs_kv_del(vol, key, klen);
}

void nvmefs_meta_kv_inode(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	struct nvmefs_inode_sum sum;
	struct nvmefs_rec r;
	struct nvmefs_val v;

	if (!nvmefs_kv_on(vol) || in->dead)
		return;
	/* The whole cached inode, dirty attributes too: the shadow may run
	 * ahead of the journal inside the open transaction. */
	nvmefs_inode_to_rec(in, &r);
	nvmefs_meta_inode_sum(in, &sum);
	nvmefs_val_inode(&v, &r, &sum);
	kv_put(vol, &v);
	in->shadow_stale = false;
}

void nvmefs_meta_dirent_rec(const struct nvmefs_dirent *d, struct nvmefs_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = NVMEFS_REC_DIRENT_ADD;
	r->dirent.parent = d->parent;
	r->dirent.child = d->child;
	r->dirent.type = d->type;
	r->dirent.name = d->name;
	r->dirent.name_len = d->name_len;
}

void nvmefs_meta_kv_dirent(struct nvmefs_vol *vol, const struct nvmefs_dirent *d, bool put)
{
	struct nvmefs_rec r;
	uint8_t key[NVMEFS_KEY_MAX];
	struct nvmefs_val v;

	if (!nvmefs_kv_on(vol))
		return;
	if (!put) {
		kv_del(vol, key, nvmefs_key_dirent(key, d->parent, d->name, d->name_len));
		kv_del(vol, key, nvmefs_key_dcookie(key, d->parent, d->cookie));
		return;
	}
	nvmefs_meta_dirent_rec(d, &r);
	nvmefs_val_dirent(&v, NVMEFS_KEY_DIRENT, &r, d->cookie);
	kv_put(vol, &v);
	nvmefs_val_dirent(&v, NVMEFS_KEY_DCOOKIE, &r, d->cookie);
	kv_put(vol, &v);
}

void nvmefs_meta_xattr_rec(uint64_t ino, const struct nvmefs_xattr *x, struct nvmefs_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = NVMEFS_REC_XATTR_SET;
	r->xattr.ino = ino;
	r->xattr.name = x->name;
	r->xattr.name_len = (uint16_t)x->name_len;
	r->xattr.value = x->value;
	r->xattr.value_len = x->value_len;
}

void nvmefs_meta_kv_xattr(struct nvmefs_vol *vol, uint64_t ino, const struct nvmefs_xattr *x,
			  bool put)
{
	uint8_t key[NVMEFS_KEY_MAX];
	struct nvmefs_rec r;
	struct nvmefs_val v;

	if (!nvmefs_kv_on(vol))
		return;
	if (!put) {
		kv_del(vol, key, nvmefs_key_xattr(key, ino, x->name, x->name_len));
		return;
	}
	nvmefs_meta_xattr_rec(ino, x, &r);
	if (!nvmefs_val_rec(&v, &r))
		kv_put(vol, &v);
}

void nvmefs_meta_kv_orphan(struct nvmefs_vol *vol, uint64_t ino, bool put)
{
	struct nvmefs_rec r = {.type = NVMEFS_REC_ORPHAN_ADD};
	uint8_t key[NVMEFS_KEY_MAX];
	struct nvmefs_val v;

	if (!nvmefs_kv_on(vol))
		return;
	if (!put) {
		kv_del(vol, key, nvmefs_key_orphan(key, ino));
		return;
	}
	r.ino.ino = ino;
	if (!nvmefs_val_rec(&v, &r))
		kv_put(vol, &v);
}
