// SPDX-License-Identifier: MIT
/*
 * The store's iterators and walks (store.h): a merge of the memtables
 * (copied for an iterator, the frozen one read in place for a walk) and
 * the runs of one view, newest first, tombstones hidden.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store_i.h"

/* A copy of a memtable's entries in a key range: a merge source. */
struct snap {
	struct nvmefs_run_ent *e;
	size_t n, pos;
	uint8_t *bytes;
};

struct nvmefs_store_iter {
	struct nvmefs_store *s;
	struct view *v;
	struct snap snap[2];		  /* the memtable, the frozen one (copies: not a walk's) */
	struct nvmefs_memtable *frozen;	  /* a walk's: read in place, held */
	const struct nvmefs_mem_node *at; /* a walk's next node of it */
	struct nvmefs_runit *rit;	  /* level 0's runs, one source each */
	size_t nrit;
	struct lvlsrc *lvl; /* levels 1...: one source each, its runs in key order */
	size_t nlvl;
	struct nvmefs_kv_src *src;
	struct nvmefs_merge m;
	bool merging, has_hi;
	uint16_t hilen;
	uint8_t hi[NVMEFS_KEY_MAX];
};

static bool below_hi(const struct nvmefs_store_iter *it, const uint8_t *k, size_t klen)
{
	return !it->has_hi || nvmefs_key_cmp(k, klen, it->hi, it->hilen) < 0;
}

/* Copy m's entries in [lo, hi) into sn (s->lock held). */
static int snap_take(struct snap *sn, const struct nvmefs_memtable *m, const uint8_t *lo,
		     size_t lolen, struct nvmefs_store_iter *it)
{
	const struct nvmefs_mem_node *first = m ? nvmefs_mem_seek(m, lo, lolen) : NULL, *x;
	size_t bytes = 0, pos = 0;

	for (x = first; x && below_hi(it, x->key, x->klen); x = x->next[0]) {
		sn->n++;
		bytes += (size_t)x->klen + x->vlen;
	}
	it->s->st.iter_copied_bytes += bytes + sn->n * sizeof(*sn->e);
	sn->e = calloc(sn->n ? sn->n : 1, sizeof(*sn->e));
	sn->bytes = malloc(bytes ? bytes : 1);
	if (!sn->e || !sn->bytes)
		return -ENOMEM;
	for (size_t i = 0; i < sn->n; i++, first = first->next[0]) {
		nvmefs_mem_ent(first, &sn->e[i]);
		memcpy(sn->bytes + pos, first->key, (size_t)first->klen + first->vlen);
		sn->e[i].key = sn->bytes + pos;
		sn->e[i].val = sn->bytes + pos + first->klen;
		pos += (size_t)first->klen + first->vlen;
	}
	return 0;
}

static int snap_next(void *ctx, struct nvmefs_run_ent *e)
{
	struct snap *sn = ctx;

	if (sn->pos >= sn->n)
		return 0;
	*e = sn->e[sn->pos++];
	return 1;
}

/* A walk's frozen memtable, in place, as a merge source: it is not
 * written to while the walk holds it. */
static int walk_next(void *ctx, struct nvmefs_run_ent *e)
{
	struct nvmefs_store_iter *it = ctx;

	if (!it->at || !below_hi(it, it->at->key, it->at->klen))
		return 0;
	nvmefs_mem_ent(it->at, e);
	it->at = it->at->next[0];
	return 1;
}

/* May run r hold keys in [lo, hi)? */
static bool run_in_range(const struct nvmefs_store_iter *it, const struct nvmefs_run_meta *r,
			 const uint8_t *lo, size_t lolen)
{
	return (!lo || nvmefs_key_cmp(r->max, r->max_len, lo, lolen) >= 0) &&
	       below_hi(it, r->min, r->min_len);
}

/*
 * One level from 1 down as a single merge source: its runs hold disjoint
 * key ranges, in key order in the view, so they are read one after the
 * other, each opened when the one before it ends. The merge then compares
 * a head per level, not per run: a walk of a store of hundreds of runs
 * (a whole load: fsck's, a resident volume's) would otherwise scan them
 * all for every key.
 */
