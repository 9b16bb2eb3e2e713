// SPDX-License-Identifier: MIT
/*
 * The inode cache (icache_i.h): the get and put pair every namespace
 * operation takes its inodes by (the kernel's lookup counts are
 * lookups.c's); reading an inode, a directory's entries or a file's
 * extents from the store when an operation first asks for them; what pins
 * an inode in memory; and the debug walk that checks all of it.
 * docs/ARCHITECTURE.md, "The inode cache".
 *
 * A mounted volume (not vol->resident) starts with the root alone in
 * memory. A get that misses reads what it needs from the store with meta
 * dropped (no device I/O under it, STYLE 6), then takes meta again and
 * fills it in as vol->filling: nothing is written back and no count
 * changes, since the store holds it already. Meanwhile the inode is
 * marked as loading (on vol->iloads while not yet in memory, in->loading
 * after), and every other get of it waits on vol->load_cond: so no apply
 * can change a key between its read and its fill, because every apply
 * works on inodes its operation got first (the store is the truth, the
 * cache is written through: kv.c).
 */
#include "fs_i.h"
#include "icache_i.h"
#include "lookups_i.h"
#include "meta_i.h"
#include "store.h"
#include "util_i.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/util.h"

struct nvmefs_iload {
	struct nvmefs_iload *next;
	uint64_t ino;
};

/* ---- reading from the store (meta not held) ---- */

/* Keys and values read, copied out of the store's buffers: each is a
 * header (key length u16, value length u32) and the bytes. */
struct kvbuf {
	uint8_t *p;
	size_t len, cap, n;
};

struct kv_hdr {
	uint16_t klen;
	uint32_t vlen;
};

static int kvbuf_add(struct kvbuf *b, const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen)
{
	struct kv_hdr h = {(uint16_t)klen, (uint32_t)vlen};
	size_t need = sizeof(h) + klen + vlen;

	if (nvmefs_grow(&b->p, &b->cap, b->len + need, 1))
		return -ENOMEM;
	memcpy(b->p + b->len, &h, sizeof(h));
	memcpy(b->p + b->len + sizeof(h), k, klen);
	memcpy(b->p + b->len + sizeof(h) + klen, v, vlen);
	b->len += need;
	b->n++;
	return 0;
}

/* The next entry of b from *pos, decoded; false after the last. */
static int kvbuf_next(const struct kvbuf *b, size_t *pos, struct nvmefs_val *v, bool *done)
{
	struct kv_hdr h;
	const uint8_t *k;

	*done = *pos >= b->len;
	if (*done)
		return 0;
	memcpy(&h, b->p + *pos, sizeof(h));
	k = b->p + *pos + sizeof(h);
	*pos += sizeof(h) + h.klen + h.vlen;
	return nvmefs_val_decode(k, h.klen, k + h.klen, h.vlen, v);
}

/* Every key with the prefix of kind and ino (8 bytes, big-endian). */
static int read_prefix(struct nvmefs_vol *vol, uint8_t kind, uint64_t ino, struct kvbuf *b)
{
	uint8_t prefix[9] = {kind};
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	int ret;

	for (int i = 0; i < 8; i++)
		prefix[1 + i] = (uint8_t)(ino >> (56 - 8 * i));
	ret = nvmefs_store_iter_prefix(&it, vol->store, prefix, sizeof(prefix));
	if (ret)
		return ret;
	while ((ret = nvmefs_store_iter_next(it, &e)) == 1) {
		ret = kvbuf_add(b, e.key, e.klen, e.val, e.vlen);
		if (ret)
			break;
	}
	nvmefs_store_iter_close(it);
	return ret < 0 ? ret : 0;
}

/* The kinds read_key reads: none has a value longer than an inode's. */
_Static_assert(NVMEFS_VAL_EXTENT <= NVMEFS_VAL_INODE_MAX &&
		       NVMEFS_VAL_ORPHAN <= NVMEFS_VAL_INODE_MAX,
	       "read_key's buffer");

