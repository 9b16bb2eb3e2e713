// SPDX-License-Identifier: MIT
/*
 * Checks of the in-memory metadata: that the loaded state is whole
 * (nvmefs_meta_verify: entries name live inodes, link counts); the
 * crosscheck of the maps against the shadow (nvmefs_meta_crosscheck: in
 * tests and with NVMEFS_META_CROSSCHECK=1, at commits); and fsck's check
 * and repair of the store against the maps (nvmefs_meta_check_store), which
 * fills a shadow from the store and runs the same crosscheck over it.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "extmap_i.h"
#include "kv_i.h"
#include "meta_i.h"
#include "meta_keys_i.h"
#include "store.h"
#include "util_i.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nvmefs/util.h"

/* ---- checks of the loaded state ---- */

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The entries naming each inode against its link count: more entries than
 * links would free an inode still named (a later unlink drops the last
 * link); a directory named twice breaks "..". Orphans have no entry. */
static int verify_links(struct nvmefs_vol *vol)
{
	uint64_t *child = malloc((vol->ndirents + 1) * sizeof(*child));
	size_t n = 0;
	int ret = 0;

	if (!child)
		return -ENOMEM;
	for (size_t i = 0; i < vol->dtab_size; i++) {
		for (struct nvmefs_dirent *d = vol->dtab[i]; d; d = d->hnext)
			child[n++] = d->child;
	}
	qsort(child, n, sizeof(*child), u64_cmp);
	for (size_t i = 0, k; i < n && !ret; i = k) {
		struct nvmefs_inode *c = nvmefs_iget(vol, child[i]);

		for (k = i; k < n && child[k] == child[i]; k++)
			;
		if (c->orphan || c->ino == NVMEFS_ROOT_INO || (c->dir && k - i > 1) ||
		    (!c->dir && k - i > c->nlink)) {
			nvmefs_err("%s: metadata: inode %llu is named by %zu entries but has %u "
				   "link(s)%s (fsck.nvmefs repairs this)",
				   nvmefs_meta_where(vol), (unsigned long long)c->ino, k - i,
				   c->nlink, c->orphan ? " and an orphan record" : "");
			ret = -EUCLEAN;
		}
	}
	free(child);
	return ret;
}

int nvmefs_meta_verify(struct nvmefs_vol *vol)
{
	struct nvmefs_inode *root = nvmefs_iget(vol, NVMEFS_ROOT_INO);
	size_t bad = 0;

	if (!root || !root->dir) {
		nvmefs_err("%s: metadata: the root directory is missing", nvmefs_meta_where(vol));
		return -EUCLEAN;
	}
	for (size_t i = 0; i < vol->dtab_size; i++) {
		for (struct nvmefs_dirent *d = vol->dtab[i]; d; d = d->hnext) {
			struct nvmefs_inode *c = nvmefs_iget(vol, d->child);

			if (!c || c->dead) {
				nvmefs_err("%s: metadata: entry '%s' in directory %llu names "
					   "missing inode %llu (fsck.nvmefs repairs this)",
					   nvmefs_meta_where(vol), d->name,
					   (unsigned long long)d->parent,
					   (unsigned long long)d->child);
				return -EUCLEAN;
			}
		}
	}
	if (verify_links(vol))
		return -EUCLEAN;
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			if (in->nlink == 0 && !in->orphan && in->ino != NVMEFS_ROOT_INO)
				bad++;
		}
	}
	if (bad)
		nvmefs_warn("%s: metadata: %zu inode(s) with no links and no orphan record "
			    "(fsck.nvmefs will reclaim them)",
			    nvmefs_meta_where(vol), bad);
	return 0;
}

/* ---- the crosscheck: the shadow store against the maps ---- */

struct xcheck {
	struct nvmefs_vol *vol;
	struct nvmefs_shadow *sh; /* the keys checked against the maps */
	bool repair;		  /* write the maps' keys instead of failing (fsck -y) */
	size_t fixed;		  /* keys written so */
	uint8_t key[NVMEFS_KEY_MAX];
	uint8_t *val; /* NVMEFS_VAL_MAX bytes */
	size_t nkeys; /* the keys the maps call for */
	int ret;      /* the first difference */
};

/* A difference: the first one fails the check; with repair, each is
 * logged (the first ten) and the caller writes the maps' side. */
