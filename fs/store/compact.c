// SPDX-License-Identifier: MIT
/*
 * The store's leveled compaction (store.h, nvmefs_store_compact): which
 * runs merge (level 0 into 1, or one run of an over-budget level into the
 * next), the merge written as output runs of at most cfg.run_blocks, and
 * the manifest that swaps them in.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store_i.h"
#include "util_i.h"

/* Level k's budget in blocks (k >= 1). */
static uint64_t budget(const struct nvmefs_store *s, uint32_t k)
{
	uint64_t b = s->cfg.l1_blocks;

	while (--k && b < UINT64_MAX / s->cfg.fanout)
		b *= s->cfg.fanout;
	return b;
}

struct pick {
	struct srun **in; /* newest first */
	size_t n;
	uint32_t level; /* the output's */
	bool drop_tombs;
	const struct nvmefs_run_meta *lo, *hi; /* the inputs' smallest and largest keys */
};

/* Does run m's key range meet [p->lo's min, p->hi's max]? */
static bool overlaps(const struct pick *p, const struct nvmefs_run_meta *m)
{
	return p->lo && nvmefs_key_cmp(m->max, m->max_len, p->lo->min, p->lo->min_len) >= 0 &&
	       nvmefs_key_cmp(m->min, m->min_len, p->hi->max, p->hi->max_len) <= 0;
}

static void pick_add(struct pick *p, struct srun *sr)
{
	const struct nvmefs_run_meta *m = &sr->r.meta;

	p->in[p->n++] = sr;
	if (!p->lo || nvmefs_key_cmp(m->min, m->min_len, p->lo->min, p->lo->min_len) < 0)
		p->lo = m;
	if (!p->hi || nvmefs_key_cmp(m->max, m->max_len, p->hi->max, p->hi->max_len) > 0)
		p->hi = m;
}

/* Runs of v at levels [lo, hi] into p, in v's order (newest first). */
static void pick_levels(const struct view *v, uint32_t lo, uint32_t hi, struct pick *p)
{
	for (size_t i = v->lvl[lo]; i < v->lvl[hi + 1]; i++)
		pick_add(p, v->run[i]);
}

/* The runs of level k that overlap the inputs so far (their range is then
 * the inputs': a level's runs are disjoint, so the output will be too). */
static void pick_overlapping(const struct view *v, uint32_t k, struct pick *p)
{
	size_t n = p->n;

	for (size_t i = v->lvl[k]; i < v->lvl[k + 1]; i++)
		if (overlaps(p, &v->run[i]->r.meta))
			p->in[n++] = v->run[i];
	while (p->n < n)
		pick_add(p, p->in[p->n]);
}

/* Level k's next run to push down: the first after the cursor, round
 * robin, so that every part of the key space takes its turn. */
static struct srun *pick_one(struct nvmefs_store *s, const struct view *v, uint32_t k)
{
	struct srun *sr = v->run[v->lvl[k]];

	for (size_t i = v->lvl[k]; i < v->lvl[k + 1]; i++) {
		const struct nvmefs_run_meta *m = &v->run[i]->r.meta;

		if (nvmefs_key_cmp(m->min, m->min_len, s->cursor[k], s->cursor_len[k]) > 0) {
			sr = v->run[i];
			break;
		}
	}
	memcpy(s->cursor[k], sr->r.meta.max, sr->r.meta.max_len);
	s->cursor_len[k] = sr->r.meta.max_len;
	return sr;
}

/* What the rule says to merge (store.h): 1, 0 when nothing is due, or
 * -ENOMEM. p->in is then the caller's to free. compact_lock held. */
