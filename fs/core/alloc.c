// SPDX-License-Identifier: MIT
/*
 * Free space, per member, as two sorted arrays of coalesced free byte
 * ranges.
 *
 * The durable free map (vol->dfree, FREE keys): the space free by the
 * records applied. An EXTENT takes its range out, a PUNCH or INODE_FREE
 * (nvmefs_extmap_remove with rel) puts its ranges back, and each change
 * writes the FREE keys that changed through the store's write-through
 * (kv_i.h): one key per range, keyed by member and END (fs/store/store.h says
 * why). mkfs writes one key per member over its data area; the mount
 * loads the keys before replay (replay changes them as live operations
 * do), so that it reads no extent to know the free space. fsck compares
 * the keys with the complement of every extent (nvmefs_alloc_complement).
 *
 * The allocator's map (vol->free): what may be handed out now. At mount a
 * copy of the durable map; allocation then takes from it at once (the
 * reservation is logged only when the data is written, data.c), and space
 * released waits on the open transaction's pending list until that
 * transaction is durable ("free after commit"). Allocation prefers the
 * goal (right after the slot's previous extent), so sequential files get
 * long runs per device. Everything here runs with the metadata lock held.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "kv_i.h"
#include "store.h"
#include "util_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nvmefs/util.h"

void nvmefs_freemap_exit(struct nvmefs_freemap *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static int fm_reserve(struct nvmefs_freemap *m, size_t n)
{
	return nvmefs_grow(&m->v, &m->cap, n, sizeof(*m->v));
}

/* First index whose range starts at or after off. */
static size_t fm_lower(const struct nvmefs_freemap *m, uint64_t off)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct used {
	uint64_t off, len;
	uint64_t ino;
};

static int used_cmp(const void *a, const void *b)
{
	const struct used *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Build one member's free map (m, emptied first) from the extents on it;
 * refuse overlaps. */
static int complement_dev(struct nvmefs_vol *vol, unsigned dev, struct used *u, size_t n,
			  struct nvmefs_freemap *m, bool quiet)
{
	uint64_t pos = vol->data_start[dev];

	qsort(u, n, sizeof(*u), used_cmp);
	m->n = 0;
	for (size_t i = 0; i <= n; i++) {
		uint64_t next = i < n ? u[i].off : vol->data_end[dev];

		if (next < pos && quiet)
			return -EUCLEAN;
		if (next < pos) {
			nvmefs_err(
				"%s: metadata: inode %llu's extent at %llu on member %u overlaps "
				"another file's extent (fsck.nvmefs repairs this)",
				nvmefs_meta_where(vol), (unsigned long long)u[i].ino,
				(unsigned long long)u[i].off, dev);
			return -EUCLEAN;
		}
		if (next > pos) {
			if (fm_reserve(m, m->n + 1))
				return -ENOMEM;
			m->v[m->n++] = (struct nvmefs_range){pos, next - pos};
		}
		if (i < n)
			pos = u[i].off + u[i].len;
	}
	return 0;
}

static int complement(struct nvmefs_vol *vol, struct nvmefs_freemap *out, bool quiet)
{
	size_t total = 0, *cnt = calloc(vol->ndevs, sizeof(size_t));
	struct used **u = calloc(vol->ndevs, sizeof(*u));
	int ret = -ENOMEM;

	if (!cnt || !u)
		goto out;
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++)
				cnt[in->layout.devs[s]] += in->slots[s].n;
		}
	}
	for (unsigned d = 0; d < vol->ndevs; d++) {
		u[d] = malloc((cnt[d] + 1) * sizeof(**u));
		if (!u[d])
			goto out;
		total += cnt[d];
		cnt[d] = 0;
	}
	for (size_t i = 0; i < vol->itab_size; i++) {
		for (struct nvmefs_inode *in = vol->itab[i]; in; in = in->hnext) {
			for (unsigned s = 0; in->slots && s < in->layout.stripe_count; s++) {
				unsigned d = in->layout.devs[s];

				for (size_t k = 0; k < in->slots[s].n; k++) {
					const struct nvmefs_ext *e = &in->slots[s].v[k];

					u[d][cnt[d]++] = (struct used){e->dev_off, e->len, in->ino};
				}
			}
		}
	}
	for (unsigned d = 0; d < vol->ndevs; d++) {
		ret = complement_dev(vol, d, u[d], cnt[d], &out[d], quiet);
		if (ret)
			goto out;
	}
	nvmefs_debug("free space computed from %zu extents", total);
	ret = 0;