static void differ(struct xcheck *c, const uint8_t *key, size_t klen, const char *what)
{
	char name[320];

	if (c->ret || (c->repair && c->fixed++ >= 10))
		return;
	nvmefs_shadow_key_name(key, klen, name, sizeof(name));
	if (c->repair) {
		nvmefs_info("%s: metadata: rewriting %s: %s", nvmefs_meta_where(c->vol), name,
			    what);
		return;
	}
	nvmefs_err("%s: metadata crosscheck: %s: %s", nvmefs_meta_where(c->vol), name, what);
	c->ret = -EUCLEAN;
}

static bool sum_eq(const struct nvmefs_inode_sum *a, const struct nvmefs_inode_sum *b)
{
	return a->nxattrs == b->nxattrs && a->alloc_bytes == b->alloc_bytes &&
	       a->nextents == b->nextents && a->parent == b->parent && a->nentries == b->nentries &&
	       a->next_cookie == b->next_cookie;
}

/*
 * v's key must be in the shadow with v's value, byte for byte; with
 * !attrs (an INODE whose attributes the shadow may not have yet) its
 * file type and summary fields only.
 */
static void expect(struct xcheck *c, const struct nvmefs_val *v, bool attrs)
{
	const uint8_t *got;
	size_t klen = 0, glen;
	struct nvmefs_val g;
	ssize_t vlen;
	char what[160];

	if (c->ret)
		return;
	c->nkeys++;
	vlen = nvmefs_val_encode(v, c->key, &klen, c->val);
	if (vlen < 0) {
		nvmefs_err("%s: metadata crosscheck: the maps hold a value of kind %u (record "
			   "type %u) that format v2 refuses",
			   nvmefs_meta_where(c->vol), v->kind, v->rec.type);
		c->ret = -EUCLEAN;
		return;
	}
	if (nvmefs_shadow_get(c->sh, c->key, klen, &got, &glen)) {
		differ(c, c->key, klen, "in the maps, missing from the shadow store");
		if (c->repair)
			nvmefs_kv_put(c->vol, v);
		return;
	}
	if (attrs) {
		size_t at = 0;

		while (at < glen && at < (size_t)vlen && got[at] == c->val[at])
			at++;
		if (glen != (size_t)vlen || at < glen) {
			snprintf(what, sizeof(what),
				 "the shadow's value (%zu bytes) differs from the maps' (%zd) "
				 "at byte %zu",
				 glen, vlen, at);
			differ(c, c->key, klen, what);
			if (c->repair)
				nvmefs_kv_put(c->vol, v);
		}
		return;
	}
	if (nvmefs_val_decode(c->key, klen, got, glen, &g) ||
	    (g.rec.inode.mode & S_IFMT) != (v->rec.inode.mode & S_IFMT) ||
	    !sum_eq(&g.sum, &v->sum)) {
		differ(c, c->key, klen, "the shadow's type or summary differs from the maps'");
		if (c->repair)
			nvmefs_kv_put(c->vol, v);
	}
}

/* Every key the maps call for of one inode but its entries'. */
/* Every key the maps call for of one inode (its entries too when it is a
 * directory), each given to fn with whether its attributes are settled
 * (an INODE's changed in memory go out at the next commit, emit_dirty). */
typedef void (*key_fn)(void *arg, const struct nvmefs_val *v, bool attrs);

static void inode_keys(const struct nvmefs_inode *in, key_fn fn, void *arg)
{
	struct nvmefs_inode_sum sum;
	struct nvmefs_rec r;
	struct nvmefs_val v;

	nvmefs_meta_inode_rec(in, &r);
	nvmefs_meta_inode_sum(in, &sum);
	nvmefs_val_inode(&v, &r, &sum);
	fn(arg, &v, !in->dirty_pprev && !in->shadow_stale);
	for (unsigned i = 0; i < in->nxattrs; i++) {
		nvmefs_meta_xattr_rec(in->ino, &in->xattrs[i], &r);
		if (!nvmefs_val_rec(&v, &r))
			fn(arg, &v, true);
	}
	for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++) {
		for (size_t k = 0; k < in->slots[s].n; k++) {
			const struct nvmefs_ext *e = &in->slots[s].v[k];

			memset(&r, 0, sizeof(r));
			r.type = NVMEFS_REC_EXTENT;
			r.extent.ino = in->ino;
			r.extent.slot = s;
			r.extent.flags = e->flags;
			r.extent.comp_off = e->comp_off;
			r.extent.dev_off = e->dev_off;
			r.extent.len = e->len;
			if (!nvmefs_val_rec(&v, &r))
				fn(arg, &v, true);
		}
	}
	if (in->orphan) {
		memset(&r, 0, sizeof(r));
		r.type = NVMEFS_REC_ORPHAN_ADD;
		r.ino.ino = in->ino;
		if (!nvmefs_val_rec(&v, &r))
			fn(arg, &v, true);
	}
	for (size_t k = 0; in->dir && k < in->dir->n; k++) {
		const struct nvmefs_dirent *d = in->dir->v[k];

		if (!d)
			continue;
		nvmefs_meta_dirent_rec(d, &r);
		nvmefs_val_dirent(&v, NVMEFS_KEY_DIRENT, &r, d->cookie);
		fn(arg, &v, true);
		nvmefs_val_dirent(&v, NVMEFS_KEY_DCOOKIE, &r, d->cookie);
		fn(arg, &v, true);
	}
}