/* One INODE, ORPHAN or EXTENT key by exact match into b; -ENOENT when the
 * store has none, -EUCLEAN when its value is longer than its kind allows
 * (at every open of a small file: no heap buffer). */
static int read_key(struct nvmefs_vol *vol, const uint8_t *key, size_t klen, struct kvbuf *b)
{
	uint8_t val[NVMEFS_VAL_INODE_MAX];
	size_t vlen = 0;
	int ret = nvmefs_store_get(vol->store, key, klen, val, sizeof(val), &vlen);

	if (!ret)
		ret = kvbuf_add(b, key, klen, val, vlen);
	return ret == -ERANGE ? -EUCLEAN : ret;
}

static const char *kind_name(uint8_t kind)
{
	switch (kind) {
	case NVMEFS_KEY_INODE:
		return "inode";
	case NVMEFS_KEY_DCOOKIE:
		return "entries";
	case NVMEFS_KEY_EXTENT:
		return "extents";
	case NVMEFS_KEY_XATTR:
		return "extended attributes";
	}
	return "keys";
}

/* A load failed: say which inode and what, once per failure. */
static int load_failed(struct nvmefs_vol *vol, uint64_t ino, uint8_t kind, int err)
{
	if (err == -EUCLEAN || err == -EINVAL || err == -EPROTO) {
		nvmefs_err("%s: metadata: inode %llu's %s in the store are damaged "
			   "(fsck.nvmefs checks them)",
			   nvmefs_meta_where(vol), (unsigned long long)ino, kind_name(kind));
		return -EUCLEAN;
	}
	nvmefs_err("%s: metadata: inode %llu's %s could not be read from the store: %s",
		   nvmefs_meta_where(vol), (unsigned long long)ino, kind_name(kind),
		   strerror(-err));
	return err;
}

/* ---- filling in (meta held, vol->filling) ---- */

/* The inode of INODE value v and its xattrs and orphan key (b's entries
 * after the first). */
static int fill_inode(struct nvmefs_vol *vol, uint64_t ino, const struct kvbuf *b)
{
	struct nvmefs_inode *in;
	struct nvmefs_val v;
	size_t pos = 0;
	bool done;
	int ret = kvbuf_next(b, &pos, &v, &done);

	if (!ret && (v.kind != NVMEFS_KEY_INODE || v.rec.inode.ino != ino))
		ret = -EUCLEAN;
	uint32_t nxattrs = v.sum.nxattrs;

	if (!ret)
		ret = nvmefs_meta_load_val(vol, &v);
	if (ret)
		return load_failed(vol, ino, NVMEFS_KEY_INODE, ret);
	in = nvmefs_iget(vol, ino);
	while (!(ret = kvbuf_next(b, &pos, &v, &done)) && !done) {
		ret = nvmefs_meta_load_val(vol, &v);
		if (ret)
			break;
	}
	if (!ret && in->nxattrs != nxattrs)
		ret = -EUCLEAN;
	if (ret) { /* never seen by anyone: it goes again */
		nvmefs_inode_drop(vol, in);
		return load_failed(vol, ino, NVMEFS_KEY_XATTR, ret);
	}
	return 0;
}

static int fill_entries(struct nvmefs_vol *vol, struct nvmefs_inode *in, const struct kvbuf *b)
{
	size_t live = in->dir->live, pos = 0;
	struct nvmefs_val v;
	bool done;
	int ret;

	in->dir->live = 0;
	in->dir->loaded = false;
	while (!(ret = kvbuf_next(b, &pos, &v, &done)) && !done) {
		if (v.kind != NVMEFS_KEY_DCOOKIE || v.rec.dirent.parent != in->ino) {
			ret = -EUCLEAN;
			break;
		}
		ret = nvmefs_meta_load_val(vol, &v);
		if (ret)
			break;
	}
	if (!ret && in->dir->live != live) {
		nvmefs_err("%s: metadata: directory %llu has %zu entries in the store but its "
			   "inode counts %zu (fsck.nvmefs repairs this)",
			   nvmefs_meta_where(vol), (unsigned long long)in->ino, in->dir->live,
			   live);
		ret = -EUCLEAN;
	}
	if (ret) {
		nvmefs_meta_unload_entries(vol, in, live);
		return ret == -EUCLEAN ? ret : load_failed(vol, in->ino, NVMEFS_KEY_DCOOKIE, ret);
	}
	in->dir->loaded = true;
	return 0;
}

