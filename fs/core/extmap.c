// SPDX-License-Identifier: MIT
/*
 * Extent maps: per slot of a file, the sorted, non-overlapping runs of its
 * component that are mapped on the slot's member. Changed only by the
 * records that meta.c applies (holding meta) and read by the data path's
 * walks; both take the inode's map_lock, so that a READ needs nothing
 * volume-wide. Space a removal frees goes back through the allocator.
 *
 * Every change of an extent is also written through (kv_i.h: the store,
 * and the shadow in tests) as format v2 keys: ext_put for an extent new
 * or changed in place, ext_del for a key that no longer starts an extent
 * (merged away, removed, or its start moved). One key per extent, keyed by
 * (ino, slot, comp_off), so each site's key-level diff is local. Space
 * a removal releases (rel) also goes back into the durable free map and
 * its FREE keys (alloc.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs_i.h"
#include "alloc_i.h"
#include "extmap_i.h"
#include "kv_i.h"
#include "util_i.h"
#include "store.h"

#include "nvmefs/util.h"

size_t nvmefs_extmap_find(const struct nvmefs_extmap *m, uint64_t comp_off)
{
	size_t lo = 0, hi = m->n;

	/* First extent that ends after comp_off. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].comp_off + m->v[mid].len <= comp_off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* e's EXTENT key, put with e's value (kv_i.h). */
static void ext_put(struct nvmefs_vol *vol, const struct nvmefs_inode *in, unsigned slot,
		    const struct nvmefs_ext *e)
{
	struct nvmefs_val v = {.kind = NVMEFS_KEY_EXTENT};

	if (!nvmefs_kv_on(vol))
		return;
	v.rec.type = NVMEFS_REC_EXTENT;
	v.rec.extent.ino = in->ino;
	v.rec.extent.slot = slot;
	v.rec.extent.flags = e->flags;
	v.rec.extent.comp_off = e->comp_off;
	v.rec.extent.dev_off = e->dev_off;
	v.rec.extent.len = e->len;
	nvmefs_kv_put(vol, &v); /* a failure sticks (kv_i.h) */
}

/* The EXTENT key at comp_off: a tombstone (kv_i.h). */
static void ext_del(struct nvmefs_vol *vol, const struct nvmefs_inode *in, unsigned slot,
		    uint64_t comp_off)
{
	uint8_t key[NVMEFS_KEY_MAX];

	if (nvmefs_kv_on(vol))
		nvmefs_kv_del(vol, key, nvmefs_key_extent(key, in->ino, slot, comp_off));
}

static int extmap_reserve(struct nvmefs_extmap *m, size_t n)
{
	/* Most files have one extent per slot (sequential writes merge), and
	 * every cached file's maps are in memory: start at one, not nvmefs_grow's
	 * 16 (512 bytes a slot), then double. */
	if (!m->cap && n == 1) {
		m->v = malloc(sizeof(*m->v));
		if (!m->v)
			return -ENOMEM;
		m->cap = 1;
		return 0;
	}
	return nvmefs_grow(&m->v, &m->cap, n, sizeof(*m->v));
}

static bool ext_joins(const struct nvmefs_ext *a, const struct nvmefs_ext *b)
{
	return a->comp_off + a->len == b->comp_off && a->dev_off + a->len == b->dev_off &&
	       a->flags == b->flags;
}

static int extmap_insert(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 const struct nvmefs_ext *e)
{
	struct nvmefs_extmap *m = &in->slots[slot];
	size_t i = nvmefs_extmap_find(m, e->comp_off);
	bool left = i > 0 && ext_joins(&m->v[i - 1], e);
	bool right = i < m->n && ext_joins(e, &m->v[i]);

	in->alloc_bytes += e->len;
	if (left && right) {
		m->v[i - 1].len += e->len + m->v[i].len;
		ext_put(vol, in, slot, &m->v[i - 1]);
		ext_del(vol, in, slot, m->v[i].comp_off);
		memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
		m->n--;
		vol->meta_bytes -= NVMEFS_EXT_COST;
	} else if (left) {
		m->v[i - 1].len += e->len;
		ext_put(vol, in, slot, &m->v[i - 1]);
	} else if (right) {
		ext_del(vol, in, slot, m->v[i].comp_off); /* its start moves down */
		m->v[i].comp_off = e->comp_off;
		m->v[i].dev_off = e->dev_off;
		m->v[i].len += e->len;
		ext_put(vol, in, slot, &m->v[i]);
	} else {
		if (extmap_reserve(m, m->n + 1)) {
			in->alloc_bytes -= e->len;
			return -ENOMEM;
		}
		memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
		m->v[i] = *e;
		m->n++;
		vol->meta_bytes += NVMEFS_EXT_COST;
		ext_put(vol, in, slot, e);
	}
	return 0;
}