out:
	for (unsigned d = 0; u && d < vol->ndevs; d++)
		free(u[d]);
	free(u);
	free(cnt);
	return ret;
}

int nvmefs_alloc_complement(struct nvmefs_vol *vol, struct nvmefs_freemap *out)
{
	return complement(vol, out, false);
}

/* The sum of m's ranges. */
static uint64_t fm_bytes(const struct nvmefs_freemap *m)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < m->n; i++)
		sum += m->v[i].len;
	return sum;
}

int nvmefs_alloc_rebuild(struct nvmefs_vol *vol)
{
	int ret = nvmefs_alloc_complement(vol, vol->free);

	vol->free_bytes = 0;
	for (unsigned d = 0; !ret && d < vol->ndevs; d++)
		vol->free_bytes += fm_bytes(&vol->free[d]);
	return ret;
}

static void fm_take(struct nvmefs_vol *vol, struct nvmefs_freemap *m, size_t i, uint64_t off,
		    uint64_t len)
{
	struct nvmefs_range *r = &m->v[i];
	uint64_t end = r->off + r->len;

	vol->free_bytes -= len;
	if (off == r->off) {
		r->off += len;
		r->len -= len;
		if (!r->len) {
			memmove(r, r + 1, (m->n - i - 1) * sizeof(*r));
			m->n--;
		}
		return;
	}
	/* Taking from the middle splits the range (room was reserved). */
	r->len = off - r->off;
	if (off + len < end) {
		memmove(r + 2, r + 1, (m->n - i - 1) * sizeof(*r));
		r[1] = (struct nvmefs_range){off + len, end - off - len};
		m->n++;
	}
}

uint64_t nvmefs_alloc_get(struct nvmefs_vol *vol, unsigned dev, uint64_t goal, uint64_t want,
			  uint64_t *off)
{
	struct nvmefs_freemap *m = &vol->free[dev];
	size_t i, best = SIZE_MAX;

	if (!m->n || fm_reserve(m, m->n + 1))
		return 0;
	/* The range holding the goal, if the goal is free. */
	if (goal) {
		i = fm_lower(m, goal + 1);
		if (i > 0 && m->v[i - 1].off + m->v[i - 1].len > goal) {
			struct nvmefs_range *r = &m->v[i - 1];
			uint64_t len = r->off + r->len - goal;

			len = len < want ? len : want;
			*off = goal;
			fm_take(vol, m, i - 1, goal, len);
			return len;
		}
	}
	/* Else the first range after the goal that holds all of it, else the
	 * first anywhere, else the largest. */
	i = fm_lower(m, goal);
	for (size_t k = 0; k < m->n; k++) {
		size_t j = (i + k) % m->n;

		if (m->v[j].len >= want) {
			best = j;
			break;
		}
		if (best == SIZE_MAX || m->v[j].len > m->v[best].len)
			best = j;
	}
	want = m->v[best].len < want ? m->v[best].len : want;
	*off = m->v[best].off;
	fm_take(vol, m, best, *off, want);
	return want;
}

void nvmefs_alloc_put(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len)
{
	struct nvmefs_freemap *m = &vol->free[dev];
	size_t i = fm_lower(m, off);
	bool left = i > 0 && m->v[i - 1].off + m->v[i - 1].len == off;
	bool right = i < m->n && m->v[i].off == off + len;

	vol->free_bytes += len;
	if (left && right) {
		m->v[i - 1].len += len + m->v[i].len;
		memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
		m->n--;
	} else if (left) {
		m->v[i - 1].len += len;
	} else if (right) {
		m->v[i].off = off;
		m->v[i].len += len;
	} else {
		if (fm_reserve(m, m->n + 1)) {
			/* Out of memory: the space leaks until the next mount. */
			vol->free_bytes -= len;
			nvmefs_warn("out of memory: %llu bytes on member %u unusable until remount",
				    (unsigned long long)len, dev);
			return;
		}
		memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
		m->v[i] = (struct nvmefs_range){off, len};
		m->n++;
	}
}