struct lvlsrc {
	struct srun *const *run; /* the level's runs in [lo, hi), in key order */
	size_t n, i;		 /* how many; the one open (or next) */
	struct nvmefs_runit rit; /* the first is opened and placed at lo with
				  * the iterator; each later one from its start */
	bool open;
};

static int lvl_next(void *ctx, struct nvmefs_run_ent *e)
{
	struct lvlsrc *l = ctx;

	for (;;) {
		struct nvmefs_kv_src src;
		int ret;

		if (!l->open) {
			if (l->i >= l->n)
				return 0;
			ret = nvmefs_runit_init(&l->rit, &l->run[l->i]->r);
			if (ret)
				return ret;
			l->open = true;
		}
		src = nvmefs_runit_src(&l->rit);
		ret = src.next(src.ctx, e);
		if (ret)
			return ret; /* an entry, or an error */
		/* The merge is done with the last entry (it asks for the next only
		 * then), so the run's buffer may go. */
		nvmefs_runit_exit(&l->rit);
		l->open = false;
		l->i++;
	}
}

/* The runs' iterators, placed at lo, after the two snapshots: level 0's
 * one per run (their ranges overlap), the deeper levels one per level. */
static int open_sources(struct nvmefs_store_iter *it, const uint8_t *lo, size_t lolen)
{
	const struct view *v = it->v;
	unsigned nsrc = 2;
	int ret;

	it->rit = calloc(v->n ? v->n : 1, sizeof(*it->rit));
	it->lvl = calloc(NVMEFS_RUN_LEVELS, sizeof(*it->lvl));
	it->src = calloc(v->n + 2, sizeof(*it->src));
	if (!it->rit || !it->lvl || !it->src)
		return -ENOMEM;
	it->src[0] = it->frozen ? (struct nvmefs_kv_src){.next = walk_next, .ctx = it}
				: (struct nvmefs_kv_src){.next = snap_next, .ctx = &it->snap[0]};
	it->src[1] = (struct nvmefs_kv_src){.next = snap_next, .ctx = &it->snap[1]};
	for (size_t i = v->lvl[0]; i < v->lvl[1]; i++) {
		struct nvmefs_runr *r = &v->run[i]->r;

		if (!run_in_range(it, &r->meta, lo, lolen))
			continue;
		ret = nvmefs_runit_init(&it->rit[it->nrit], r);
		if (ret)
			return ret;
		it->nrit++;
		ret = nvmefs_runit_seek(&it->rit[it->nrit - 1], lo, lolen);
		if (ret)
			return ret;
		it->src[nsrc++] = nvmefs_runit_src(&it->rit[it->nrit - 1]);
	}
	for (unsigned k = 1; k < NVMEFS_RUN_LEVELS; k++) {
		struct lvlsrc *l = &it->lvl[it->nlvl];
		size_t a = v->lvl[k], b = v->lvl[k + 1];

		/* The level's runs in range are consecutive: skip those below lo
		 * and stop at the first at or past hi. */
		while (a < b && !run_in_range(it, &v->run[a]->r.meta, lo, lolen))
			a++;
		l->run = &v->run[a];
		while (a < b && run_in_range(it, &v->run[a]->r.meta, lo, lolen)) {
			a++;
			l->n++;
		}
		if (!l->n)
			continue;
		it->nlvl++;
		ret = nvmefs_runit_init(&l->rit, &l->run[0]->r);
		if (ret)
			return ret;
		l->open = true;
		ret = nvmefs_runit_seek(&l->rit, lo, lolen);
		if (ret)
			return ret;
		it->src[nsrc++] = (struct nvmefs_kv_src){.next = lvl_next, .ctx = l};
	}
	ret = nvmefs_merge_init(&it->m, it->src, nsrc, false);
	it->merging = !ret;
	return ret;
}

/* The memtables' part of an iterator (s->lock held): copies of both, or
 * a walk's hold of the frozen one (none: the runs alone). */