static void release(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
		    uint64_t dev_off, uint64_t len, bool rel)
{
	in->alloc_bytes -= len;
	if (!rel)
		return;
	/* Free by the records at once (the FREE keys); allocatable once the
	 * transaction is durable. Out of memory for the latter leaks the
	 * space until the next mount, which starts from the former. */
	nvmefs_alloc_applied_put(vol, in->layout.devs[slot], dev_off, len);
	if (nvmefs_alloc_defer(vol, in->layout.devs[slot], dev_off, len))
		nvmefs_warn("out of memory: freed space unusable until remount");
}

static int extmap_remove(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 uint64_t lo, uint64_t hi, bool rel)
{
	struct nvmefs_extmap *m = &in->slots[slot];
	size_t i = nvmefs_extmap_find(m, lo);

	while (i < m->n && m->v[i].comp_off < hi) {
		struct nvmefs_ext *e = &m->v[i];
		uint64_t end = e->comp_off + e->len;

		if (e->comp_off < lo && end > hi) {
			/* The range is inside one extent: split it in two. */
			struct nvmefs_ext tail = *e;

			if (extmap_reserve(m, m->n + 1))
				return -ENOMEM;
			e = &m->v[i];
			tail.comp_off = hi;
			tail.dev_off = e->dev_off + (hi - e->comp_off);
			tail.len = end - hi;
			release(vol, in, slot, e->dev_off + (lo - e->comp_off), hi - lo, rel);
			e->len = lo - e->comp_off;
			memmove(&m->v[i + 2], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
			m->v[i + 1] = tail;
			m->n++;
			vol->meta_bytes += NVMEFS_EXT_COST;
			ext_put(vol, in, slot, &m->v[i]);
			ext_put(vol, in, slot, &tail);
			return 0;
		}
		if (e->comp_off < lo) { /* keep the head */
			release(vol, in, slot, e->dev_off + (lo - e->comp_off), end - lo, rel);
			e->len = lo - e->comp_off;
			ext_put(vol, in, slot, e);
			i++;
		} else if (end > hi) { /* keep the tail */
			release(vol, in, slot, e->dev_off, hi - e->comp_off, rel);
			ext_del(vol, in, slot, e->comp_off); /* its start moves up */
			e->dev_off += hi - e->comp_off;
			e->len = end - hi;
			e->comp_off = hi;
			ext_put(vol, in, slot, e);
			i++;
		} else { /* all of it */
			release(vol, in, slot, e->dev_off, e->len, rel);
			ext_del(vol, in, slot, e->comp_off);
			memmove(e, e + 1, (m->n - i - 1) * sizeof(*m->v));
			m->n--;
			vol->meta_bytes -= NVMEFS_EXT_COST;
		}
	}
	return 0;
}

/* The maps change holding meta (the caller's) and map_lock written, so
 * that a READ may walk them holding map_lock alone. */
int nvmefs_extmap_insert(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 const struct nvmefs_ext *e)
{
	int ret;

	pthread_rwlock_wrlock(&in->map_lock);
	ret = extmap_insert(vol, in, slot, e);
	pthread_rwlock_unlock(&in->map_lock);
	return ret;
}

int nvmefs_extmap_remove(struct nvmefs_vol *vol, struct nvmefs_inode *in, unsigned slot,
			 uint64_t lo, uint64_t hi, bool rel)
{
	int ret;

	pthread_rwlock_wrlock(&in->map_lock);
	ret = extmap_remove(vol, in, slot, lo, hi, rel);
	pthread_rwlock_unlock(&in->map_lock);
	return ret;
}