int nvmefs_alloc_defer(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len)
{
	struct nvmefs_journal *j = &vol->j;

	if (vol->replaying)
		return 0; /* free space is rebuilt after replay */
	if (nvmefs_grow(&j->pf, &j->pfcap, j->npf + 1, sizeof(*j->pf)))
		return -ENOMEM;
	vol->pending_bytes += len;
	/* Merge with the previous entry when contiguous: truncating a big file
	 * releases many adjacent extents. */
	if (j->npf && j->pf[j->npf - 1].dev == dev &&
	    j->pf[j->npf - 1].off + j->pf[j->npf - 1].len == off) {
		j->pf[j->npf - 1].len += len;
		return 0;
	}
	j->pf[j->npf++] = (struct nvmefs_pfree){dev, off, len};
	return 0;
}

/* ---- the durable free map and its FREE keys ---- */

static void fk_put(struct nvmefs_vol *vol, unsigned dev, const struct nvmefs_range *r)
{
	struct nvmefs_val v = {.kind = NVMEFS_KEY_FREE};

	if (!nvmefs_kv_on(vol))
		return;
	v.free.member = dev;
	v.free.off = r->off;
	v.free.len = r->len;
	nvmefs_kv_put(vol, &v); /* a failure sticks (kv_i.h) */
}

static void fk_del(struct nvmefs_vol *vol, unsigned dev, uint64_t end)
{
	uint8_t key[NVMEFS_KEY_MAX];

	if (nvmefs_kv_on(vol))
		nvmefs_kv_del(vol, key, nvmefs_key_free(key, dev, end));
}

/* First index whose range ends at or after off: the first that touches or
 * follows a range starting at off. */
static size_t fm_touch(const struct nvmefs_freemap *m, uint64_t off)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].off + m->v[mid].len < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool nvmefs_freemap_has_end(const struct nvmefs_freemap *m, uint64_t end)
{
	size_t i = fm_touch(m, end);

	return i < m->n && m->v[i].off + m->v[i].len == end;
}

/* Room for one more range, else the durable map and its keys no longer
 * follow the records: like a store put that failed, the volume goes
 * read-only at the next commit (kv_i.h) and fsck.nvmefs -y rewrites the
 * keys from the extents. */
static bool dfree_room(struct nvmefs_vol *vol, unsigned dev)
{
	if (!fm_reserve(&vol->dfree[dev], vol->dfree[dev].n + 1))
		return true;
	if (!vol->kv_err) {
		vol->kv_err = -ENOMEM;
		nvmefs_err("%s: metadata: out of memory changing member %u's free space; the "
			   "volume goes read-only at the next commit",
			   nvmefs_meta_where(vol), dev);
	}
	return false;
}

uint64_t nvmefs_alloc_applied_free(const struct nvmefs_vol *vol, unsigned dev, uint64_t off,
				   uint64_t len)
{
	const struct nvmefs_freemap *m = &vol->dfree[dev];
	uint64_t end = off + len, n = 0;

	for (size_t i = fm_touch(m, off + 1); i < m->n && m->v[i].off < end; i++) {
		uint64_t lo = m->v[i].off > off ? m->v[i].off : off;
		uint64_t hi = m->v[i].off + m->v[i].len < end ? m->v[i].off + m->v[i].len : end;

		n += hi - lo;
	}
	return n;
}