static int pick(struct nvmefs_store *s, const struct view *v, bool full, struct pick *p)
{
	uint64_t size[NVMEFS_RUN_LEVELS] = {0};
	uint32_t deepest = 0;

	*p = (struct pick){.in = calloc(v->n ? v->n : 1, sizeof(*p->in))};
	if (!p->in)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const struct nvmefs_run_meta *m = &v->run[i]->r.meta;

		size[m->level] += nvmefs_run_blocks(m);
		deepest = m->level > deepest ? m->level : deepest;
	}
	if (full && v->n) {
		p->level = deepest ? deepest : 1;
		pick_levels(v, 0, deepest, p);
	} else if (v->lvl[1] > s->cfg.l0_runs) {
		p->level = 1;
		pick_levels(v, 0, 0, p);
		pick_overlapping(v, 1, p);
	}
	for (uint32_t k = 1; !p->n && k + 1 < NVMEFS_RUN_LEVELS; k++)
		if (size[k] > budget(s, k)) {
			p->level = k + 1;
			pick_add(p, pick_one(s, v, k));
			pick_overlapping(v, k + 1, p);
		}
	/* Tombstones go when no older run could hold what they delete. */
	p->drop_tombs = true;
	for (size_t i = v->lvl[p->level + 1]; i < v->n && p->n; i++)
		if (overlaps(p, &v->run[i]->r.meta))
			p->drop_tombs = false;
	return p->n > 0;
}

/* A compaction's output runs, each a separate reservation. */
struct outs {
	struct srun **run;
	size_t n, cap;
};

/* Give up the outputs: closed and their space free. */
static void outs_drop(struct nvmefs_store *s, struct outs *o)
{
	for (size_t i = 0; i < o->n; i++) {
		uint64_t id = o->run[i]->r.meta.id;

		nvmefs_store_srun_close(s, o->run[i]);
		nvmefs_store_drop_written(s, id);
	}
	o->n = 0;
}

/*
 * Blocks the output w takes at most once e is added: its data blocks, the
 * block being filled (written when e does not fit it: one block, or up to
 * NVMEFS_RUN_BLOCKS_MAX when it holds one long entry), e's own, and the
 * index and filter with e. For a writer not begun (zeroed): e alone.
 */
static uint64_t out_need(const struct nvmefs_runw *w, const struct nvmefs_run_ent *e)
{
	uint64_t ent = NVMEFS_RUN_HDR + NVMEFS_RUN_ENT_HDR + e->klen + e->vlen;
	uint64_t cur = w->big ? NVMEFS_RUN_BLOCKS_MAX : 1;

	return w->meta.data_blocks + cur + (ent + NVMEFS_BLOCK - 1) / NVMEFS_BLOCK +
	       nvmefs_obj_blocks(w->idx_len + 6 + e->klen) +
	       nvmefs_obj_blocks(nvmefs_filter_nbits(w->meta.nentries + 1) / 8);
}

/* Begin an output run of level for e: cfg.run_blocks reserved, or what e
 * alone needs if that is more. */
static int out_begin(struct nvmefs_store *s, struct nvmefs_runw *w, uint32_t level,
		     const struct nvmefs_run_ent *e)
{
	const struct nvmefs_runw none = {0};
	uint64_t want = out_need(&none, e);

	return nvmefs_runw_begin(w, s->a, level,
				 want > s->cfg.run_blocks ? want : s->cfg.run_blocks);
}

/* End the output w and open it into o. */
static int out_end(struct nvmefs_store *s, struct nvmefs_runw *w, struct outs *o)
{
	struct nvmefs_run_meta meta;
	struct srun *sr;
	int ret = nvmefs_runw_end(w, &meta);

	if (ret)
		return ret;
	ret = nvmefs_grow(&o->run, &o->cap, o->n + 1, sizeof(*o->run));
	if (!ret)
		ret = nvmefs_store_srun_open(s, &meta, &sr);
	if (ret) {
		nvmefs_store_drop_written(s, meta.id);
		return ret;
	}
	o->run[o->n++] = sr;
	return 0;
}

/*
 * Every entry of the merge m into runs of level, each ended before it
 * outgrows its reservation, or where the key kind changes once it holds
 * half of cfg.run_blocks, into o: 0 or -errno (o then the caller's to
 * drop).
 *
 * The cut at a kind: a volume being filled appends at the end of each
 * kind (new inodes, their directories' names, their extents), and a run
 * of such keys then overlaps no run of the next level, where a run
 * spanning two kinds overlapped the one holding the end of the first
 * (every such merge read and rewrote it). Not below half a run: a short
 * tail of one kind that overlaps nothing would go down the levels as it
 * is, merged with nothing, and such runs would pile up with every
 * compaction (the manifest's slot holds a few thousand); carried on into
 * the next kind, it is merged again as before.
 */