static int fill_extents(struct nvmefs_vol *vol, struct nvmefs_inode *in, const struct kvbuf *b)
{
	struct nvmefs_rec *r = malloc((b->n + 1) * sizeof(*r));
	struct nvmefs_val v;
	size_t pos = 0, n = 0;
	bool done;
	int ret;

	if (!r)
		return -ENOMEM;
	while (!(ret = kvbuf_next(b, &pos, &v, &done)) && !done) {
		if (v.kind != NVMEFS_KEY_EXTENT) {
			ret = -EUCLEAN;
			break;
		}
		r[n++] = v.rec;
	}
	if (!ret)
		ret = nvmefs_meta_fill_extents(vol, in, r, n);
	else
		ret = load_failed(vol, in->ino, NVMEFS_KEY_EXTENT, ret);
	free(r);
	return ret;
}

/* ---- loads ---- */

/* Read inode ino (not in memory, not being loaded) and fill it in: 0 (it
 * is in memory now), -ENOENT (the store has no such inode) or an error.
 * Drops meta while it reads. */
static int load_inode(struct nvmefs_vol *vol, uint64_t ino)
{
	struct nvmefs_iload self = {.next = vol->iloads, .ino = ino};
	struct kvbuf b = {0};
	struct nvmefs_val v;
	uint8_t key[NVMEFS_KEY_MAX];
	size_t pos = 0;
	bool done;
	int ret;

	vol->iloads = &self;
	pthread_mutex_unlock(&vol->lock);
	ret = read_key(vol, key, nvmefs_key_inode(key, ino), &b);
	if (!ret)
		ret = kvbuf_next(&b, &pos, &v, &done);
	if (!ret && v.sum.nxattrs)
		ret = read_prefix(vol, NVMEFS_KEY_XATTR, ino, &b);
	if (!ret && !v.rec.inode.nlink && !S_ISDIR(v.rec.inode.mode)) {
		ret = read_key(vol, key, nvmefs_key_orphan(key, ino), &b);
		if (ret == -ENOENT)
			ret = 0;
	}
	pthread_mutex_lock(&vol->lock);
	for (struct nvmefs_iload **pp = &vol->iloads; *pp; pp = &(*pp)->next) {
		if (*pp == &self) {
			*pp = self.next;
			break;
		}
	}
	if (!ret) {
		struct nvmefs_inode *in;

		vol->filling = true;
		ret = fill_inode(vol, ino, &b);
		vol->filling = false;
		/* Evicted while the kernel held it: its pages may be there still. */
		if (!ret && (in = nvmefs_iget(vol, ino)))
			atomic_store(&in->kernel_pages, nvmefs_lookups_count(vol, ino) != 0);
	} else if (ret != -ENOENT) {
		ret = load_failed(vol, ino, NVMEFS_KEY_INODE, ret);
	}
	if (ret != -ENOENT) {
		vol->cache.loads += !ret;
		vol->cache.failed += !!ret;
	}
	pthread_cond_broadcast(&vol->load_cond);
	free(b.p);
	return ret;
}

/* Read in's entries (kind DCOOKIE) or extents (EXTENT) and fill them in.
 * in is in memory and stays so: marked loading, with a reference. */