void nvmefs_alloc_applied_put(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len)
{
	struct nvmefs_freemap *m = &vol->dfree[dev];
	uint64_t lo = off, hi = off + len;
	size_t i, j;

	/* A load fills the maps from keys whose FREE keys say the rest. */
	if (vol->loading || !len || !dfree_room(vol, dev))
		return;
	/* v[i..j): the ranges the new one overlaps or touches (overlap only
	 * on damage: the union is taken, and fsck finds the cause). */
	i = fm_touch(m, off);
	for (j = i; j < m->n && m->v[j].off <= off + len; j++) {
		lo = m->v[j].off < lo ? m->v[j].off : lo;
		hi = m->v[j].off + m->v[j].len > hi ? m->v[j].off + m->v[j].len : hi;
	}
	if (j == i + 1 && m->v[i].off == lo && m->v[i].len == hi - lo)
		return; /* free already */
	for (size_t k = i; k < j; k++) {
		if (m->v[k].off + m->v[k].len != hi)
			fk_del(vol, dev, m->v[k].off + m->v[k].len);
	}
	if (j == i) {
		memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
		m->n++;
	} else if (j > i + 1) {
		memmove(&m->v[i + 1], &m->v[j], (m->n - j) * sizeof(*m->v));
		m->n -= j - i - 1;
	}
	m->v[i] = (struct nvmefs_range){lo, hi - lo};
	fk_put(vol, dev, &m->v[i]);
}

void nvmefs_alloc_applied_take(struct nvmefs_vol *vol, unsigned dev, uint64_t off, uint64_t len)
{
	struct nvmefs_freemap *m = &vol->dfree[dev];
	uint64_t end = off + len;
	size_t i;

	if (vol->loading || !len || !dfree_room(vol, dev))
		return;
	i = fm_touch(m, off + 1); /* the first range that ends after off */
	while (i < m->n && m->v[i].off < end) {
		struct nvmefs_range *r = &m->v[i];
		uint64_t rend = r->off + r->len;

		if (r->off < off && rend > end) { /* from the middle: split it */
			memmove(r + 2, r + 1, (m->n - i - 1) * sizeof(*r));
			r[1] = (struct nvmefs_range){end, rend - end};
			r->len = off - r->off;
			m->n++;
			fk_put(vol, dev, r);
			fk_put(vol, dev, r + 1); /* rend's key, shorter */
			return;
		}
		if (r->off < off) { /* the head stays: its end, so its key, moves */
			fk_del(vol, dev, rend);
			r->len = off - r->off;
			fk_put(vol, dev, r);
			i++;
		} else if (rend > end) { /* the tail stays: the same key (an append) */
			r->off = end;
			r->len = rend - end;
			fk_put(vol, dev, r);
			return;
		} else { /* all of it */
			fk_del(vol, dev, rend);
			memmove(r, r + 1, (m->n - i - 1) * sizeof(*r));
			m->n--;
		}
	}
}

int nvmefs_alloc_format(struct nvmefs_vol *vol)
{
	for (unsigned d = 0; d < vol->ndevs; d++) {
		vol->dfree[d].n = 0;
		nvmefs_alloc_applied_put(vol, d, vol->data_start[d],
					 vol->data_end[d] - vol->data_start[d]);
	}
	vol->free_keys = true;
	return vol->kv_err;
}

/* One FREE key of the store into the durable map: refused (-EUCLEAN) if
 * it names no member of the volume, lies outside the member's data area,
 * or overlaps or touches the key before it (keys come in order: by
 * member, then end), which a map of coalesced ranges never writes. */
