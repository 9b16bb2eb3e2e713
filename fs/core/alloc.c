// SPDX-License-Identifier: MIT
/*
 * Free space: per member, a sorted array of free byte ranges, rebuilt at
 * mount as the complement of every extent (so free space is never written
 * to disk and can never disagree with the extent maps). Allocation prefers
 * the goal (right after the slot's previous extent) so sequential files get
 * long runs per device; released space waits on the open transaction's
 * pending list until that transaction is durable ("free after commit").
 * Everything here runs with the metadata lock held.
 */
#include "fs_i.h"
#include "alloc_i.h"
#include "store.h"
#include "util_i.h"
#include "values.h"

#include <errno.h>
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

/* Build one member's free map from the extents on it; refuse overlaps. */
static int rebuild_dev(struct nvmefs_vol *vol, unsigned dev, struct used *u, size_t n)
{
	struct nvmefs_freemap *m = &vol->free[dev];
	uint64_t pos = vol->data_start[dev];

	qsort(u, n, sizeof(*u), used_cmp);
	m->n = 0;
	for (size_t i = 0; i <= n; i++) {
		uint64_t next = i < n ? u[i].off : vol->data_end[dev];

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
			vol->free_bytes += next - pos;
		}
		if (i < n)
			pos = u[i].off + u[i].len;
	}
	return 0;
}

int nvmefs_alloc_rebuild(struct nvmefs_vol *vol)
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
	vol->free_bytes = 0;
	for (unsigned d = 0; d < vol->ndevs; d++) {
		ret = rebuild_dev(vol, d, u[d], cnt[d]);
		if (ret)
			goto out;
	}
	nvmefs_debug("free space rebuilt from %zu extents", total);
	ret = 0;
out:
	for (unsigned d = 0; u && d < vol->ndevs; d++)
		free(u[d]);
	free(u);
	free(cnt);
	return ret;
}

/* The next value of the iterator (decoded into v), 0 at its end. */
static int next_val(struct nvmefs_store_iter *it, struct nvmefs_val *v)
{
	struct nvmefs_run_ent e;
	int ret = nvmefs_store_iter_next(it, &e);

	if (ret != 1)
		return ret;
	return nvmefs_val_decode(e.key, e.klen, e.val, e.vlen, v) ? -EUCLEAN : 1;
}

/*
 * As nvmefs_alloc_rebuild, from the store rather than the maps (the
 * inodes are not all in memory): the EXTENT keys, each on the member its
 * inode's layout gives, joined with the INODE keys as both come in inode
 * order. Memory: the extents' ranges, not the inodes.
 */
int nvmefs_alloc_rebuild_store(struct nvmefs_vol *vol)
{
	uint8_t ki = NVMEFS_KEY_INODE, ke = NVMEFS_KEY_EXTENT;
	struct nvmefs_store_iter *ii = NULL, *ie = NULL;
	struct used *u[NVMEFS_MAX_DEVICES] = {0};
	size_t cnt[NVMEFS_MAX_DEVICES] = {0}, cap[NVMEFS_MAX_DEVICES] = {0}, total = 0;
	struct nvmefs_val iv = {0}, ev;
	int ret = nvmefs_store_iter_prefix(&ii, vol->store, &ki, 1);

	if (!ret)
		ret = nvmefs_store_iter_prefix(&ie, vol->store, &ke, 1);
	while (!ret && (ret = next_val(ie, &ev)) == 1) {
		const struct nvmefs_rec *x = &ev.rec;
		unsigned dev;

		while (iv.rec.inode.ino < x->extent.ino && (ret = next_val(ii, &iv)) == 1)
			;
		if (ret < 0)
			break;
		if (iv.rec.inode.ino != x->extent.ino || !S_ISREG(iv.rec.inode.mode) ||
		    x->extent.slot >= iv.rec.inode.layout.stripe_count) {
			nvmefs_err("%s: metadata: an extent of inode %llu, which is not a file "
				   "with that slot (fsck.nvmefs repairs this)",
				   nvmefs_meta_where(vol), (unsigned long long)x->extent.ino);
			ret = -EUCLEAN;
			break;
		}
		dev = iv.rec.inode.layout.devs[x->extent.slot];
		ret = nvmefs_grow(&u[dev], &cap[dev], cnt[dev] + 2, sizeof(*u[dev]));
		if (ret)
			break;
		u[dev][cnt[dev]++] = (struct used){x->extent.dev_off, x->extent.len, x->extent.ino};
		total++;
		ret = 0;
	}
	nvmefs_store_iter_close(ie);
	nvmefs_store_iter_close(ii);
	if (ret == -EUCLEAN || ret == -EINVAL)
		ret = -EUCLEAN;
	vol->free_bytes = 0;
	for (unsigned d = 0; d < vol->ndevs && !ret; d++)
		ret = rebuild_dev(vol, d, u[d], cnt[d]);
	for (unsigned d = 0; d < NVMEFS_MAX_DEVICES; d++)
		free(u[d]);
	if (!ret)
		nvmefs_debug("free space rebuilt from %zu stored extents", total);
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