static int load_part(struct nvmefs_vol *vol, struct nvmefs_inode *in, uint8_t kind)
{
	struct kvbuf b = {0};
	int ret;

	bool one = kind == NVMEFS_KEY_EXTENT && in->nextents == 1;
	uint8_t key[NVMEFS_KEY_MAX];

	in->loading = true;
	in->refs++;
	pthread_mutex_unlock(&vol->lock);
	/* Most files are one extent from offset 0, slot 0: a point get finds
	 * it through the runs' filters and the block cache; a prefix read
	 * reads a block of every run. The summary says there is one: if the
	 * get finds it, it is the one. */
	ret = one ? read_key(vol, key, nvmefs_key_extent(key, in->ino, 0, 0), &b) : -ENOENT;
	if (ret == -ENOENT)
		ret = read_prefix(vol, kind, in->ino, &b);
	pthread_mutex_lock(&vol->lock);
	if (!ret) {
		vol->filling = true;
		ret = kind == NVMEFS_KEY_EXTENT ? fill_extents(vol, in, &b)
						: fill_entries(vol, in, &b);
		vol->filling = false;
	} else {
		ret = load_failed(vol, in->ino, kind, ret);
	}
	vol->cache.loads += !ret;
	vol->cache.failed += !!ret;
	in->loading = false;
	pthread_cond_broadcast(&vol->load_cond);
	/* Not nvmefs_inode_put: an eviction now would undo the load, and the
	 * caller's get, which takes its reference next, would load again. */
	in->refs--;
	free(b.p);
	return ret;
}

static bool being_loaded(const struct nvmefs_vol *vol, uint64_t ino)
{
	for (const struct nvmefs_iload *l = vol->iloads; l; l = l->next) {
		if (l->ino == ino)
			return true;
	}
	return false;
}

int nvmefs_inode_get(struct nvmefs_vol *vol, uint64_t ino, unsigned need, struct nvmefs_inode **out)
{
	bool hit = true;
	int ret;

	*out = NULL;
	for (;;) {
		struct nvmefs_inode *in = nvmefs_iget(vol, ino);

		/* Each load drops meta: look again after it, as anything
		 * may have changed meanwhile. */
		if ((in && in->loading) || (!in && being_loaded(vol, ino))) {
			pthread_cond_wait(&vol->load_cond, &vol->lock);
			continue;
		}
		if (!in) {
			if (vol->resident || !ino)
				return -ENOENT;
			ret = load_inode(vol, ino);
			if (ret)
				return ret;
			hit = false;
			continue;
		}
		if ((need & NVMEFS_IGET_LIVE) && in->dead)
			return -ENOENT;
		if (!in->dead && (need & NVMEFS_IGET_EXTENTS) && in->slots && !in->ext_loaded)
			ret = load_part(vol, in, NVMEFS_KEY_EXTENT);
		else if (!in->dead && (need & NVMEFS_IGET_ENTRIES) && in->dir && !in->dir->loaded)
			ret = load_part(vol, in, NVMEFS_KEY_DCOOKIE);
		else
			break;
		if (ret)
			return ret;
		hit = false;
	}
	*out = nvmefs_iget(vol, ino);
	(*out)->refs++;
	(*out)->referenced = true;
	vol->cache.hits += hit;
	return 0;
}

/* ---- eviction ---- */

/* What an inode in memory costs beyond its sub-objects (the slots of a
 * one-extent file and the allocator's overhead), and an entry beyond its
 * name's average: the cache counts objects, not malloc's bytes. The
 * kernel's lookup counts (about 32 bytes an inode it names) cannot be
 * evicted and are charged too, so that the inodes make room for them. */
#define INODE_CHARGE  (sizeof(struct nvmefs_inode) + 160u)
#define DIRENT_CHARGE (sizeof(struct nvmefs_dirent) + 40u)

uint64_t nvmefs_icache_bytes(const struct nvmefs_vol *vol)
{
	return (uint64_t)vol->ncached * INODE_CHARGE + (uint64_t)vol->ndirents * DIRENT_CHARGE +
	       vol->lookups_bytes;
}

/* Whether in may leave memory: it is read again from the store when next
 * asked for (a freed inode has no stored copy: it leaves by reap). */
static bool evictable(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	return !vol->resident && !in->dead && !nvmefs_inode_pinned(vol, in);
}