static int load_key(struct nvmefs_vol *vol, const struct nvmefs_run_ent *e)
{
	struct nvmefs_val v;
	struct nvmefs_freemap *m;
	const struct nvmefs_range *last;
	unsigned d;
	int ret = nvmefs_val_decode(e->key, e->klen, e->val, e->vlen, &v);

	if (ret) {
		nvmefs_err("%s: metadata: a FREE key does not decode (%s)", nvmefs_meta_where(vol),
			   strerror(-ret));
		return -EUCLEAN;
	}
	d = v.free.member;
	m = &vol->dfree[d];
	last = d < vol->ndevs && m->n ? &m->v[m->n - 1] : NULL;
	if (d >= vol->ndevs || v.free.off < vol->data_start[d] ||
	    v.free.off + v.free.len > vol->data_end[d] ||
	    (last && last->off + last->len >= v.free.off)) {
		nvmefs_err("%s: metadata: the FREE key of member %u, bytes %" PRIu64 "-%" PRIu64
			   ", is outside its data area or overlaps another (fsck.nvmefs -y "
			   "rewrites the free space)",
			   nvmefs_meta_where(vol), d, v.free.off, v.free.off + v.free.len);
		return -EUCLEAN;
	}
	if (fm_reserve(m, m->n + 1))
		return -ENOMEM;
	m->v[m->n++] = (struct nvmefs_range){v.free.off, v.free.len};
	nvmefs_kv_put(vol, &v); /* loading: the shadow's copy only */
	return 0;
}

int nvmefs_alloc_load(struct nvmefs_vol *vol)
{
	const uint8_t prefix[1] = {NVMEFS_KEY_FREE};
	struct nvmefs_store_iter *it;
	struct nvmefs_run_ent e;
	size_t n = 0;
	int ret;

	for (unsigned d = 0; d < NVMEFS_MAX_DEVICES; d++)
		vol->dfree[d].n = 0;
	ret = nvmefs_store_iter_prefix(&it, vol->store, prefix, sizeof(prefix));
	if (ret)
		return ret;
	vol->loading = true;
	while ((ret = nvmefs_store_iter_next(it, &e)) == 1) {
		ret = load_key(vol, &e);
		/* The checker keeps what it can load: its space pass
		 * compares the store's keys themselves with the extents. */
		if (ret == -EUCLEAN && vol->opts.check)
			ret = 0;
		if (ret)
			break;
		n++;
	}
	vol->loading = false;
	nvmefs_store_iter_close(it);
	if (ret < 0)
		return ret;
	nvmefs_debug("free space loaded from %zu FREE keys", n);
	return 0;
}

int nvmefs_alloc_start(struct nvmefs_vol *vol)
{
	vol->free_bytes = 0;
	for (unsigned d = 0; d < vol->ndevs; d++) {
		struct nvmefs_freemap *m = &vol->free[d];

		m->n = 0;
		if (fm_reserve(m, vol->dfree[d].n + 1))
			return -ENOMEM;
		memcpy(m->v, vol->dfree[d].v, vol->dfree[d].n * sizeof(*m->v));
		m->n = vol->dfree[d].n;
		vol->free_bytes += fm_bytes(m);
	}
	return 0;
}

int nvmefs_alloc_check(struct nvmefs_vol *vol)
{
	struct nvmefs_freemap want[NVMEFS_MAX_DEVICES] = {0};
	int ret = complement(vol, want, true);

	/* Extents that overlap are damage (a test makes it on purpose) that
	 * leaves no complement to compare with: fsck's to find. */
	bool overlap = ret == -EUCLEAN;

	if (overlap)
		ret = 0;
	for (unsigned d = 0; !ret && !overlap && d < vol->ndevs; d++) {
		const struct nvmefs_freemap *a = &vol->dfree[d], *b = &want[d];
		size_t i = 0;

		while (i < a->n && i < b->n && a->v[i].off == b->v[i].off &&
		       a->v[i].len == b->v[i].len)
			i++;
		if (i == a->n && i == b->n)
			continue;
		nvmefs_err("%s: metadata: member %u: free range %zu is bytes %" PRIu64 "-%" PRIu64
			   " by the records applied (FREE keys) but %" PRIu64 "-%" PRIu64
			   " by the extents (0-0: none)",
			   nvmefs_meta_where(vol), d, i, i < a->n ? a->v[i].off : 0,
			   i < a->n ? a->v[i].off + a->v[i].len : 0, i < b->n ? b->v[i].off : 0,
			   i < b->n ? b->v[i].off + b->v[i].len : 0);
		ret = -EUCLEAN;
	}
	for (unsigned d = 0; d < vol->ndevs; d++)
		nvmefs_freemap_exit(&want[d]);
	return ret;
}