static int copy_merge(struct nvmefs_store *s, struct nvmefs_merge *m, uint32_t level,
		      struct outs *o)
{
	struct nvmefs_run_ent e;
	struct nvmefs_runw w;
	bool open = false;
	uint8_t kind = 0;
	int ret;

	while ((ret = nvmefs_merge_next(m, &e)) == 1) {
		/* Full, or another kind past half a run: e opens the next. */
		if (open && (out_need(&w, &e) > w.cap ||
			     (e.key[0] != kind && 2 * w.meta.data_blocks >= s->cfg.run_blocks))) {
			open = false;
			ret = out_end(s, &w, o);
			if (ret)
				return ret;
		}
		if (!open && (ret = out_begin(s, &w, level, &e)))
			return ret;
		open = true;
		kind = e.key[0];
		ret = nvmefs_runw_add(&w, e.key, e.klen, e.val, e.vlen, e.tomb);
		if (ret)
			break;
	}
	if (ret && open)
		nvmefs_runw_abort(&w);
	else if (open)
		ret = out_end(s, &w, o);
	return ret;
}

/* Merge p's runs into runs of p->level, into o (none when every entry
 * was deleted): 0 or -errno (nothing left written). */
static int merge_write(struct nvmefs_store *s, const struct pick *p, struct outs *o)
{
	struct nvmefs_runit *it = calloc(p->n, sizeof(*it));
	struct nvmefs_kv_src *src = calloc(p->n, sizeof(*src));
	struct nvmefs_merge m;
	size_t nit = 0;
	int ret = it && src ? 0 : -ENOMEM;

	for (; nit < p->n && !ret; nit++) {
		ret = nvmefs_runit_init(&it[nit], &p->in[nit]->r);
		src[nit] = nvmefs_runit_src(&it[nit]);
	}
	if (!ret)
		ret = nvmefs_merge_init(&m, src, (unsigned)p->n, !p->drop_tombs);
	if (ret)
		goto out;
	ret = copy_merge(s, &m, p->level, o);
	nvmefs_merge_exit(&m);
	if (ret)
		outs_drop(s, o);
out:
	for (size_t i = 0; i < nit; i++)
		nvmefs_runit_exit(&it[i]);
	free(it);
	free(src);
	return ret;
}

/* Commit the outputs o in place of p's inputs, or drop them. */
static int compact_commit(struct nvmefs_store *s, const struct pick *p, struct outs *o)
{
	uint64_t blocks = 0, in = 0;
	int ret;

	for (size_t i = 0; i < p->n; i++)
		in += p->in[i]->r.meta.data_blocks; /* index and filter are in memory */
	pthread_mutex_lock(&s->commit_lock);
	ret = nvmefs_store_commit_view(s, p->in, p->n, o->run, o->n,
				       &nvmefs_runs_current(s->a)->mark, false);
	pthread_mutex_unlock(&s->commit_lock);
	if (ret) {
		outs_drop(s, o);
		return ret;
	}
	for (size_t i = 0; i < o->n; i++)
		blocks += nvmefs_run_blocks(&o->run[i]->r.meta);
	pthread_mutex_lock(&s->lock);
	s->st.compactions++;
	s->st.compact_blocks_written = blocks;
	s->st.compact_runs_written = o->n;
	s->st.compact_read_blocks += in;
	s->st.compact_written_blocks += blocks;
	pthread_mutex_unlock(&s->lock);
	return 1;
}

int nvmefs_store_compact(struct nvmefs_store *s, bool full)
{
	struct outs o = {0};
	struct view *v;
	struct pick p;
	int ret = 0;

	pthread_mutex_lock(&s->compact_lock);
	pthread_mutex_lock(&s->lock);
	v = s->view;
	v->refs++;
	pthread_mutex_unlock(&s->lock);
	ret = pick(s, v, full, &p);
	if (ret > 0) /* after a failed commit nothing is written: -EIO before reading */
		ret = nvmefs_runs_failed(s->a) ? -EIO : merge_write(s, &p, &o);
	if (!ret && p.n)
		ret = compact_commit(s, &p, &o);
	free(o.run);
	free(p.in);
	pthread_mutex_lock(&s->lock);
	nvmefs_store_view_put(s, v);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->compact_lock);
	return ret;
}