static void expect_key(void *arg, const struct nvmefs_val *v, bool attrs)
{
	expect(arg, v, attrs);
}

static uint64_t key_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* The FREE keys the durable free map calls for (alloc.c). */
static void free_keys(struct nvmefs_vol *vol, key_fn fn, void *arg)
{
	struct nvmefs_val v = {.kind = NVMEFS_KEY_FREE};

	for (unsigned d = 0; d < vol->ndevs; d++) {
		for (size_t i = 0; i < vol->dfree[d].n; i++) {
			v.free.member = d;
			v.free.off = vol->dfree[d].v[i].off;
			v.free.len = vol->dfree[d].v[i].len;
			fn(arg, &v, true);
		}
	}
}

/* Whether the maps hold what a live shadow key names (its value is
 * compared from the maps' side). Fields as sorted.c lays them out. */
static bool in_maps(struct nvmefs_vol *vol, const uint8_t *k, size_t klen)
{
	struct nvmefs_inode *in;
	const struct nvmefs_dir *dir;
	size_t i;

	if (nvmefs_key_check(k, klen))
		return false;
	if (k[0] == NVMEFS_KEY_FREE)
		return k[1] < vol->ndevs &&
		       nvmefs_freemap_has_end(&vol->dfree[k[1]], key_u64(k + 2));
	in = nvmefs_iget(vol, key_u64(k + 1));
	/* What is not in memory is only in the store: nothing to compare. */
	if (!vol->resident && (!in ||
			       (in->dir && !in->dir->loaded &&
				(k[0] == NVMEFS_KEY_DIRENT || k[0] == NVMEFS_KEY_DCOOKIE)) ||
			       (in->slots && !in->ext_loaded && k[0] == NVMEFS_KEY_EXTENT)))
		return true;
	if (!in || in->dead)
		return false;
	switch (k[0]) {
	case NVMEFS_KEY_INODE:
		return true;
	case NVMEFS_KEY_DIRENT:
		return in->dir &&
		       *nvmefs_meta_dir_slot(vol, in->ino, (const char *)k + 17, klen - 17);
	case NVMEFS_KEY_DCOOKIE:
		dir = in->dir;
		if (!dir)
			return false;
		i = nvmefs_dir_index(dir, key_u64(k + 9));
		while (i < dir->n && !dir->v[i])
			i++;
		return i < dir->n && dir->v[i]->cookie == key_u64(k + 9);
	case NVMEFS_KEY_EXTENT:
		if (!in->slots || k[9] >= in->layout.stripe_count)
			return false;
		i = nvmefs_extmap_find(&in->slots[k[9]], key_u64(k + 10));
		return i < in->slots[k[9]].n && in->slots[k[9]].v[i].comp_off == key_u64(k + 10);
	case NVMEFS_KEY_XATTR:
		return nvmefs_meta_xattr_find(in, (const char *)k + 9, klen - 9) != NULL;
	case NVMEFS_KEY_ORPHAN:
		return in->orphan;
	}
	return false;
}

static int crosscheck_with(struct nvmefs_vol *vol, struct nvmefs_shadow *sh, bool repair,
			   bool with_free);

/* The shadow against the maps, FREE keys against the durable free map
 * included, and that map against the complement of the extents when
 * they are all in memory (else fsck's space pass checks it). */
int nvmefs_meta_crosscheck(struct nvmefs_vol *vol)
{
	int ret = crosscheck_with(vol, vol->shadow, false, true);

	if (!ret && vol->shadow && vol->resident)
		ret = nvmefs_alloc_check(vol);
	return ret;
}