static int take_mem(struct nvmefs_store_iter *it, const uint8_t *lo, size_t lolen, bool walk)
{
	struct nvmefs_store *s = it->s;
	int ret;

	if (!walk) {
		ret = snap_take(&it->snap[0], s->mem, lo, lolen, it);
		return ret ? ret : snap_take(&it->snap[1], s->imm, lo, lolen, it);
	}
	it->frozen = s->imm;
	if (it->frozen) {
		it->frozen->refs++;
		it->at = nvmefs_mem_seek(it->frozen, lo, lolen);
	}
	return 0;
}

static int iter_open(struct nvmefs_store_iter **out, struct nvmefs_store *s, const uint8_t *lo,
		     size_t lolen, const uint8_t *hi, size_t hilen, bool walk)
{
	struct nvmefs_store_iter *it;
	int ret;

	*out = NULL;
	if ((lo && lolen > NVMEFS_KEY_MAX) || (hi && hilen > NVMEFS_KEY_MAX))
		return -EINVAL;
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->s = s;
	if (hi) {
		it->has_hi = true;
		it->hilen = (uint16_t)hilen;
		memcpy(it->hi, hi, hilen);
	}
	pthread_mutex_lock(&s->lock);
	it->v = s->view;
	it->v->refs++;
	ret = take_mem(it, lo, lolen, walk);
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		ret = open_sources(it, lo, lolen);
	if (ret) {
		nvmefs_store_iter_close(it);
		return ret;
	}
	*out = it;
	return 0;
}

int nvmefs_store_iter_open(struct nvmefs_store_iter **out, struct nvmefs_store *s,
			   const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen)
{
	return iter_open(out, s, lo, lolen, hi, hilen, false);
}

int nvmefs_store_walk(struct nvmefs_store_iter **out, struct nvmefs_store *s, const uint8_t *lo,
		      size_t lolen, const uint8_t *hi, size_t hilen)
{
	return iter_open(out, s, lo, lolen, hi, hilen, true);
}

int nvmefs_store_iter_prefix(struct nvmefs_store_iter **out, struct nvmefs_store *s,
			     const uint8_t *prefix, size_t plen)
{
	uint8_t hi[NVMEFS_KEY_MAX];
	size_t hilen = plen;

	if (!plen || plen > NVMEFS_KEY_MAX)
		return -EINVAL;
	memcpy(hi, prefix, plen);
	while (hilen && hi[hilen - 1] == 0xff) /* the first key past the prefix */
		hilen--;
	if (hilen)
		hi[hilen - 1]++;
	return nvmefs_store_iter_open(out, s, prefix, plen, hilen ? hi : NULL, hilen);
}

int nvmefs_store_iter_next(struct nvmefs_store_iter *it, struct nvmefs_run_ent *e)
{
	int ret;

	if (!it->merging)
		return 0;
	ret = nvmefs_merge_next(&it->m, e);
	if (ret == 1 && !below_hi(it, e->key, e->klen))
		ret = 0;
	if (ret <= 0)
		it->merging = false; /* ended, or failed: nothing more */
	return ret;
}

void nvmefs_store_iter_close(struct nvmefs_store_iter *it)
{
	if (!it)
		return;
	if (it->src)
		nvmefs_merge_exit(&it->m);
	for (size_t i = 0; i < it->nrit; i++)
		nvmefs_runit_exit(&it->rit[i]);
	for (size_t i = 0; i < it->nlvl; i++)
		if (it->lvl[i].open)
			nvmefs_runit_exit(&it->lvl[i].rit);
	free(it->rit);
	free(it->lvl);
	free(it->src);
	for (int i = 0; i < 2; i++) {
		free(it->snap[i].e);
		free(it->snap[i].bytes);
	}
	pthread_mutex_lock(&it->s->lock);
	nvmefs_store_view_put(it->s, it->v);
	if (it->frozen && --it->frozen->refs) /* the store's, or another walk's */
		it->frozen = NULL;
	pthread_mutex_unlock(&it->s->lock);
	nvmefs_store_mem_free(it->frozen); /* flushed while walked: the last reader frees it */
	free(it);
}