static void evict(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (in->dir && in->dir->loaded)
		nvmefs_meta_unload_entries(vol, in, in->dir->live);
	vol->cache.evictions++;
	nvmefs_inode_drop(vol, in);
}

void nvmefs_icache_shrink(struct nvmefs_vol *vol, size_t buckets)
{
	uint64_t limit = nvmefs_meta_cache_limit(vol);

	if (vol->resident)
		return;
	/* CLOCK over the hash table's buckets: an inode got since the hand
	 * last passed keeps its place once more. */
	while (nvmefs_icache_bytes(vol) > limit && buckets--) {
		size_t b = vol->evict_hand++ & (vol->itab_size - 1);

		for (struct nvmefs_inode *in = vol->itab[b], *next; in; in = next) {
			next = in->hnext;
			if (!evictable(vol, in))
				continue;
			if (in->referenced && limit > 1)
				in->referenced = false;
			else
				evict(vol, in);
		}
	}
}

bool nvmefs_inode_pinned(const struct nvmefs_vol *vol, const struct nvmefs_inode *in)
{
	/* A live inode the kernel names is not pinned: it can be read again
	 * by number. A freed one has no stored copy left to read. */
	return in->ino == NVMEFS_ROOT_INO || in->refs || in->loading || in->opens ||
	       atomic_load(&in->ios) || in->dirty_pprev || atomic_load(&in->wtime_queued) ||
	       (in->dead && nvmefs_lookups_count(vol, in->ino));
}

void nvmefs_inode_reap(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (!in->dead || nvmefs_inode_held(vol, in))
		return;
	/* What leaves memory here is what an eviction could take. */
	assert(!nvmefs_inode_pinned(vol, in));
	nvmefs_inode_drop(vol, in);
}

void nvmefs_inode_put(struct nvmefs_vol *vol, struct nvmefs_inode *in)
{
	if (!in)
		return;
	assert(in->refs > 0);
	if (--in->refs)
		return;
	/* Freed while this operation held it (its last name went, and no
	 * handle or lookup kept it): its memory goes with the reference. */
	if (in->dead) {
		nvmefs_inode_reap(vol, in);
		return;
	}
	if (vol->resident)
		return;
	/* -o meta_cache=0: nothing unused stays (the tests' mode, so that
	 * every path reads from the store). */
	if (nvmefs_meta_cache_limit(vol) <= 1 && nvmefs_iget(vol, in->ino) == in &&
	    evictable(vol, in))
		evict(vol, in);
	else
		nvmefs_icache_shrink(vol, 64);
}

/* ---- the kernel's lookup counts ---- */

/* While every inode is resident, each the kernel holds is in memory. */
static bool in_memory(struct nvmefs_vol *vol, uint64_t ino)
{
	return nvmefs_iget(vol, ino) != NULL;
}

int nvmefs_icache_check(struct nvmefs_vol *vol, bool idle)
{
	unsigned bad = nvmefs_lookups_check(vol, vol->resident ? in_memory : NULL);

	for (size_t b = 0; b < vol->itab_size; b++) {
		for (struct nvmefs_inode *in = vol->itab[b]; in; in = in->hnext) {
			unsigned ios = atomic_load(&in->ios);

			if (idle && (in->refs || ios)) {
				nvmefs_err("inode %llu: %u reference(s) and %u I/O left",
					   (unsigned long long)in->ino, in->refs, ios);
				bad++;
			}
			/* A freed inode stays only while held, and then it
			 * must be pinned: an eviction would lose it. */
			if (in->dead && !nvmefs_inode_held(vol, in)) {
				nvmefs_err("inode %llu: freed, held by nothing, still in memory",
					   (unsigned long long)in->ino);
				bad++;
			} else if (in->dead && !nvmefs_inode_pinned(vol, in)) {
				nvmefs_err("inode %llu: freed and held, but not pinned",
					   (unsigned long long)in->ino);
				bad++;
			}
		}
	}
	return bad ? -EUCLEAN : 0;
}