/* The maps against sh both ways; with repair, write the maps' keys where
 * they differ (puts and tombstones, kv_i.h) and return how many. FREE
 * keys only with_free: fsck checks the store's against the extents
 * itself (its space pass). */
static int crosscheck_with(struct nvmefs_vol *vol, struct nvmefs_shadow *sh, bool repair,
			   bool with_free)
{
	struct xcheck c = {.vol = vol, .sh = sh, .repair = repair};
	struct nvmefs_run_ent e;
	const void *pos = NULL;
	size_t nshadow = 0;

	if (!sh)
		return 0;
	c.ret = nvmefs_shadow_error(sh);
	if (c.ret) {
		nvmefs_err("%s: metadata crosscheck: the shadow store missed a change (%s)",
			   nvmefs_meta_where(vol), strerror(-c.ret));
		return c.ret;
	}
	c.val = malloc(NVMEFS_VAL_MAX);
	if (!c.val)
		return -ENOMEM;
	/* The maps -> the shadow: every key they call for, with its value. */
	for (size_t i = 0; i < vol->itab_size && !c.ret; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in && !c.ret; in = in->hnext) {
			if (in->dead)
				continue;
			inode_keys(in, expect_key, &c);
		}
	}
	if (with_free && !c.ret)
		free_keys(vol, expect_key, &c);
	/* The shadow -> the maps: no live key they do not call for. */
	while (!c.ret && nvmefs_shadow_next(sh, &pos, &e)) {
		if (e.tomb || (!with_free && e.klen && e.key[0] == NVMEFS_KEY_FREE))
			continue;
		nshadow++;
		if (!in_maps(vol, e.key, e.klen)) {
			differ(&c, e.key, e.klen, "in the shadow store, not in the maps");
			if (repair)
				nvmefs_kv_del(vol, e.key, e.klen);
		}
	}
	if (repair) {
		free(c.val);
		return c.ret	     ? c.ret
		       : vol->kv_err ? vol->kv_err
				     : (int)(c.fixed < INT32_MAX ? c.fixed : INT32_MAX);
	}
	if (!c.ret && vol->resident && nshadow != c.nkeys) {
		nvmefs_err("%s: metadata crosscheck: %zu keys in the shadow store, the maps call "
			   "for %zu",
			   nvmefs_meta_where(vol), nshadow, c.nkeys);
		c.ret = -EUCLEAN;
	}
	if (!c.ret)
		nvmefs_shadow_checked(sh, nshadow);
	free(c.val);
	return c.ret;
}

bool nvmefs_meta_crosscheck_due(struct nvmefs_vol *vol)
{
	return vol->shadow && nvmefs_shadow_check_due(vol->shadow);
}

/* ---- fsck: the store against the maps ---- */

/* Put every live key of the store into sh. */
static int store_to_shadow(struct nvmefs_vol *vol, struct nvmefs_shadow *sh)
{
	struct nvmefs_store_iter *it = NULL;
	struct nvmefs_run_ent e;
	int ret = nvmefs_store_iter_open(&it, vol->store, NULL, 0, NULL, 0);

	while (!ret && (ret = nvmefs_store_iter_next(it, &e)) == 1) {
		struct nvmefs_val v;

		if (e.klen && e.key[0] == NVMEFS_KEY_FREE) {
			ret = 0; /* fsck's space pass checks them against the extents */
			continue;
		}
		ret = nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, &v);
		if (ret) {
			char name[320];

			nvmefs_shadow_key_name(e.key, e.klen, name, sizeof(name));
			nvmefs_err("%s: metadata: the store's value of %s does not decode (%s)",
				   nvmefs_meta_where(vol), name, strerror(-ret));
			ret = -EUCLEAN;
			break;
		}
		ret = nvmefs_shadow_put(sh, &v);
	}
	nvmefs_store_iter_close(it);
	return ret;
}

int nvmefs_meta_shadow_fill(struct nvmefs_vol *vol)
{
	return vol->shadow ? store_to_shadow(vol, vol->shadow) : 0;
}

int nvmefs_meta_check_store(struct nvmefs_vol *vol, bool repair)
{
	struct nvmefs_shadow *sh = NULL;
	int ret;

	if (!vol->store)
		return 0;
	ret = nvmefs_shadow_create(&sh);
	if (!ret)
		ret = store_to_shadow(vol, sh);
	if (!ret) /* the crosscheck's two ways, over a copy of what the store holds */
		ret = crosscheck_with(vol, sh, repair, false);
	nvmefs_shadow_destroy(sh);
	return ret;
}
